/* decode.c - incremental decoding with a KV cache: the decoder step.
 *
 * Read decode.h first. This file has three parts:
 *   1. Building the Decoder: every buffer, once.
 *   2. The step: one new position per row, cached (model_decode's decoder
 *      layer cut to one position: its residual steps, sublayer.h, and the
 *      backend's row ops, ref/rows.h) or uncached (model_decode over the
 *      whole prefix: the reference).
 *   3. What it costs: FLOPs per token, cache bytes.
 * Greedy decoding and beam search on top of the step are search.c's.
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


/* ============================================================================
 * 1. Building the Decoder
 * ========================================================================== */

/* self-attention cache element (layer l, row r, head i, position t), K or V */
static size_t cache_at(const Decoder *d, int l, int r, int i, int t, int dh) {
    size_t R = (size_t)d->max_B * d->max_K;
    return ((((size_t)l * R + r) * d->m->cfg.h + i) * d->max_T + t) * dh;
}

/* Three kinds of memory: the host's (search bookkeeping: ids, scores,
 * histories); the backend's (the cache and one step's activations: the
 * device's memory on a GPU); and host arrays the backend writes and the host
 * reads or the other way (logp, cross_w, the source mask), a host array plus
 * the backend's view of it (on the CPU the same memory). */
typedef enum { MEM_HOST, MEM_BACKEND, MEM_SHARED } MemKind;
typedef struct {
    void *field;     /* the Decoder's pointer that holds it (a float * or int *) */
    void *view;      /* MEM_SHARED: the pointer that holds the backend's view   */
    size_t bytes;
    MemKind where;
} Buf;
enum { DECODER_BUFS = 64 };

/* Every buffer of d with its size, from d's capacities: the one list that
 * decoder_new allocates and decoder_free frees, so the two cannot disagree.
 * Returns how many (at most DECODER_BUFS). */
static int decoder_buffers(Decoder *d, Buf *buf) {
    const Config *c = &d->m->cfg;
    size_t R = (size_t)d->max_B * d->max_K, B = d->max_B, Ts = d->max_Ts, T = d->max_T;
    size_t N = c->N, D = c->d_model, H = c->h, hk = H * c->d_k, hv = H * c->d_v, F = c->d_ff, V = c->vocab;
    size_t wide = hk > hv ? hk : hv, keys = Ts > T ? Ts : T, BTs = B * Ts;
    int k = 0;
    /* one spare element each, as a zero-length array still gets an address */
#define BUF(where, f, v, n) buf[k++] = (Buf){&(f), v, ((size_t)(n) + 1) * sizeof *(f), where}
#define HOST(f, n) BUF(MEM_HOST, f, NULL, n)
#define BACKEND(f, n) BUF(MEM_BACKEND, f, NULL, n)
#define SHARED(f, view, n) BUF(MEM_SHARED, f, &(view), n)
    HOST(d->src, B * Ts);                   /* (B,Ts) source ids                     */
    SHARED(d->keep, d->be_keep, B * Ts);     /* (B,Ts) source mask                     */
    BACKEND(d->memory, B * Ts * D);         /* (B,Ts,d_model) the encoder's output    */
    BACKEND(d->cross_k, N * B * Ts * hk);   /* (N,B,h,Ts,d_k) cross-attention keys    */
    BACKEND(d->cross_v, N * B * Ts * hv);   /* (N,B,h,Ts,d_v) and values              */
    for (int j = 0; j < 2; j++) {           /* [0] the cache, [1] where a reorder goes */
        BACKEND(d->self_k[j], N * R * T * hk);   /* (N,R,h,T,d_k)                     */
        BACKEND(d->self_v[j], N * R * T * hv);   /* (N,R,h,T,d_v)                     */
        HOST(d->hist[j], R * T);
        HOST(d->hist_lp[j], R * T);
    }
    BACKEND(d->be_tok, R);
    BACKEND(d->x, R * D);
    BACKEND(d->y, R * D);
    BACKEND(d->ln, R * D);
    BACKEND(d->sub, R * D);
    BACKEND(d->mean, R);
    BACKEND(d->rstd, R);
    BACKEND(d->q, R * wide);
    BACKEND(d->k, (R > BTs ? R : BTs) * wide);
    BACKEND(d->v, R * wide);
    BACKEND(d->o, R * wide);
    BACKEND(d->hidden, R * F);
    BACKEND(d->scores, R * H * keys);
    BACKEND(d->logits, R * V);
    SHARED(d->logp, d->be_logp, R * V);
    SHARED(d->cross_w, d->be_cross_w, N * R * H * Ts);
    HOST(d->rows, (R > BTs ? R : BTs) * H);
    HOST(d->prefix, R * (T > Ts ? T : Ts));
    HOST(d->sum, R);
    HOST(d->new_sum, R);
    HOST(d->new_lp, R);
    HOST(d->alive, R);
    HOST(d->parent, R);
    HOST(d->tok, R);
    HOST(d->maxlen, B);
    HOST(d->out, B * T);
    HOST(d->out_lp, B * T);
    HOST(d->out_len, B);
    HOST(d->out_sum, B);
    HOST(d->out_score, B);
    HOST(d->trace, T * R);
    HOST(d->fin, (size_t)d->max_fin);
    HOST(d->fin_top, R);
    HOST(d->cand_s, 2 * (size_t)d->max_K);
    HOST(d->cand_i, 2 * (size_t)d->max_K);
#undef BUF
#undef HOST
#undef BACKEND
#undef SHARED
    assert(k <= DECODER_BUFS);
    return k;
}

double decoder_floats(const Config *c, int max_B, int max_K, int max_Ts, int max_out) {
    size_t R = (size_t)max_B * max_K, B = max_B, Ts = max_Ts, T = max_out;
    size_t N = c->N, D = c->d_model, H = c->h, hk = H * c->d_k, hv = H * c->d_v, F = c->d_ff, V = c->vocab;
    size_t wide = hk > hv ? hk : hv, keys = Ts > T ? Ts : T;
    return (double)B * Ts * (D + N * (hk + hv) + wide) + 2.0 * N * R * T * (hk + hv)
           + (double)R * (4 * D + 4 * wide + F + H * keys + 2 * V + N * H * Ts + 4 * T);
}

int decoder_new(Decoder *d, Model *m, int max_B, int max_K, int max_Ts, int max_out,
                char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    const Config *c = &m->cfg;
    if (c->ffn != FFN_RELU)
        return fail(err, errlen, "the KV-cached decoder computes Eq. 2's ReLU FFN; this model's FFN is SwiGLU "
                    "(ffn 1), which it does not have yet");
    if (c->arch == ARCH_DECODER)
        return fail(err, errlen, "the KV-cached decoder here serves the encoder-decoder model; a decoder-only "
                    "model (arch 1) has no source to decode from: run model_forward_lm on the text so far");
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
    size_t R = (size_t)max_B * max_K, T = max_out;
    double floats = decoder_floats(c, max_B, max_K, max_Ts, max_out);
    if (floats * 4 > 64e9)
        return fail(err, errlen, "a decoder this size needs %.3g GB", floats * 4 / 1e9);
    const Backend *be = m->be;
    d->be = be;
    d->max_fin = (int)((T + 1) * R);
    Buf buf[DECODER_BUFS];
    int n = decoder_buffers(d, buf);
    for (int i = 0; i < n; i++) {
        void *p = buf[i].where == MEM_BACKEND ? be->alloc(buf[i].bytes) : calloc(1, buf[i].bytes);
        void *view = p && buf[i].where == MEM_SHARED ? be->share(p, buf[i].bytes) : NULL;
        if (p) memcpy(buf[i].field, &p, sizeof p);
        if (view) memcpy(buf[i].view, &view, sizeof view);
        if (!p || (buf[i].where == MEM_SHARED && !view)) {
            decoder_free(d);
            return fail(err, errlen, "out of %s memory building a decoder for %d x %d rows",
                        be->host_memory ? "" : be->name, max_B, max_K);
        }
    }
    return 0;
}

void decoder_free(Decoder *d) {
    if (!d || !d->be) {
        if (d) memset(d, 0, sizeof *d);
        return;
    }
    const Backend *be = d->be;
    Buf buf[DECODER_BUFS];
    int n = decoder_buffers(d, buf);
    for (int pass = 0; pass < 2; pass++)   /* the backend's views first (CPU: nothing to do), then the memory */
        for (int i = 0; i < n; i++) {
            void *p, *view = NULL;
            memcpy(&p, buf[i].field, sizeof p);
            if (buf[i].where == MEM_SHARED) memcpy(&view, buf[i].view, sizeof view);
            if (pass == 0 && view) be->unshare(view, p);
            if (pass == 1 && p && buf[i].where == MEM_BACKEND) {
                if (be->free) be->free(p);
            } else if (pass == 1) {
                free(p);
            }
        }
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
    be->upload(d->be_keep, d->keep, (size_t)B * Ts);
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
        const MhaParams *w = &m->be_w.dec[l].cross_attn;
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
 * the GPU's kernels), on its weights m->be_w; only logp (and the cross-
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
    const float *pe = c->pos == POS_LEARNED ? m->be_w.pos_embed : m->be_pe;
    be->upload(d->be_tok, tok, (size_t)R * sizeof(int));
    be->embed_forward(d->x, d->be_tok, m->be_w.embed, pe + (size_t)t * D, R, 1, D, V);
    for (int l = 0; l < c->N; l++) {
        const DecoderLayer *w = &m->be_w.dec[l];
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
        be->attend_rows_forward(d->o, d->be_cross_w + (size_t)l * R * h * Ts, d->q, ck, cv, d->be_keep, R, K, h, Ts,
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
        sublayer_norm_forward(be, sublayer_kind(c), d->ln, d->mean, d->rstd, d->x, m->be_w.dec_ln_g, m->be_w.dec_ln_b, R,
                              D);
        xo = d->ln;
    }
    /* logits (R,V) = x E^T (the shared embedding, Sec. 3.4), then log-softmax */
    be->logits_rows_forward(d->logits, xo, m->be_w.embed, R, D, V);
    be->logsoftmax_forward(d->be_logp, d->logits, R, V);
    /* to the host, for the search (CPU: the same memory, nothing moves) */
    be->download(d->logp, d->be_logp, (size_t)R * V * sizeof(float));
    be->download(d->cross_w, d->be_cross_w, (size_t)c->N * R * h * Ts * sizeof(float));
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
 * 3. Cost
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
