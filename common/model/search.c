/* search.c - greedy decoding and beam search on top of the decoder step.
 *
 * Read decode.h first: it defines the search precisely. The step (the KV
 * cache, decoder_step, decoder_reorder) is decode.c's; beam_ref.c is the
 * same beam search for one sentence, plainly, without the step.
 */
#include "model/decode.h"
#include "core/fail.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double length_penalty(int len, double alpha) {
    /* Wu et al. 2016, Eq. 14: lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha. alpha = 0
     * gives 1 (raw sum of log-probs, which favours short outputs); larger
     * alpha divides long outputs' (negative) sums by more. */
    return pow(5.0 + len, alpha) / pow(6.0, alpha);
}

DecodeOpts decode_opts_paper(int start_id, int end_id) {
    DecodeOpts o = {.beam = 4, .alpha = 0.6f, .offset = 50, .start_id = start_id, .end_id = end_id, .cached = 1,
                    .rule = BEAM_RULE_T2T};
    return o;
}

int decode_check_opts(const Config *c, const DecodeOpts *o, char *err, size_t errlen) {
    if (o->beam < 1 || o->beam > 1024)
        return fail(err, errlen, "beam is %d; it must be between 1 and 1024 (the paper uses 4)", o->beam);
    if (!isfinite(o->alpha) || o->alpha < 0)
        return fail(err, errlen, "alpha is %g; the length penalty needs a finite alpha >= 0 (paper 0.6)",
                    (double)o->alpha);
    if (o->start_id < 0 || o->start_id >= c->vocab || o->start_id == c->pad_id)
        return fail(err, errlen, "start id %d must be a token id in 0..%d other than padding (%d)",
                    o->start_id, c->vocab - 1, c->pad_id);
    if (o->end_id < -1 || o->end_id >= c->vocab || (o->end_id >= 0 && o->end_id == c->pad_id))
        return fail(err, errlen, "end id %d must be -1 (none) or a token id in 0..%d other than padding",
                    o->end_id, c->vocab - 1);
    if (o->offset < -MODEL_MAX_LEN || o->offset > MODEL_MAX_LEN)
        return fail(err, errlen, "offset %d is out of range", o->offset);
    if (o->max_out < 0 || o->max_out > MODEL_MAX_LEN)
        return fail(err, errlen, "max_out %d is out of range (0: source length + offset)", o->max_out);
    if (o->rule != BEAM_RULE_T2T && o->rule != BEAM_RULE_TOPK_ONLY)
        return fail(err, errlen, "beam rule %d is neither BEAM_RULE_T2T (%d) nor BEAM_RULE_TOPK_ONLY (%d)",
                    (int)o->rule, BEAM_RULE_T2T, BEAM_RULE_TOPK_ONLY);
    return 0;
}

/* ============================================================================
 * Greedy decoding and beam search
 * ========================================================================== */

int decode_max_len(const Config *c, const DecodeOpts *o, const int *src, int Ts) {
    int n = 0;
    for (int j = 0; j < Ts; j++) n += src[j] != c->pad_id;
    long L = o->max_out > 0 ? o->max_out : (long)n + o->offset;
    if (L > c->max_len) L = c->max_len;
    return L < 1 ? 1 : (int)L;
}

/* Every sentence's L (decode_max_len) into d->maxlen. Returns the longest,
 * or -1 when one does not fit the decoder (message in err). */
static int set_max_lengths(Decoder *d, const DecodeOpts *o, char *err, size_t errlen) {
    int longest = 0;
    for (int b = 0; b < d->B; b++) {
        int L = decode_max_len(&d->m->cfg, o, d->src + (size_t)b * d->Ts, d->Ts);
        if (L > d->max_T) {
            char why[64];
            int n = 0;
            for (int j = 0; j < d->Ts; j++) n += d->src[(size_t)b * d->Ts + j] != d->m->cfg.pad_id;
            if (o->max_out > 0) snprintf(why, sizeof why, "max_out %d", o->max_out);
            else snprintf(why, sizeof why, "source %d + offset %d", n, o->offset);
            fail(err, errlen, "sentence %d may produce %d tokens (%s), more than the decoder was built for (%d)",
                 b, L, why, d->max_T);
            return -1;
        }
        d->maxlen[b] = L;
        longest = L > longest ? L : longest;
    }
    return longest;
}

static int begin_search(Decoder *d, const DecodeOpts *o, const int *src, int B, int Ts, int K,
                        char *err, size_t errlen) {
    const Config *c = &d->m->cfg;
    int rc = decode_check_opts(c, o, err, errlen);
    if (rc) return rc;
    if (B < 1 || K < 1 || Ts < 1 || B > d->max_B || K > d->max_K || Ts > d->max_Ts)
        return fail(err, errlen, "%d sentences x %d beams of %d source tokens exceed the decoder's "
                    "capacity (%d x %d, %d)", B, K, Ts, d->max_B, d->max_K, d->max_Ts);
    if ((rc = model_check_tokens(c, src, B * Ts, "source", err, errlen))) return rc;
    if ((rc = decoder_begin(d, src, B, Ts, K, o->cached, err, errlen))) return rc;
    for (int b = 0; b < B; b++) {
        d->out_len[b] = 0;
        d->out_sum[b] = d->out_score[b] = -INFINITY;
        for (int j = 0; j < d->max_T; j++) {
            d->out[(size_t)b * d->max_T + j] = c->pad_id;
            d->out_lp[(size_t)b * d->max_T + j] = 0.0f;
        }
    }
    for (int r = 0; r < B * K; r++) d->fin_top[r] = -INFINITY;
    d->steps = 0, d->n_fin = 0;
    return 0;
}

int decode_greedy(Decoder *d, const DecodeOpts *o, const int *src, int B, int Ts,
                  char *err, size_t errlen) {
    int rc = begin_search(d, o, src, B, Ts, 1, err, errlen);
    if (rc) return rc;
    int longest = set_max_lengths(d, o, err, errlen);
    if (longest < 0) return 2;
    const Config *c = &d->m->cfg;
    int V = c->vocab, T = d->max_T;
    for (int b = 0; b < B; b++) d->tok[b] = o->start_id, d->alive[b] = 1, d->out_sum[b] = 0;
    for (int t = 0; t < longest; t++) {
        const float *logp = decoder_step(d, d->tok);   /* (B,V): predicts token t+1 */
        d->steps++;
        int any = 0;
        for (int b = 0; b < B; b++) {
            if (!d->alive[b]) continue;
            const float *row = logp + (size_t)b * V;
            int best = -1;
            for (int v = 0; v < V; v++)
                if (v != c->pad_id && (best < 0 || row[v] > row[best])) best = v;
            d->out[(size_t)b * T + t] = best;
            d->out_lp[(size_t)b * T + t] = row[best];
            d->out_sum[b] += row[best];
            d->out_len[b] = t + 1;
            d->tok[b] = best;
            if (best == o->end_id || t + 1 == d->maxlen[b]) d->alive[b] = 0;
            any |= d->alive[b];
        }
        if (!any) break;
    }
    for (int b = 0; b < B; b++) d->out_score[b] = (float)(d->out_sum[b] / length_penalty(d->out_len[b], o->alpha));
    return 0;
}

/* Keeps the n best (score, index) pairs in descending order; a tie goes to
 * the pair seen first (lower beam, then lower token id: the insertion order). */
static void keep_best(float *s, int *idx, int *n, int cap, float score, int i) {
    if (*n == cap && !(score > s[cap - 1])) return;
    int j = *n < cap ? (*n)++ : cap - 1;
    while (j > 0 && score > s[j - 1]) {
        s[j] = s[j - 1], idx[j] = idx[j - 1];
        j--;
    }
    s[j] = score, idx[j] = i;
}

/* Sentence b's answer becomes the tokens of row `row` so far plus token w
 * (its log-prob lp) as generated token number t + 1. */
static void set_answer(Decoder *d, int b, int t, int row, int w, float lp, float sum, float score) {
    int T = d->max_T;
    d->out_score[b] = score, d->out_sum[b] = sum, d->out_len[b] = t + 1;
    const int *h = d->hist[0] + (size_t)row * T;          /* h[0] is the start symbol */
    const float *hl = d->hist_lp[0] + (size_t)row * T;
    for (int j = 0; j < T; j++) {
        d->out[(size_t)b * T + j] = j < t ? h[j + 1] : j == t ? w : d->m->cfg.pad_id;
        d->out_lp[(size_t)b * T + j] = j < t ? hl[j] : j == t ? lp : 0.0f;
    }
}

/* A finished hypothesis of sentence b: row `row`'s tokens plus w as token
 * number n = t + 1, scored sum / lp(n). It is recorded (d->fin), enters the
 * sentence's finished set of K if it beats the worst there (d->fin_top: an
 * equal score goes after the ones already there, as tensor2tensor's top_k
 * keeps the lower index first), and is the answer if it beats the best. */
static void finish(Decoder *d, const DecodeOpts *o, int b, int t, int row, int w, float lp, float sum) {
    int n = t + 1, K = d->K;
    float score = (float)(sum / length_penalty(n, o->alpha));
    if (d->n_fin < d->max_fin)
        d->fin[d->n_fin++] = (BeamFinished){b, n, row, w, n, sum, score};
    float *top = d->fin_top + (size_t)b * K;
    if (score > top[K - 1]) {
        int j = K - 1;
        while (j > 0 && score > top[j - 1]) top[j] = top[j - 1], j--;
        top[j] = score;
    }
    if (score > d->out_score[b]) set_answer(d, b, t, row, w, lp, sum, score);
}

/* The lowest score in sentence b's finished set; -inf when it is empty. */
static float finished_worst(const Decoder *d, int b) {
    const float *top = d->fin_top + (size_t)b * d->K;
    int j = d->K - 1;
    while (j > 0 && top[j] == -INFINITY) j--;
    return top[j];
}

int decode_beam(Decoder *d, const DecodeOpts *o, const int *src, int B, int Ts,
                char *err, size_t errlen) {
    int K = o->beam;
    int rc = begin_search(d, o, src, B, Ts, K, err, errlen);
    if (rc) return rc;
    int longest = set_max_lengths(d, o, err, errlen);
    if (longest < 0) return 2;
    const Config *c = &d->m->cfg;
    int V = c->vocab, R = B * K, T = d->max_T, t2t = o->rule == BEAM_RULE_T2T;
    float *new_sum = d->new_sum, *new_lp = d->new_lp;
    if ((double)K * V > 2e9) return fail(err, errlen, "beam %d x vocabulary %d is too many candidates", K, V);
    /* Step 0: one hypothesis per sentence (beam 0); the others start at -inf
     * so that the first step does not pick the same token K times. */
    for (int r = 0; r < R; r++) d->tok[r] = o->start_id, d->sum[r] = r % K ? -INFINITY : 0.0f;
    for (int b = 0; b < B; b++) d->alive[b] = 1;
    for (int t = 0; t < longest; t++) {
        const float *logp = decoder_step(d, d->tok);   /* (R,V) */
        d->steps++;
        int n = t + 1, any = 0;
        for (int b = 0; b < B; b++) {
            int r0 = b * K;
            if (!d->alive[b]) {
                for (int k = 0; k < K; k++) {
                    d->parent[r0 + k] = r0 + k, d->tok[r0 + k] = o->start_id, new_sum[r0 + k] = -INFINITY,
                    new_lp[r0 + k] = 0;
                    d->trace[(size_t)t * R + r0 + k] = (BeamNode){-1, o->start_id, -INFINITY};
                }
                continue;
            }
            /* the 2K best extensions: at most K end in end_id (one per beam), so
             * K live ones are among them whenever K exist */
            int nc = 0;
            for (int k = 0; k < K; k++) {
                float s = d->sum[r0 + k];
                if (s == -INFINITY) continue;
                const float *row = logp + (size_t)(r0 + k) * V;
                for (int w = 0; w < V; w++)
                    if (w != c->pad_id && row[w] > -INFINITY)
                        keep_best(d->cand_s, d->cand_i, &nc, 2 * K, s + row[w], k * V + w);
            }
            /* Down the 2K: an end symbol finishes, the first K others live on.
             * The textbook rule stops at the K-th live one, dropping the end
             * symbols below it; t2t finishes every end symbol of the 2K, so a
             * short output that ranks just below the K-th live one is kept
             * (it may be the best the search ever finds). */
            int live = 0;
            for (int j = 0; j < nc && (t2t || live < K); j++) {
                int k = d->cand_i[j] / V, w = d->cand_i[j] % V, r = r0 + k;
                float lp = logp[(size_t)r * V + w];
                if (w == o->end_id) {
                    finish(d, o, b, t, r, w, lp, d->cand_s[j]);
                    continue;
                }
                if (live == K) continue;
                d->parent[r0 + live] = r, d->tok[r0 + live] = w;
                new_sum[r0 + live] = d->cand_s[j], new_lp[r0 + live] = lp;
                live++;
            }
            for (int k = live; k < K; k++)   /* fewer than K possible: dead rows */
                d->parent[r0 + k] = r0, d->tok[r0 + k] = o->start_id, new_sum[r0 + k] = -INFINITY,
                new_lp[r0 + k] = 0;
            double lpL = length_penalty(d->maxlen[b], o->alpha);
            if (n == d->maxlen[b]) {
                /* Out of room. Textbook: the live hypotheses end here as they
                 * are and compete on score. t2t: they are the answer only if
                 * nothing finished; the best live one is first. */
                if (!t2t)
                    for (int k = 0; k < live; k++)
                        finish(d, o, b, t, d->parent[r0 + k], d->tok[r0 + k], new_lp[r0 + k], new_sum[r0 + k]);
                else if (live > 0 && d->fin_top[(size_t)b * K] == -INFINITY)
                    set_answer(d, b, t, d->parent[r0], d->tok[r0], new_lp[r0], new_sum[r0],
                               (float)(new_sum[r0] / lpL));
                d->alive[b] = 0;
            } else if (t2t) {
                /* t2t's early stop: the worst of the finished set beats the
                 * most any live beam's descendant can score, the best live
                 * beam's sum / lp(L) (an empty set's -inf beats nothing) */
                d->alive[b] = live > 0 && !(finished_worst(d, b) > new_sum[r0] / lpL);
            } else {
                /* textbook: can any live beam still beat the best finished one? */
                int hope = 0;
                for (int k = 0; k < live; k++) hope |= new_sum[r0 + k] / lpL > d->out_score[b];
                d->alive[b] = hope;
            }
            for (int k = 0; k < K; k++)
                d->trace[(size_t)t * R + r0 + k] =
                    (BeamNode){k < live ? d->parent[r0 + k] : -1, d->tok[r0 + k], new_sum[r0 + k]};
            any |= d->alive[b];
        }
        if (!any) break;
        decoder_reorder(d, d->parent);
        for (int r = 0; r < R; r++) {
            d->sum[r] = new_sum[r];
            d->hist_lp[0][(size_t)r * T + t] = new_lp[r];
        }
    }
    return 0;
}

