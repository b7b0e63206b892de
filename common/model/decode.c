/* decode.c - incremental decoding with a KV cache; greedy and beam search.
 *
 * Read decode.h first: it defines the search precisely. This file has four
 * parts:
 *   1. Building the Decoder: every buffer, once.
 *   2. The step: one new position per row, cached (model_decode's decoder
 *      layer cut to one position: its residual steps, sublayer.h, and the
 *      backend's row ops, ref/rows.h) or uncached (model_decode over the
 *      whole prefix: the reference).
 *   3. Greedy decoding and beam search on top of the step. (beam_ref.c is
 *      the same beam search for one sentence, plainly, without the step.)
 *   4. What it costs: FLOPs per token, cache bytes.
 */
#include "model/decode.h"
#include "core/fail.h"
#include "layers/multihead.h"
#include "model/backend.h"
#include "model/sublayer.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
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
 * 1. Building the Decoder
 * ========================================================================== */

/* self-attention cache element (layer l, row r, head i, position t), K or V */
static size_t cache_at(const Decoder *d, int l, int r, int i, int t, int dh) {
    size_t R = (size_t)d->max_B * d->max_K;
    return ((((size_t)l * R + r) * d->m->cfg.h + i) * d->max_T + t) * dh;
}

int decoder_new(Decoder *d, Model *m, int max_B, int max_K, int max_Ts, int max_out,
                char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    const Config *c = &m->cfg;
    if (max_B < 1 || max_K < 1 || max_Ts < 1 || max_out < 1)
        return fail(err, errlen, "decoder capacity must be at least 1 (got %d sentences, %d beams, "
                    "%d source tokens, %d output tokens)", max_B, max_K, max_Ts, max_out);
    if (max_Ts > c->max_len || max_out > c->max_len)
        return fail(err, errlen, "%d tokens do not fit max_len = %d (the rows of the positional-encoding table)",
                    max_Ts > max_out ? max_Ts : max_out, c->max_len);
    if ((double)max_B * max_K > 1 << 20)
        return fail(err, errlen, "%d sentences x %d beams is too many rows", max_B, max_K);
    d->m = m;
    d->max_B = max_B, d->max_K = max_K, d->max_Ts = max_Ts, d->max_T = max_out;
    size_t R = (size_t)max_B * max_K, B = max_B, Ts = max_Ts, T = max_out;
    size_t N = c->N, D = c->d_model, H = c->h, hk = H * c->d_k, hv = H * c->d_v, F = c->d_ff, V = c->vocab;
    size_t wide = hk > hv ? hk : hv, keys = Ts > T ? Ts : T;
    double floats = (double)B * Ts * (D + N * (hk + hv) + wide) + 2.0 * N * R * T * (hk + hv)
                  + (double)R * (4 * D + 4 * wide + F + H * keys + 2 * V + N * H * Ts + 4 * T);
    if (floats * 4 > 64e9)
        return fail(err, errlen, "a decoder this size needs %.3g GB", floats * 4 / 1e9);
    const Backend *be = m->be;
    d->be = be;
    int ok = 1;
    /* Three kinds of memory: the host's (search bookkeeping: ids, scores,
     * histories); the backend's (the cache and one step's activations: the
     * device's memory on a GPU); and host arrays the backend writes and the
     * host reads or the other way (logp, cross_w, the source mask), a host
     * array plus the backend's view of it (on the CPU the same memory). */
#define ALLOC(p, n) ok &= ((p) = calloc((size_t)(n) + 1, sizeof *(p))) != NULL
#define BALLOC(p, n) ok &= ((p) = be->alloc(((size_t)(n) + 1) * sizeof *(p))) != NULL
#define SHARED(p, view, n) \
    ALLOC(p, n);           \
    if (ok) ok &= ((view) = be->share((p), ((size_t)(n) + 1) * sizeof *(p))) != NULL
    ALLOC(d->src, B * Ts);
    SHARED(d->keep, d->w_keep, B * Ts);
    BALLOC(d->memory, B * Ts * D);
    BALLOC(d->cross_k, N * B * Ts * hk);
    BALLOC(d->cross_v, N * B * Ts * hv);
    for (int j = 0; j < 2; j++) {
        BALLOC(d->self_k[j], N * R * T * hk);
        BALLOC(d->self_v[j], N * R * T * hv);
        ALLOC(d->hist[j], R * T);
        ALLOC(d->hist_lp[j], R * T);
    }
    BALLOC(d->dtok, R);
    BALLOC(d->x, R * D);
    BALLOC(d->y, R * D);
    BALLOC(d->ln, R * D);
    BALLOC(d->sub, R * D);
    BALLOC(d->mean, R);
    BALLOC(d->rstd, R);
    BALLOC(d->q, R * wide);
    BALLOC(d->k, (R > B * Ts ? R : B * Ts) * wide);
    BALLOC(d->v, R * wide);
    BALLOC(d->o, R * wide);
    BALLOC(d->hidden, R * F);
    BALLOC(d->scores, R * H * keys);
    BALLOC(d->logits, R * V);
    SHARED(d->logp, d->w_logp, R * V);
    SHARED(d->cross_w, d->w_cross_w, N * R * H * Ts);
    ALLOC(d->rows, (R > B * Ts ? R : B * Ts) * H);
    ALLOC(d->prefix, R * (T > Ts ? T : Ts));
    ALLOC(d->sum, R);
    ALLOC(d->new_sum, R);
    ALLOC(d->new_lp, R);
    ALLOC(d->alive, R);
    ALLOC(d->parent, R);
    ALLOC(d->tok, R);
    ALLOC(d->maxlen, B);
    ALLOC(d->out, B * T);
    ALLOC(d->out_lp, B * T);
    ALLOC(d->out_len, B);
    ALLOC(d->out_sum, B);
    ALLOC(d->out_score, B);
    ALLOC(d->trace, T * R);
    d->max_fin = (int)((T + 1) * R);
    ALLOC(d->fin, (size_t)d->max_fin);
    ALLOC(d->fin_top, R);
    ALLOC(d->cand_s, 2 * (size_t)max_K);
    ALLOC(d->cand_i, 2 * (size_t)max_K);
#undef ALLOC
#undef BALLOC
#undef SHARED
    if (!ok) {
        decoder_free(d);
        return fail(err, errlen, "out of %s memory building a decoder for %d x %d rows",
                    be->host_memory ? "" : be->name, max_B, max_K);
    }
    return 0;
}

void decoder_free(Decoder *d) {
    if (!d || !d->be) {
        if (d) memset(d, 0, sizeof *d);
        return;
    }
    const Backend *be = d->be;
    /* the backend's views first (CPU: nothing to do), then the host arrays */
    if (d->w_keep) be->unshare(d->w_keep, d->keep);
    if (d->w_logp) be->unshare(d->w_logp, d->logp);
    if (d->w_cross_w) be->unshare(d->w_cross_w, d->cross_w);
    void *dev[] = {d->memory, d->cross_k, d->cross_v, d->self_k[0], d->self_k[1], d->self_v[0], d->self_v[1],
                   d->dtok, d->x, d->y, d->ln, d->sub, d->mean, d->rstd, d->q, d->k, d->v, d->o, d->hidden,
                   d->scores, d->logits};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i] && be->free) be->free(dev[i]);
    void *p[] = {d->src, d->keep, d->hist[0], d->hist[1], d->hist_lp[0], d->hist_lp[1], d->logp, d->cross_w,
                 d->rows, d->prefix, d->sum, d->new_sum, d->new_lp, d->alive, d->parent, d->tok, d->maxlen,
                 d->out, d->out_lp, d->out_len, d->out_sum, d->out_score, d->trace, d->fin, d->fin_top,
                 d->cand_s, d->cand_i};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    memset(d, 0, sizeof *d);
}

/* ============================================================================
 * 2. The step
 * ========================================================================== */

int decoder_begin(Decoder *d, const int *src, int B, int Ts, int K, int cached,
                  char *err, size_t errlen) {
    Model *m = d->m;
    const Config *c = &m->cfg;
    const Backend *be = d->be;
    if (B < 1 || K < 1 || Ts < 1 || B > d->max_B || K > d->max_K || Ts > d->max_Ts)
        return fail(err, errlen, "%d sentences x %d beams of %d source tokens exceed the decoder's "
                    "capacity (%d x %d, %d)", B, K, Ts, d->max_B, d->max_K, d->max_Ts);
    if (be != m->be)
        return fail(err, errlen, "the model moved from the %s backend to %s after decoder_new: build the "
                    "decoder after model_to", be->name, m->be->name);
    int R = B * K;
    /* the encoder runs in the model's own activations: they must fit */
    int enc_B = cached ? B : R;
    if (enc_B > m->max_B || Ts > m->max_Ts || (!cached && d->max_T > m->max_Tt))
        return fail(err, errlen, "the model was built for %d sequences of (%d, %d) tokens; %s decoding "
                    "of %d x %d rows of %d source tokens needs more", m->max_B, m->max_Ts, m->max_Tt,
                    cached ? "cached" : "uncached", B, K, Ts);
    d->B = B, d->K = K, d->R = R, d->Ts = Ts, d->pos = 0, d->cached = cached;
    memcpy(d->src, src, (size_t)B * Ts * sizeof(int));
    if (!cached) {
        /* the reference: every row is its own sequence, encoded in full */
        for (int r = 0; r < R; r++)
            memcpy(d->prefix + (size_t)r * Ts, src + (size_t)(r / K) * Ts, (size_t)Ts * sizeof(int));
        model_encode(m, d->prefix, R, Ts, 0);
        return 0;
    }
    /* the cross-attention's key mask (B,Ts): 1 = a real token, 0 = padding */
    for (int i = 0; i < B * Ts; i++) d->keep[i] = c->pad_id < 0 || src[i] != c->pad_id;
    be->upload(d->w_keep, d->keep, (size_t)B * Ts);
    /* The encoder's output does not depend on anything the decoder does:
     * once per sentence, shared by its K beams. */
    model_encode(m, src, B, Ts, 0);
    size_t D = c->d_model, rows = (size_t)B * Ts;
    be->copy(d->memory, model_memory(m), rows * D * sizeof(float));
    /* Nor do the cross-attention keys and values memory W^K, memory W^V of
     * every decoder layer (Sec. 3.2.3): computed here, read by every step,
     * split into heads (B,Ts,h,d) -> (B,h,Ts,d): row (b,i,j) of the cache is
     * row (b,j,i) of the product. */
    int h = c->h, hk = h * c->d_k, hv = h * c->d_v;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < h; i++)
            for (int j = 0; j < Ts; j++) d->rows[((size_t)b * h + i) * Ts + j] = (b * Ts + j) * h + i;
    for (int l = 0; l < c->N; l++) {
        const MhaParams *w = &m->w.dec[l].cross_attn;
        be->linear_rows_forward(d->k, d->memory, w->w_k, NULL, (int)rows, (int)D, hk);   /* (B,Ts,h*d_k) */
        be->gather_rows(d->cross_k + (size_t)l * d->max_B * d->max_Ts * hk, c->d_k, d->k, c->d_k, d->rows,
                        (int)rows * h, c->d_k);
        be->linear_rows_forward(d->k, d->memory, w->w_v, NULL, (int)rows, (int)D, hv);   /* (B,Ts,h*d_v) */
        be->gather_rows(d->cross_v + (size_t)l * d->max_B * d->max_Ts * hv, c->d_v, d->k, c->d_v, d->rows,
                        (int)rows * h, c->d_v);
    }
    return 0;
}

/* Add & Norm around each sub-layer, model_decode's own functions
 * (sublayer.h) on the decoder's buffers, without dropout (inference): the
 * Sublayer reads x or Norm(x) (pre-LN, in ln); after it wrote d->sub, x
 * becomes Norm(x + sub) (post-LN: the sum in y, the result back in x) or
 * x + sub (pre-LN, in place). */
static SubActs step_sub(const Decoder *d, SubLayerKind k) {
    return (SubActs){.ln = k.pre_ln ? d->ln : d->x, .mean = d->mean, .rstd = d->rstd, .out = d->sub,
                     .res = k.pre_ln ? d->x : d->y};
}

static const float *sub_in(Decoder *d, const float *g, const float *b) {
    SubLayerKind k = sublayer_kind(&d->m->cfg);
    SubActs s = step_sub(d, k);
    return sublayer_in(d->be, k, &s, d->x, g, b, d->R, d->m->cfg.d_model);
}

static void sub_out(Decoder *d, const float *g, const float *b) {
    SubLayerKind k = sublayer_kind(&d->m->cfg);
    SubActs s = step_sub(d, k);
    sublayer_out(d->be, k, &s, d->x, g, b, NULL, d->R, d->m->cfg.d_model);
}

/* The cached step: position t = d->pos for every row, through every layer.
 * Every op runs through the model's backend (be: the CPU's functions, or
 * the GPU's kernels), on its weights m->w; only logp (and the cross-
 * attention weights, for printing) come back to the host.
 * It is model_decode's decoder layer (model.c) for one position: the same
 * residual steps (sub_in, sub_out: sublayer.h), but Sublayers of its own.
 * Its attention reads the cache instead of a whole (B,h,T,d) sequence, and
 * its products stream each weight row once (linear_rows_forward) where
 * mha_forward and ffn_forward run gemm: another order of the same sums, so
 * the two agree to rounding (tests/check_decode.c), and running either's
 * Sublayers in the other would change its numbers (chapter 09's quoted
 * output, or training's speed and bits). */
static void step_cached(Decoder *d, const int *tok) {
    Model *m = d->m;
    const Backend *be = d->be;
    const Config *c = &m->cfg;
    int R = d->R, K = d->K, Ts = d->Ts, t = d->pos, D = c->d_model, V = c->vocab;
    int h = c->h, dk = c->d_k, dv = c->d_v, hk = h * dk, hv = h * dv;
    size_t T = d->max_T;
    /* x (R,D) = E[tok] * sqrt(d_model) + PE[t]  (Sec. 3.4, 3.5): row t of the table,
     * the sinusoids or the learned pos_embed (Table 3 (E)) */
    const float *pe = c->pos == POS_LEARNED ? m->w.pos_embed : m->w_pe;
    be->upload(d->dtok, tok, (size_t)R * sizeof(int));
    be->embed_forward(d->x, d->dtok, m->w.embed, pe + (size_t)t * D, R, 1, D, V);
    for (int l = 0; l < c->N; l++) {
        const DecoderLayer *w = &m->w.dec[l];
        /* -- masked self-attention: append this position's k, v, attend over 0..t.
         * The causal mask needs no code here: the later positions are not yet in
         * the cache. */
        const float *in = sub_in(d, w->ln1_g, w->ln1_b);
        be->linear_rows_forward(d->q, in, w->self_attn.w_q, NULL, R, D, hk);   /* q (R,h*d_k) */
        be->linear_rows_forward(d->k, in, w->self_attn.w_k, NULL, R, D, hk);   /* k (R,h*d_k) */
        be->linear_rows_forward(d->v, in, w->self_attn.w_v, NULL, R, D, hv);   /* v (R,h*d_v) */
        /* append: row (r,i) of k, (R*h rows of d_k), becomes position t of
         * cache row (l,r,i); cache rows are max_T positions apart */
        be->gather_rows(d->self_k[0] + cache_at(d, l, 0, 0, t, dk), T * dk, d->k, dk, NULL, R * h, dk);
        be->gather_rows(d->self_v[0] + cache_at(d, l, 0, 0, t, dv), T * dv, d->v, dv, NULL, R * h, dv);
        be->attend_rows_forward(d->o, d->scores, d->q, d->self_k[0] + cache_at(d, l, 0, 0, 0, dk),
                                d->self_v[0] + cache_at(d, l, 0, 0, 0, dv), NULL, R, 1, h, t + 1, (int)T, dk, dv);
        be->linear_rows_forward(d->sub, d->o, w->self_attn.w_o, NULL, R, hv, D);   /* Concat(heads) W^O */
        sub_out(d, w->ln1_g, w->ln1_b);

        /* -- cross-attention: the query is new, K and V were computed at begin;
         * the K beams of sentence b (rows b*K ..) share its keys */
        in = sub_in(d, w->ln2_g, w->ln2_b);
        be->linear_rows_forward(d->q, in, w->cross_attn.w_q, NULL, R, D, hk);
        const float *ck = d->cross_k + (size_t)l * d->max_B * d->max_Ts * hk;
        const float *cv = d->cross_v + (size_t)l * d->max_B * d->max_Ts * hv;
        be->attend_rows_forward(d->o, d->w_cross_w + (size_t)l * R * h * Ts, d->q, ck, cv, d->w_keep, R, K, h, Ts,
                                Ts, dk, dv);
        be->linear_rows_forward(d->sub, d->o, w->cross_attn.w_o, NULL, R, hv, D);
        sub_out(d, w->ln2_g, w->ln2_b);

        /* -- FFN (Eq. 2) on this position alone */
        in = sub_in(d, w->ln3_g, w->ln3_b);
        be->linear_rows_forward(d->hidden, in, w->ffn_w1, w->ffn_b1, R, D, c->d_ff);   /* x W1 + b1 */
        be->relu_forward(d->hidden, d->hidden, (size_t)R * c->d_ff);                  /* max(0, .) */
        be->linear_rows_forward(d->sub, d->hidden, w->ffn_w2, w->ffn_b2, R, c->d_ff, D); /* . W2 + b2 */
        sub_out(d, w->ln3_g, w->ln3_b);
    }
    const float *xo = d->x;
    if (c->pre_ln) {
        be->layernorm_forward(d->ln, d->mean, d->rstd, d->x, m->w.dec_ln_g, m->w.dec_ln_b, R, D);
        xo = d->ln;
    }
    /* logits (R,V) = x E^T (the shared embedding, Sec. 3.4), then log-softmax */
    be->logits_rows_forward(d->logits, xo, m->w.embed, R, D, V);
    be->logsoftmax_forward(d->w_logp, d->logits, R, V);
    /* to the host, for the search (CPU: the same memory, nothing moves) */
    be->download(d->logp, d->w_logp, (size_t)R * V * sizeof(float));
    be->download(d->cross_w, d->w_cross_w, (size_t)c->N * R * h * Ts * sizeof(float));
}

/* The reference: the whole prefix 0..t through model_decode, keep the last row. */
static void step_uncached(Decoder *d) {
    Model *m = d->m;
    const Config *c = &m->cfg;
    int R = d->R, T = d->pos + 1, V = c->vocab, h = c->h, Ts = d->Ts;
    for (int r = 0; r < R; r++)
        memcpy(d->prefix + (size_t)r * T, d->hist[0] + (size_t)r * d->max_T, (size_t)T * sizeof(int));
    const float *logp = model_decode(m, d->prefix, T, 0);   /* (R*T, V), the backend's memory */
    for (int r = 0; r < R; r++)
        model_read(m, d->logp + (size_t)r * V, logp + ((size_t)r * T + T - 1) * V, (size_t)V * sizeof(float));
    for (int l = 0; l < c->N; l++) {
        const float *w = model_attention(m, ATTN_DEC_CROSS, l);   /* (R,h,T,Ts) */
        for (int r = 0; r < R; r++)
            for (int i = 0; i < h; i++)
                model_read(m, d->cross_w + (((size_t)l * R + r) * h + i) * Ts,
                           w + (((size_t)r * h + i) * T + T - 1) * Ts, (size_t)Ts * sizeof(float));
    }
}

const float *decoder_step(Decoder *d, const int *tok) {
    assert(d->R > 0 && d->pos < d->max_T && "decoder_step: decoder_begin first, and no more than max_out steps");
    for (int r = 0; r < d->R; r++) {
        assert(tok[r] >= 0 && tok[r] < d->m->cfg.vocab && tok[r] != d->m->cfg.pad_id);
        d->hist[0][(size_t)r * d->max_T + d->pos] = tok[r];
    }
    if (d->cached) step_cached(d, tok);
    else step_uncached(d);
    d->pos++;
    return d->logp;
}

void decoder_reorder(Decoder *d, const int *parent) {
    int R = d->R, t = d->pos, same = 1;
    for (int r = 0; r < R; r++) same &= parent[r] == r;
    if (same) return;
    const Config *c = &d->m->cfg;
    size_t T = d->max_T;
    if (d->cached && t > 0) {
        /* gather, on the backend: row r's first t positions of every layer and
         * head become its parent's (cache row (l,r,i) <- (l,parent[r],i));
         * then the two buffers change roles. Only the indices are the host's. */
        int h = c->h;
        for (int r = 0; r < R; r++)
            for (int i = 0; i < h; i++) d->rows[(size_t)r * h + i] = parent[r] * h + i;
        for (int l = 0; l < c->N; l++) {
            d->be->gather_rows(d->self_k[1] + cache_at(d, l, 0, 0, 0, c->d_k), T * c->d_k,
                               d->self_k[0] + cache_at(d, l, 0, 0, 0, c->d_k), T * c->d_k, d->rows, R * h,
                               (size_t)t * c->d_k);
            d->be->gather_rows(d->self_v[1] + cache_at(d, l, 0, 0, 0, c->d_v), T * c->d_v,
                               d->self_v[0] + cache_at(d, l, 0, 0, 0, c->d_v), T * c->d_v, d->rows, R * h,
                               (size_t)t * c->d_v);
        }
        float *p = d->self_k[0]; d->self_k[0] = d->self_k[1]; d->self_k[1] = p;
        p = d->self_v[0]; d->self_v[0] = d->self_v[1]; d->self_v[1] = p;
    }
    for (int r = 0; r < R; r++) {
        memcpy(d->hist[1] + r * T, d->hist[0] + parent[r] * T, (size_t)t * sizeof(int));
        memcpy(d->hist_lp[1] + r * T, d->hist_lp[0] + parent[r] * T, (size_t)t * sizeof(float));
    }
    int *q = d->hist[0]; d->hist[0] = d->hist[1]; d->hist[1] = q;
    float *p = d->hist_lp[0]; d->hist_lp[0] = d->hist_lp[1]; d->hist_lp[1] = p;
}

/* ============================================================================
 * 3. Search
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

/* ============================================================================
 * 4. Cost
 * ========================================================================== */

/* Counted as the code runs: per layer the self-attention projections, the
 * scores and weighted sums over the cached keys, W^O; the cross-attention
 * query, scores over the source, W^O (its K, V were made at begin); the FFN;
 * then the output projection. 2 FLOPs per multiply-add. */
double decode_flops_cached(const Config *c, int t, int Ts) {
    double D = c->d_model, hk = (double)c->h * c->d_k, hv = (double)c->h * c->d_v, F = c->d_ff, n = t + 1;
    double self = 2 * D * (2 * hk + hv) + 2 * n * (hk + hv) + 2 * hv * D;   /* q,k,v; scores, mix; W^O */
    double cross = 2 * D * hk + 2 * (double)Ts * (hk + hv) + 2 * hv * D;     /* K, V of memory: once   */
    double ffn = 4 * D * F;
    return c->N * (self + cross + ffn) + 2 * D * c->vocab;
}

double decode_flops_uncached(const Config *c, int t, int Ts) {
    /* model_decode on t+1 positions: every position's projections, the full
     * (t+1) x (t+1) score matrix (the causal mask blocks half of it after
     * computing it), the memory's K, V again, every position's logits */
    double D = c->d_model, hk = (double)c->h * c->d_k, hv = (double)c->h * c->d_v, F = c->d_ff, T = t + 1;
    double self = T * 2 * D * (2 * hk + hv) + 2 * T * T * (hk + hv) + T * 2 * hv * D;
    double cross = T * 2 * D * hk + 2 * (double)Ts * D * (hk + hv) + 2 * T * Ts * (hk + hv) + T * 2 * hv * D;
    double ffn = T * 4 * D * F;
    return c->N * (self + cross + ffn) + T * 2 * D * c->vocab;
}

size_t decode_cache_bytes_per_token_layer(const Config *c) {
    return (size_t)c->h * (c->d_k + c->d_v) * sizeof(float);
}
