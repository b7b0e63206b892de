/* decode.h - generating output: greedy decoding, beam search, and the KV cache.
 * (The cached step is decode.c; the searches on top of it, search.c.)
 *
 * Training sees the whole target at once (teacher forcing, the causal mask);
 * generation cannot: token t+1 depends on the token chosen at t. So decoding
 * takes one decoder step per output token, cached or not. The KV cache only
 * removes the repeated work:
 *
 *   uncached (the reference): step t runs the decoder over the whole prefix
 *       y_0..y_t again (model_decode), O(t) positions per step;
 *   cached: step t runs the decoder for position t alone. What the source
 *       contributes is computed once (decoder_begin), what earlier
 *       positions contribute is kept:
 *         cross K (B, h, Ts, d_k), V (B, h, Ts, d_v)   per layer: memory W^K,
 *                   memory W^V, from the encoder's output memory (B, Ts, d_model),
 *                   which no step reads again
 *         self  K (R, h, t+1, d_k), V (R, h, t+1, d_v) per layer after step t:
 *                   step t appends position t
 *       (B sentences, R = B x K rows: K beams per sentence; the cross-attention
 *       K, V are shared by a sentence's beams). Because of the causal mask
 *       (Sec. 3.2.3) position t's output depends only on positions <= t, so
 *       the two give the same numbers up to float rounding (tests/check_decode.c).
 *
 * Search (Sec. 6.1: "beam search with a beam size of 4 and length penalty
 * alpha = 0.6 ... maximum output length to input length + 50, but terminate
 * early when possible"), defined precisely here. The paper's numbers come
 * from its code, tensor2tensor (utils/beam_search.py), and decode_beam
 * follows that code's rule by default (BEAM_RULE_T2T); the textbook rule
 * (BEAM_RULE_TOPK_ONLY) is kept beside it to show where the two part.
 *   - |x| = the source's non-padding tokens; a sentence may generate at most
 *     L = |x| + offset tokens (never more than the PE table's max_len, nor
 *     fewer than 1). The start symbol is not counted; an end symbol is.
 *     (t2t uses one L for a whole batch, from its padded length: L here is
 *     t2t's with one sentence per batch.) DecodeOpts.max_out > 0 gives
 *     every sentence that one L instead, within the same limits.
 *   - The padding id is never generated (its log-probability is still part
 *     of the softmax: log-probs are the model's own).
 *   - Greedy: each row appends its argmax (lowest id on a tie); a row is done
 *     when it emits end_id or reaches L; decoding stops when every row is done.
 *   - Beam (K beams, alpha): a sentence holds up to K live hypotheses and a
 *     finished set. Each step every live hypothesis y, with sum log-prob
 *     s(y), extends by every token w: candidate s + log p(w | y). Per
 *     sentence the candidates are ranked by s (ties: lower beam index, then
 *     lower id). A finished hypothesis scores s / lp(|y|), lp of Wu et al.
 *     2016 (the paper's alpha = 0.6 is its alpha):
 *         lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha.
 *   - BEAM_RULE_T2T (the default; decode_opts_paper), each step:
 *       * the 2K best candidates are kept, the rest dropped (t2t ranks by
 *         s / lp(t+1): the same order, all candidates of a step having one
 *         length). At most K of them end in end_id (one per live beam), so
 *         at least K do not;
 *       * EVERY one of the 2K that ends in end_id is finished, wherever it
 *         ranks among them, also below the K-th live one; the finished set
 *         keeps the K best scores (the one found first on a tie);
 *       * the K best of the 2K that do not end in end_id are the live beams.
 *     Early stop: s only falls as a hypothesis grows and lp(n) <= lp(L), so
 *     no descendant of a live beam can score more than s / lp(L). A
 *     sentence ends when its finished set is not empty and its WORST score
 *     is greater than the best live beam's s / lp(L) (t2t's test; the best
 *     one would give the same answer, sometimes sooner: t2t's also settles
 *     the set itself once it holds K, its n-best list), or after step L.
 *     (t2t stops a whole batch when every sentence passes the test; going
 *     on never changes a sentence's answer once it has.) The answer is the
 *     best of the finished set; only when nothing finished by step L is it
 *     the best live beam (the highest s: L tokens, no end symbol, score
 *     s / lp(L); t2t reports s itself there) - even a live beam scoring
 *     more than every finished hypothesis loses to them at step L.
 *   - BEAM_RULE_TOPK_ONLY (the textbook rule), each step: walking down the
 *     ranked candidates, one ending in end_id is finished, every other one
 *     becomes a live beam, until K live beams are found; an end candidate
 *     ranked below the K-th live one is dropped, even one that would have
 *     won. At step L the live beams are finished as they are and compete
 *     with the others on score. A sentence ends when its BEST finished
 *     score is at least every live beam's s / lp(L), or at step L. The
 *     answer is the finished hypothesis with the highest score (first found
 *     on a tie).
 *   - Both rules end the search when every sentence has ended.
 *   - Beam size 1 is greedy decoding with BEAM_RULE_TOPK_ONLY at alpha = 0,
 *     and with either rule when there is no end_id. With BEAM_RULE_T2T and
 *     an end_id it is not: its 2 candidates per step keep an end symbol
 *     ranked second as a finished hypothesis.
 *   The same beam search for one sentence, written plainly (token lists,
 *   no cache, no batch): beam_ref.h, which tests/check_decode.c holds
 *   decode_beam to.
 *
 * Ownership: decoder_new allocates everything once; nothing is allocated
 * per step. Results point into the Decoder and are valid until the next
 * decode_* call.
 */
#ifndef DECODE_H
#define DECODE_H

#include <stddef.h>
#include <stdint.h>
#include "model/model.h"

/* Wu et al. 2016's length penalty lp(Y) = ((5 + len)^alpha) / ((5 + 1)^alpha). */
double length_penalty(int len, double alpha);

/* decode_beam's two rules (the top of this file has them in full). 0 is
 * the paper's code, so an options struct without .rule gets it. */
typedef enum {
    BEAM_RULE_T2T = 0,        /* tensor2tensor's: every end symbol in the top 2K finishes */
    BEAM_RULE_TOPK_ONLY = 1,  /* textbook: only end symbols above the K-th live one finish */
} BeamRule;

typedef struct {
    int beam;        /* K >= 1 (1 with decode_greedy)                           */
    float alpha;     /* length penalty exponent, finite and >= 0 (paper 0.6)     */
    int offset;      /* max output length = source length + offset (paper 50)    */
    int max_out;     /* > 0: max output length of every sentence instead (0: offset's) */
    int start_id;    /* the decoder's first input                                */
    int end_id;      /* end-of-sentence id, or -1 (none: always L tokens)        */
    int cached;      /* 1: KV cache; 0: recompute the prefix (the reference)     */
    BeamRule rule;   /* which candidates finish, when to stop (see the top)      */
} DecodeOpts;

/* beam 4, alpha 0.6, offset 50 (Sec. 6.1), cached, BEAM_RULE_T2T;
 * start_id / end_id as given. */
DecodeOpts decode_opts_paper(int start_id, int end_id);
/* 0 if o is usable with this model, otherwise 2 and a plain message
 * ("beam is 0; it must be at least 1"). */
int decode_check_opts(const Config *c, const DecodeOpts *o, char *err, size_t errlen);
/* L for one source src (Ts ids): |x| + o->offset, |x| its non-padding
 * tokens (or o->max_out when > 0), within [1, c->max_len] (the PE table's
 * rows). */
int decode_max_len(const Config *c, const DecodeOpts *o, const int *src, int Ts);

/* One step of the beam tree, for printing: after step t every row r of
 * sentence b (r = b*K + k) holds a live hypothesis that extends row
 * parent of the step before by token, with sum log-prob sum. */
typedef struct {
    int parent, token;
    float sum;
} BeamNode;

typedef struct {
    int sentence, step, parent, token; /* finished at step (1-based), from row parent */
    int len;                           /* generated tokens, the end symbol included     */
    float sum, score;                  /* sum log-prob and sum / lp(len)                */
} BeamFinished;

typedef struct {
    Model *m;                   /* weights (not owned)                                    */
    const Backend *be;          /* m->be when built: where the step runs (backend.h)       */
    int max_B, max_K, max_Ts, max_T; /* capacity: sentences, beams, source tokens, positions */
    int B, K, R, Ts, pos;       /* this decode: sentences, beams, rows B*K, source, cached positions */
    int cached;

    /* the cache (cached mode); (be) = the backend's memory, (host+be) = a host
     * array with the backend's view w_* of it (the same memory on the CPU) */
    int *src;                   /* (B,Ts) source ids (host)                                */
    uint8_t *keep, *be_keep;     /* (B,Ts) 1 = real source token, 0 = padding (host+be)     */
    float *memory;              /* (B,Ts,D) encoder output (be, as everything down to logits) */
    float *cross_k, *cross_v;   /* (N,B,h,Ts,d_k), (N,B,h,Ts,d_v)                         */
    float *self_k[2], *self_v[2]; /* (N,R,h,max_T,d_k) each, [0] live, [1] for reordering */

    /* one step's activations, (R, .) each */
    int *be_tok;                  /* (R) this step's input ids                               */
    float *x, *y, *ln, *mean, *rstd, *q, *k, *v, *o, *sub, *hidden, *scores;
    float *logits;              /* (R,V)                                                  */
    float *logp, *be_logp;       /* (R,V) log-probabilities of the next token (host+be)     */
    float *cross_w, *be_cross_w; /* (N,R,h,Ts) cross-attention weights of the last step (host+be) */
    int *rows;                  /* (max(R, B*Ts) * h) row indices for gather_rows (host)   */
    int *prefix;                /* (R,max_T) the uncached path's contiguous input          */

    /* history of every row, reordered with the cache */
    int *hist[2];               /* (R,max_T) decoder inputs so far: start, y_1, ...       */
    float *hist_lp[2];          /* (R,max_T) log-prob of each generated token             */
    float *sum;                 /* (R) sum log-prob of each live hypothesis               */
    float *new_sum, *new_lp;    /* (R) the same after this step's pruning; its token's log-prob */
    int *alive, *parent, *tok, *maxlen; /* (R) (R) (R) (B) scratch for search             */

    /* results: best hypothesis per sentence */
    int *out;                   /* (B,max_T) generated tokens (pad_id after len)          */
    float *out_lp;              /* (B,max_T) their log-probs                              */
    int *out_len;               /* (B)                                                    */
    float *out_sum, *out_score; /* (B)                                                    */
    int steps;                  /* decoder steps taken (the sequential depth)              */

    /* beam trace for printing (beam search only) */
    BeamNode *trace;            /* (max_T, R)                                             */
    BeamFinished *fin;          /* every hypothesis that finished: up to (max_T+1) * R     */
    float *fin_top;             /* (B,K) the finished set's K best scores per sentence,
                                   descending, -inf where empty (t2t's early stop)          */
    int n_fin, max_fin;
    float *cand_s; int *cand_i; /* (2*K) per sentence: the best candidates                */
} Decoder;

/* Allocates a decoder for up to max_B sentences x max_K beams, max_Ts source
 * tokens and outputs of up to max_out tokens, on the model's backend m->be
 * (move the model with model_to first: a decoder stays on the backend it
 * was built for, and decoder_begin refuses a model that moved since). The uncached path also needs
 * the model built with max_B*max_K sequences of (max_Ts, max_out) tokens.
 * Returns 0, or 2 with a message (sizes, out of memory); d is then safe to
 * decoder_free. */
int decoder_new(Decoder *d, Model *m, int max_B, int max_K, int max_Ts, int max_out,
                char *err, size_t errlen);
void decoder_free(Decoder *d);   /* no-op on a zeroed or freed Decoder */
/* Floats decoder_new allocates for these sizes: the encoder output and the
 * cross-attention K, V once per sentence, the self-attention K, V cache (two
 * copies, for reordering beams) and one step's activations per row, where
 * the logits are only rows x V. */
double decoder_floats(const Config *c, int max_B, int max_K, int max_Ts, int max_out);

/* ---- the incremental step (decode.c; the building blocks of decode_*) -------
 * decoder_begin: src (B,Ts) validated ids; K rows per sentence; encodes
 * once and (cached) projects every layer's cross-attention K, V. pos = 0.
 * decoder_step: tok (R) is the input at position pos for every row; returns
 * logp (R,V), the next-token distribution of every row; pos += 1.
 * decoder_reorder: row r takes over row parent[r]'s cache and history. */
int decoder_begin(Decoder *d, const int *src, int B, int Ts, int K, int cached,
                  char *err, size_t errlen);
const float *decoder_step(Decoder *d, const int *tok);
void decoder_reorder(Decoder *d, const int *parent);

/* ---- search (search.c, with the options above) ------------------------------
 * src (B,Ts) validated token ids. Return 0, or 2 with a message (bad
 * options, sizes beyond the decoder's capacity). Results in d->out etc. */
int decode_greedy(Decoder *d, const DecodeOpts *o, const int *src, int B, int Ts,
                  char *err, size_t errlen);
int decode_beam(Decoder *d, const DecodeOpts *o, const int *src, int B, int Ts,
                char *err, size_t errlen);

/* ---- the step's ops ---------------------------------------------------------
 * The cached step runs, through the backend table (backend.h), the ops of a
 * decoder layer cut to one new position per row: products with few rows
 * (linear_rows_forward, logits_rows_forward), Eq. (1) for one query per row
 * and head (attend_rows_forward) and row copies in and out of the cache
 * (gather_rows). The CPU's are ref/rows.h (the plain loops, where their
 * contracts are written) and their tuned twins fast/rows_fast.h (what
 * backend_cpu.c runs); the GPU's are in cuda/decode_kernels.cu. */

/* ---- cost -----------------------------------------------------------------
 * Floating-point operations (2 per multiply-add) of the decoder for the
 * token at position t (0-based) with a source of Ts tokens: cached runs
 * position t alone against t+1 cached keys; uncached reruns positions 0..t.
 * Matrix products only (LayerNorm, softmax and adds are O(d_model) each). */
double decode_flops_cached(const Config *c, int t, int Ts);
double decode_flops_uncached(const Config *c, int t, int Ts);
/* Bytes of self-attention cache per generated token per layer: K and V,
 * h*(d_k + d_v) floats (= 2 d_model with d_k = d_v = d_model/h). */
size_t decode_cache_bytes_per_token_layer(const Config *c);

#endif
