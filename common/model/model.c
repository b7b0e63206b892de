/* model.c - the encoder-decoder Transformer of Figure 1, forward and backward.
 *
 * Read model.h first for the picture. This file has four parts:
 *   1. Build: the parameters (params.c: one allocation, named tensors, their
 *      initialisation), the activation block (activations.c: sized at
 *      build, laid out per call) and the backend's view of both.
 *   2. Forward: embed -> encoder stack -> decoder stack -> x E^T -> log-softmax.
 *   3. Backward: the same steps in reverse, each quoting the line it undoes.
 *   4. Inspection: what the chapters print from the last pass.
 *
 * Every op is called through m->be, the backend table (backend.h): on the
 * CPU `be->layernorm_forward` IS fast/nn_fast.c's layernorm_forward; with
 * --device cuda it is the kernel in cuda/. Add & Norm around each
 * sub-layer, forward and backward, is sublayer.h's. This file is the only
 * model; nothing in it knows which backend it runs on.
 */
#include "model/model.h"
#include "model/activations.h"
#include "model/params.h"
#include "ref/attention.h"
#include "core/dropout_mask.h"
#include "model/backend.h"
#include "model/backend_cpu.h"
#include "model/sublayer.h"
#include "layers/lm_ffn.h"
#include "core/fail.h"
#include "ref/nn.h"
#include "ref/ops.h"
#include "fast/parallel.h"
#include "core/tensor.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Physical memory, for refusing builds that would only end in the OOM killer. */
static double phys_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return (pages > 0 && page > 0) ? (double)pages * (double)page : 8e9;
}

/* ============================================================================
 * 1. Build and free
 * ========================================================================== */

/* The backend's view of the model: the weights, gradients and PE table
 * shared with it (the CPU: the host arrays themselves; a GPU: device copies
 * laid out the same way, so every named pointer has a twin), and the one
 * activation block in its memory, sized by activations.c's counting pass. */
static int views_make(Model *m, const Backend *be) {
    const Config *c = &m->cfg;
    ModelActs *a = m->acts;
    size_t n = m->params.n, npe = (size_t)c->max_len * c->d_model;
    m->be = be;
    m->be_w.mem = be->share(m->params.mem, n * sizeof(float));
    m->be_dw.mem = be->share(m->grads.mem, n * sizeof(float));
    m->be_pe = be->share(m->pe, npe * sizeof(float));
    a->mem = be->alloc(a->cap * sizeof(float));
    m->be_w.n = m->be_dw.n = n;
    if (!m->be_w.mem || !m->be_dw.mem || !m->be_pe || !a->mem) return -1;
    if (params_layout(&m->be_w, c) || params_layout(&m->be_dw, c)) return -1;
    return 0;
}

static void views_free(Model *m) {
    const Backend *be = m->be;
    if (!be) return;
    if (m->be_w.mem) be->unshare(m->be_w.mem, m->params.mem);
    if (m->be_dw.mem) be->unshare(m->be_dw.mem, m->grads.mem);
    if (m->be_pe) be->unshare(m->be_pe, m->pe);
    m->be_w.mem = m->be_dw.mem = NULL;
    params_free(&m->be_w);        /* the pointer tables; mem is NULL here */
    params_free(&m->be_dw);
    if (m->acts) {
        be->free(m->acts->mem);
        m->acts->mem = NULL;
        m->acts->encoded = m->acts->decoded = m->acts->backward_done = 0;
    }
    m->be_pe = NULL;
    m->be = NULL;
}

int model_build(Model *m, const Config *c, int max_B, int max_Ts, int max_Tt,
                uint64_t seed, char *err, size_t errlen) {
    return model_build_cap(m, c, max_B, max_Ts, max_Tt, model_acts_floats(c, max_B, max_Ts, max_Tt), seed, err,
                           errlen);
}

int model_build_cap(Model *m, const Config *c, int max_B, int max_Ts, int max_Tt, size_t acts_floats,
                    uint64_t seed, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    int rc = config_validate(c, err, errlen);
    if (rc) return rc;
    if (c->arch == ARCH_DECODER && max_Ts != 0)
        return fail(err, errlen, "a decoder-only model reads no source: its source capacity max_Ts must be 0 "
                    "(got %d)", max_Ts);
    if (max_B < 1 || max_Ts < (c->arch != ARCH_DECODER) || max_Tt < 1)
        return fail(err, errlen, "batch capacity must be at least 1 sequence of 1 token (got B=%d, Ts=%d, Tt=%d)",
                    max_B, max_Ts, max_Tt);
    if (max_Ts > c->max_len || max_Tt > c->max_len)
        return fail(err, errlen, "sequences of %d tokens do not fit max_len = %d (the rows of the "
                    "positional-encoding table)", max_Ts > max_Tt ? max_Ts : max_Tt, c->max_len);
    /* no batch within the per-dimension limits needs more than the largest
     * of them: a bigger block would only be memory nobody uses */
    size_t most = model_acts_floats(c, max_B, max_Ts, max_Tt), least = model_acts_floats(c, 1, 1, 1);
    if (acts_floats > most) acts_floats = most;
    if (acts_floats < least)
        return fail(err, errlen, "an activation capacity of %zu floats holds no batch; one sequence of one token "
                    "needs %zu (model_acts_floats)", acts_floats, least);

    /* Size everything in double first: a product of large ints must be
     * caught before it overflows size_t or asks malloc for the impossible
     * (model_acts_floats answers SIZE_MAX for such sizes). The host's masks
     * are bytes, (max_B, T, T) four times. */
    double T = max_Ts > max_Tt ? max_Ts : max_Tt;
    double est = 2.0 * (double)model_param_count(c) + (double)acts_floats
               + (double)max_B * T * T + (double)max_B * c->vocab
               + (double)c->max_len * c->d_model;                 /* the PE table */
    double limit = 0.75 * phys_bytes();
    if (est * sizeof(float) > limit)
        return fail(err, errlen, "this model and batch capacity need about %.3g GB, more than this machine "
                    "can give (%.3g GB); use smaller sizes", est * 4 / 1e9, limit / 1e9);

    m->cfg = *c;
    m->max_B = max_B, m->max_Ts = max_Ts, m->max_Tt = max_Tt;
    m->acts_floats = acts_floats;
    rng_seed(&m->dropout_rng, seed ^ 0x9E3779B97F4A7C15ull);
    ModelActs *a = calloc(1, sizeof *a);
    m->acts = a;
    if (!a) goto oom;
    a->enc = calloc((size_t)c->N, sizeof *a->enc);
    a->dec = calloc((size_t)c->N, sizeof *a->dec);
    if (!a->enc || !a->dec) goto oom;
    a->cap = acts_floats;
    size_t Tm = (size_t)(max_Ts > max_Tt ? max_Ts : max_Tt), masks = (size_t)max_B * Tm * Tm;
    a->h_src = malloc((size_t)max_B * (max_Ts > 0 ? max_Ts : 1) * sizeof(int));
    a->h_enc_mask = malloc(masks), a->h_dec_mask = malloc(masks);
    a->h_cross_mask = malloc(masks), a->h_pad = malloc(masks);
    a->h_ones = malloc((size_t)max_B * sizeof(float));
    if (!a->h_src || !a->h_enc_mask || !a->h_dec_mask || !a->h_cross_mask || !a->h_pad || !a->h_ones)
        goto oom;
    for (int i = 0; i < max_B; i++) a->h_ones[i] = 1.0f;
    m->pe = malloc((size_t)c->max_len * c->d_model * sizeof(float));
    if (!m->pe) goto oom;
    if (params_alloc(&m->params, c) || params_alloc(&m->grads, c)) goto oom;
    posenc_fill(m->pe, c->max_len, c->d_model);
    params_init(&m->params, seed);
    if (views_make(m, backend_cpu())) goto oom;
    return 0;
oom:
    model_free(m);
    return fail(err, errlen, "out of memory building the model (%zu parameters, batch capacity %d x %d/%d)",
                model_param_count(c), max_B, max_Ts, max_Tt);
}

void model_free(Model *m) {
    if (!m) return;
    views_free(m);
    params_free(&m->params);
    params_free(&m->grads);
    free(m->pe);
    if (m->acts) {
        ModelActs *a = m->acts;
        free(a->enc);
        free(a->dec);
        free(a->h_src);
        free(a->h_enc_mask), free(a->h_dec_mask), free(a->h_cross_mask), free(a->h_pad);
        free(a->h_ones);
        free(a);
    }
    memset(m, 0, sizeof *m);
}

int model_to(Model *m, const Backend *be, char *err, size_t errlen) {
    if (be == m->be) return 0;
    if (m->cfg.norm == NORM_RMS && be != backend_cpu())   /* sublayer.c: RMSNorm is a plain CPU op so far */
        return fail(err, errlen, "RMSNorm runs on the CPU only so far; the %s backend has no kernel for it",
                    be->name);
    if (m->cfg.ffn == FFN_SWIGLU && be != backend_cpu())  /* ffn_any_forward: a plain CPU op so far */
        return fail(err, errlen, "the SwiGLU FFN runs on the CPU only so far; the %s backend has no kernel for "
                    "it", be->name);
    model_pull(m);                 /* the host arrays hold the latest weights */
    views_free(m);
    if (views_make(m, be)) {
        views_free(m);
        int rc = views_make(m, backend_cpu());
        (void)rc;                  /* the CPU's views are the host arrays: nothing to allocate but acts */
        return fail(err, errlen, "out of %s memory for the model (%zu parameters, batch capacity %d x %d/%d)",
                    be->name, m->params.n, m->max_B, m->max_Ts, m->max_Tt);
    }
    return 0;
}

void model_pull(Model *m) {
    m->be->download(m->params.mem, m->be_w.mem, m->params.n * sizeof(float));
    m->be->download(m->grads.mem, m->be_dw.mem, m->grads.n * sizeof(float));
}

void model_push(Model *m) {
    m->be->upload(m->be_w.mem, m->params.mem, m->params.n * sizeof(float));
}

void model_read(const Model *m, void *host, const void *p, size_t bytes) {
    m->be->download(host, p, bytes);
}

void model_zero_grad(Model *m) {
    m->be->zero(m->be_dw.mem, m->be_dw.n * sizeof(float));
}

int model_check_tokens(const Config *c, const int *ids, int n, const char *what,
                       char *err, size_t errlen) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab)
            return fail(err, errlen, "%s: token %d (position %d) is %d, outside the vocabulary 0..%d",
                        what, i + 1, i, ids[i], c->vocab - 1);
    return 0;
}

int model_check_sizes(const Model *m, int B, int Ts, int Tt, char *err, size_t errlen) {
    if (m->cfg.arch == ARCH_DECODER && Ts != 0)
        return fail(err, errlen, "a decoder-only model reads no source: Ts must be 0 (got %d)", Ts);
    if (B < 1 || Ts < (m->cfg.arch != ARCH_DECODER) || Tt < 1)
        return fail(err, errlen, "need at least 1 sequence of 1 token (got B=%d, Ts=%d, Tt=%d)", B, Ts, Tt);
    if (Ts > m->cfg.max_len || Tt > m->cfg.max_len)
        return fail(err, errlen, "a sequence of %d tokens is longer than max_len = %d",
                    Ts > Tt ? Ts : Tt, m->cfg.max_len);
    if (B > m->max_B || Ts > m->max_Ts || Tt > m->max_Tt)
        return fail(err, errlen, "batch %d x (%d source, %d target) tokens exceeds the capacity the model "
                    "was built for (%d x (%d, %d))", B, Ts, Tt, m->max_B, m->max_Ts, m->max_Tt);
    size_t need = model_acts_floats(&m->cfg, B, Ts, Tt);
    if (need > m->acts->cap)
        return fail(err, errlen, "batch %d x (%d source, %d target) tokens needs %.1f MB of activations; the "
                    "model was built with room for %.1f MB (its largest batch)", B, Ts, Tt, need * 4.0 / 1e6,
                    m->acts->cap * 4.0 / 1e6);
    return 0;
}

/* ============================================================================
 * 2. Forward
 * ========================================================================== */

void model_set_dropout(Model *m, Rng stream, int row0) {
    assert(row0 >= 0);
    m->dropout_rng = stream;
    m->drop_row0 = row0;
}

/* One dropout key per half of a training pass, the next draw of the model's
 * dropout stream (so a checkpoint of the stream resumes the same masks);
 * sites 0, 1, 2, ... of the half are the tensor numbers of dropout_mask.h.
 * Inference (p = 0) draws nothing. */
static void dropout_begin(Model *m, float p, int T) {
    ModelActs *a = m->acts;
    a->drop_site = 0;
    /* a data-parallel slice from row drop_row0 of (B,T,d_model) tensors */
    a->drop_off = (uint64_t)m->drop_row0 * T * m->cfg.d_model;
    a->drop_key = 0;
    if (p > 0) {
        uint64_t hi = rng_u32(&m->dropout_rng);
        a->drop_key = hi << 32 | rng_u32(&m->dropout_rng);
    }
}

/* The next dropout site of the half-pass: its tensor number and key (the
 * key shifted to this batch's first element of a data-parallel slice). */
static const DropoutSite *dropout_next(ModelActs *a, float p) {
    uint32_t site = a->drop_site++;
    a->drop = (DropoutSite){.p = p, .key = dropout_key_shift(a->drop_key, site, a->drop_off), .site = site};
    return &a->drop;
}

/* The PE added to the embeddings (Sec. 3.5): the fixed sinusoids, or the
 * learned table pos_embed of Table 3 (E); the same (max_len, d_model)
 * layout, so embed_forward reads rows 0..T-1 of either. */
static const float *pos_table(const Model *m) {
    return m->cfg.pos == POS_LEARNED ? m->be_w.pos_embed : m->be_pe;
}

/* Backward of "+ PE[t]" for a learned table: every sequence of the batch
 * added the same row t, so dPE[t] += sum over b of demb[b,t] (a product
 * with a row of B ones, a->ones). Padding rows of demb are 0. */
static void pos_backward(Model *m, const float *demb, int B, int T) {
    if (m->cfg.pos != POS_LEARNED) return;   /* sinusoids have no parameters */
    m->be->pos_embed_backward(m->be_dw.pos_embed, demb, m->acts->ones, B, T, m->cfg.d_model);
}

/* The FFN sub-layer's Sublayer, Eq. 2 through the backend table, or SwiGLU
 * (Config.ffn): not in the table yet, the plain layers/lm_ffn.h op on host
 * arrays, so a SwiGLU model runs on the CPU only (model_to refuses another
 * backend). out (rows,D), hidden, fa, fb (rows,d_ff) saved, x (rows,D). */
static void ffn_any_forward(const Model *m, float *out, float *hidden, float *fa, float *fb, const float *x,
                            const float *w1, const float *b1, const float *w2, const float *b2, const float *w3,
                            int rows) {
    const Config *c = &m->cfg;
    if (c->ffn == FFN_SWIGLU)   /* (silu(x W1) * (x W3)) W2 */
        swiglu_ffn_forward(out, fa, fb, hidden, x, w1, w3, w2, rows, c->d_model, c->d_ff);
    else                        /* max(0, x W1 + b1) W2 + b2 */
        m->be->ffn_forward(out, hidden, x, w1, b1, w2, b2, rows, c->d_model, c->d_ff);
}
/* dx +=, and each weight's gradient +=, from dout; scratch a->d_hidden */
static void ffn_any_backward(const Model *m, float *dx, float *dw1, float *db1, float *dw2, float *db2, float *dw3,
                             const float *dout, const float *hidden, const float *fa, const float *fb,
                             const float *x, const float *w1, const float *w2, const float *w3, int rows) {
    const Config *c = &m->cfg;
    float *scratch = m->acts->d_hidden;
    if (c->ffn == FFN_SWIGLU)
        swiglu_ffn_backward(dx, dw1, dw3, dw2, scratch, dout, fa, fb, hidden, x, w1, w3, w2, rows, c->d_model,
                            c->d_ff);
    else
        m->be->ffn_backward(dx, dw1, db1, dw2, db2, scratch, dout, hidden, x, w1, w2, rows, c->d_model, c->d_ff);
}

void model_encode(Model *m, const int *src, int B, int Ts, int training) {
    const Config *c = &m->cfg;
    const Backend *be = m->be;
    ModelActs *a = m->acts;
    assert(c->arch == ARCH_ENC_DEC && "a decoder-only model has no encoder: model_forward_lm");
    assert(B >= 1 && B <= m->max_B && Ts >= 1 && Ts <= m->max_Ts);
    int D = c->d_model, rows = B * Ts;
    SubLayerKind k = sublayer_kind(c);
    float p = training ? c->dropout : 0.0f;
    a->used_enc = acts_layout_encoder(a, c, a->mem, B, Ts);
    a->used_dec = 0;
    acts_fit(m, "model_encode", a->used_enc, B, Ts, 0);
    m->B = B, m->Ts = Ts;
    a->encoded = 1, a->decoded = 0, a->backward_done = 0;
    memcpy(a->h_src, src, (size_t)rows * sizeof(int));
    be->upload(a->src, src, (size_t)rows * sizeof(int));
    dropout_begin(m, p, Ts);

    /* Sec. 3.4-3.5: E[src] * sqrt(d_model) + PE, then dropout (Sec. 5.4) */
    be->embed_forward(a->src_emb, a->src, m->be_w.embed, pos_table(m), B, Ts, D, c->vocab);
    const DropoutSite *drop = dropout_next(a, p);
    be->dropout_forward(a->src_emb, a->src_keep, a->src_emb, p, (size_t)rows * D, drop->key, drop->site);

    /* padding keys are blocked for every query (Sec. 3.2.3's mask, for pads) */
    const uint8_t *mask = NULL;
    if (c->pad_id >= 0) {
        mask_from_tokens(a->h_enc_mask, src, c->pad_id, B, Ts, Ts);
        be->upload(a->enc_mask, a->h_enc_mask, (size_t)rows * Ts);
        mask = a->enc_mask;
    }

    const float *x = a->src_emb;
    for (int l = 0; l < c->N; l++) {
        const EncoderLayer *w = &m->be_w.enc[l];
        EncActs *e = &a->enc[l];
        /* x = LayerNorm(x + Dropout(SelfAttn(x)))   (Sec. 3.1, 3.2.3) */
        const float *in = sublayer_in(be, k, &e->sub[0], x, w->ln1_g, w->ln1_b, rows, D);
        be->mha_forward(e->sub[0].out, &e->attn, &w->self_attn, in, in, mask,
                        B, Ts, Ts, D, c->h, c->d_k, c->d_v);
        x = sublayer_out(be, k, &e->sub[0], x, w->ln1_g, w->ln1_b, dropout_next(a, p), rows, D);
        /* x = LayerNorm(x + Dropout(FFN(x)))         (Eq. 2) */
        in = sublayer_in(be, k, &e->sub[1], x, w->ln2_g, w->ln2_b, rows, D);
        ffn_any_forward(m, e->sub[1].out, e->hidden, e->ffn_a, e->ffn_b, in, w->ffn_w1, w->ffn_b1, w->ffn_w2,
                        w->ffn_b2, w->ffn_w3, rows);
        x = sublayer_out(be, k, &e->sub[1], x, w->ln2_g, w->ln2_b, dropout_next(a, p), rows, D);
    }
    if (k.pre_ln) {   /* a pre-LN stack ends with one more Norm */
        sublayer_norm_forward(be, k, a->enc_ln, a->enc_mean, a->enc_rstd, x, m->be_w.enc_ln_g, m->be_w.enc_ln_b, rows, D);
        x = a->enc_ln;
    }
    a->memory = x;
}

const float *model_decode(Model *m, const int *tgt, int Tt, int training) {
    const Config *c = &m->cfg;
    const Backend *be = m->be;
    ModelActs *a = m->acts;
    assert(a->encoded && "model_decode needs a model_encode first");
    assert(Tt >= 1 && Tt <= m->max_Tt);
    int B = m->B, Ts = m->Ts, D = c->d_model, V = c->vocab, rows = B * Tt;
    int lm = c->arch == ARCH_DECODER;   /* no memory, no cross-attention */
    SubLayerKind k = sublayer_kind(c);
    float p = training ? c->dropout : 0.0f;
    a->used_dec = acts_layout_decoder(a, c, a->mem + a->used_enc, B, Ts, Tt);
    acts_fit(m, "model_decode", a->used_enc + a->used_dec, B, Ts, Tt);
    m->Tt = Tt;
    a->decoded = 1, a->backward_done = 0;
    be->upload(a->tgt, tgt, (size_t)rows * sizeof(int));
    dropout_begin(m, p, Tt);

    /* the same embedding matrix as the encoder's (Sec. 3.4) */
    be->embed_forward(a->tgt_emb, a->tgt, m->be_w.embed, pos_table(m), B, Tt, D, V);
    const DropoutSite *drop = dropout_next(a, p);
    be->dropout_forward(a->tgt_emb, a->tgt_keep, a->tgt_emb, p, (size_t)rows * D, drop->key, drop->site);

    /* Masked self-attention: position i sees positions <= i only (Sec. 3.2.3:
     * "preserve the auto-regressive property"), and never a padding token. */
    mask_causal(a->h_dec_mask, B, Tt, Tt);
    const uint8_t *cross = NULL;
    if (c->pad_id >= 0) {
        mask_from_tokens(a->h_pad, tgt, c->pad_id, B, Tt, Tt);
        mask_and(a->h_dec_mask, a->h_pad, rows * Tt);
    }
    if (c->pad_id >= 0 && !lm) {
        mask_from_tokens(a->h_cross_mask, a->h_src, c->pad_id, B, Tt, Ts);   /* source padding */
        be->upload(a->cross_mask, a->h_cross_mask, (size_t)rows * Ts);
        cross = a->cross_mask;
    }
    be->upload(a->dec_mask, a->h_dec_mask, (size_t)rows * Tt);

    const float *x = a->tgt_emb, *memory = a->memory;
    for (int l = 0; l < c->N; l++) {
        const DecoderLayer *w = &m->be_w.dec[l];
        DecActs *d = &a->dec[l];
        /* x = LayerNorm(x + Dropout(MaskedSelfAttn(x))) */
        const float *in = sublayer_in(be, k, &d->sub[0], x, w->ln1_g, w->ln1_b, rows, D);
        be->mha_forward(d->sub[0].out, &d->self, &w->self_attn, in, in, a->dec_mask,
                        B, Tt, Tt, D, c->h, c->d_k, c->d_v);
        x = sublayer_out(be, k, &d->sub[0], x, w->ln1_g, w->ln1_b, dropout_next(a, p), rows, D);
        /* x = LayerNorm(x + Dropout(CrossAttn(x, memory))): queries from the
         * decoder, keys and values from the encoder output (Sec. 3.2.3);
         * a decoder-only model has no memory and skips it */
        if (!lm) {
            in = sublayer_in(be, k, &d->sub[1], x, w->ln2_g, w->ln2_b, rows, D);
            be->mha_forward(d->sub[1].out, &d->cross, &w->cross_attn, in, memory, cross,
                            B, Tt, Ts, D, c->h, c->d_k, c->d_v);
            x = sublayer_out(be, k, &d->sub[1], x, w->ln2_g, w->ln2_b, dropout_next(a, p), rows, D);
        }
        /* x = LayerNorm(x + Dropout(FFN(x))) */
        in = sublayer_in(be, k, &d->sub[2], x, w->ln3_g, w->ln3_b, rows, D);
        ffn_any_forward(m, d->sub[2].out, d->hidden, d->ffn_a, d->ffn_b, in, w->ffn_w1, w->ffn_b1, w->ffn_w2,
                        w->ffn_b2, w->ffn_w3, rows);
        x = sublayer_out(be, k, &d->sub[2], x, w->ln3_g, w->ln3_b, dropout_next(a, p), rows, D);
    }
    if (k.pre_ln) {   /* a pre-LN stack ends with one more Norm */
        sublayer_norm_forward(be, k, a->dec_ln, a->dec_mean, a->dec_rstd, x, m->be_w.dec_ln_g, m->be_w.dec_ln_b, rows, D);
        x = a->dec_ln;
    }
    a->dec_out = x;

    /* The pre-softmax linear transformation IS the embedding matrix (Sec. 3.4):
     * logits (B*Tt, V) = x (B*Tt, D) @ E^T, E (V, D). */
    be->logits_forward(a->logits, x, m->be_w.embed, rows, D, V);
    be->logsoftmax_forward(a->logp, a->logits, rows, V);
    return a->logp;
}

const float *model_forward(Model *m, const int *src, const int *tgt, int B, int Ts, int Tt,
                           int training) {
    if (m->cfg.arch == ARCH_DECODER) {
        assert(src == NULL && Ts == 0 && "a decoder-only model reads no source");
        return model_forward_lm(m, tgt, B, Tt, training);
    }
    model_encode(m, src, B, Ts, training);
    return model_decode(m, tgt, Tt, training);
}

const float *model_forward_lm(Model *m, const int *tgt, int B, int T, int training) {
    ModelActs *a = m->acts;
    assert(m->cfg.arch == ARCH_DECODER && "model_forward_lm is the decoder-only model's forward");
    assert(B >= 1 && B <= m->max_B);
    /* no encoder: its region is empty, and the decoder starts the block */
    a->used_enc = 0;
    m->B = B, m->Ts = 0;
    a->encoded = 1;   /* (nothing to encode) */
    a->memory = NULL;
    return model_decode(m, tgt, T, training);
}

/* ============================================================================
 * 3. Backward
 *
 * Every residual sub-layer is undone in two halves around the Sublayer's
 * own backward (mha_backward or ffn_backward), sublayer.h's:
 *   sublayer_out_backward: from dy = dL/d(output), dx = dL/dx starts with
 *                          the residual path, a->d_sub = dL/d(Sublayer
 *                          output); returns where the Sublayer's input
 *                          gradient must go;
 *   sublayer_in_backward:  pre-LN only: the Norm's backward adds into dx.
 * ========================================================================== */

static void swap(float **p, float **q) {
    float *t = *p;
    *p = *q;
    *q = t;
}

void model_backward(Model *m, const float *dlogits) {
    const Config *c = &m->cfg;
    ModelActs *a = m->acts;
    assert(a->encoded && a->decoded && "model_backward needs a model_forward first");
    int B = m->B, Ts = m->Ts, Tt = m->Tt, D = c->d_model, V = c->vocab;
    int lm = c->arch == ARCH_DECODER;   /* no cross-attention, no encoder */
    SubLayerKind k = sublayer_kind(c);
    int hh = c->h, dk = c->d_k, dv = c->d_v;
    int rt = B * Tt, rs = B * Ts;
    const Backend *be = m->be;
    Params *P = &m->be_w, *G = &m->be_dw;
    size_t used = acts_layout_backward(a, c, a->mem + a->used_enc + a->used_dec, B, Ts, Tt);
    acts_fit(m, "model_backward", a->used_enc + a->used_dec + used, B, Ts, Tt);
    if (c->pos == POS_LEARNED) be->upload(a->ones, a->h_ones, (size_t)B * sizeof(float));
    float *dy = a->d_y, *dx = a->d_x;

    /* forward: logits = dec_out @ E^T
     *   d dec_out (rt,D) = dlogits (rt,V) @ E (V,D)    (written into dy)
     *   dE (V,D)        += dlogits^T @ dec_out        (use 1 of 3 of E) */
    be->logits_backward(dy, G->embed, dlogits, a->dec_out, P->embed, rt, D, V);

    if (k.pre_ln) {
        /* forward: dec_out = LayerNorm(x) */
        const float *dec_last = sublayer_output(k, &a->dec[c->N - 1].sub[2]);
        be->zero(dx, (size_t)rt * D * sizeof(float));
        sublayer_norm_backward(be, k, dx, G->dec_ln_g, G->dec_ln_b, dy, dec_last, a->dec_mean, a->dec_rstd,
                               P->dec_ln_g, rt, D);
        swap(&dy, &dx);
    }

    /* ---- decoder, last layer first ---- */
    if (!lm) be->zero(a->d_mem, (size_t)rs * D * sizeof(float));
    for (int l = c->N - 1; l >= 0; l--) {
        const DecoderLayer *w = &P->dec[l];
        DecoderLayer *gw = &G->dec[l];
        DecActs *d = &a->dec[l];
        const float *x0 = l == 0 ? a->tgt_emb : sublayer_output(k, &a->dec[l - 1].sub[2]);
        /* x2, the FFN's input: the cross-attention's output, or (decoder
         * only) the self-attention's */
        const float *x1 = sublayer_output(k, &d->sub[0]), *x2 = lm ? x1 : sublayer_output(k, &d->sub[1]);
        const float *in;
        float *din;

        /* forward: x3 = LayerNorm(x2 + Dropout(FFN(x2))) */
        din = sublayer_out_backward(be, k, dx, a->d_sub, a->d_ln, gw->ln3_g, gw->ln3_b, dy, &d->sub[2], w->ln3_g,
                                    rt, D);
        in = sublayer_input(k, &d->sub[2], x2);
        ffn_any_backward(m, din, gw->ffn_w1, gw->ffn_b1, gw->ffn_w2, gw->ffn_b2, gw->ffn_w3, a->d_sub, d->hidden,
                         d->ffn_a, d->ffn_b, in, w->ffn_w1, w->ffn_w2, w->ffn_w3, rt);
        sublayer_in_backward(be, k, dx, gw->ln3_g, gw->ln3_b, a->d_ln, &d->sub[2], x2, w->ln3_g, rt, D);
        swap(&dy, &dx);

        /* forward: x2 = LayerNorm(x1 + Dropout(CrossAttn(x1, memory)));
         * the keys' and values' gradient flows into the memory, summed over
         * all N decoder layers that read it. (None in a decoder-only model.) */
        if (!lm) {
            din = sublayer_out_backward(be, k, dx, a->d_sub, a->d_ln, gw->ln2_g, gw->ln2_b, dy, &d->sub[1],
                                        w->ln2_g, rt, D);
            in = sublayer_input(k, &d->sub[1], x1);
            be->mha_backward(din, a->d_mem, &gw->cross_attn, a->d_scratch, a->d_sub, &d->cross, &w->cross_attn,
                             in, a->memory, B, Tt, Ts, D, hh, dk, dv);
            sublayer_in_backward(be, k, dx, gw->ln2_g, gw->ln2_b, a->d_ln, &d->sub[1], x1, w->ln2_g, rt, D);
            swap(&dy, &dx);
        }

        /* forward: x1 = LayerNorm(x0 + Dropout(MaskedSelfAttn(x0))) */
        din = sublayer_out_backward(be, k, dx, a->d_sub, a->d_ln, gw->ln1_g, gw->ln1_b, dy, &d->sub[0], w->ln1_g,
                                    rt, D);
        in = sublayer_input(k, &d->sub[0], x0);
        be->mha_backward(din, din, &gw->self_attn, a->d_scratch, a->d_sub, &d->self, &w->self_attn,
                     in, in, B, Tt, Tt, D, hh, dk, dv);
        sublayer_in_backward(be, k, dx, gw->ln1_g, gw->ln1_b, a->d_ln, &d->sub[0], x0, w->ln1_g, rt, D);
        swap(&dy, &dx);
    }

    /* forward: tgt_emb = Dropout(E[tgt] * sqrt(D) + PE)  (use 2 of 3 of E) */
    size_t nt = (size_t)rt * D;
    be->zero(a->d_tgt_emb, nt * sizeof(float));
    be->dropout_backward(a->d_tgt_emb, dy, a->tgt_keep, nt);
    be->embed_backward(G->embed, a->d_tgt_emb, a->tgt, B, Tt, D, V);
    pos_backward(m, a->d_tgt_emb, B, Tt);
    if (lm) {   /* a decoder-only model ends here */
        a->backward_done = 1;
        return;
    }

    /* ---- encoder: its output's gradient is what the cross-attentions sent ---- */
    size_t ns = (size_t)rs * D;
    if (k.pre_ln) {
        /* forward: memory = LayerNorm(x) */
        const float *enc_last = sublayer_output(k, &a->enc[c->N - 1].sub[1]);
        be->zero(dy, ns * sizeof(float));
        sublayer_norm_backward(be, k, dy, G->enc_ln_g, G->enc_ln_b, a->d_mem, enc_last, a->enc_mean, a->enc_rstd,
                               P->enc_ln_g, rs, D);
    } else {
        be->copy(dy, a->d_mem, ns * sizeof(float));
    }
    for (int l = c->N - 1; l >= 0; l--) {
        const EncoderLayer *w = &P->enc[l];
        EncoderLayer *gw = &G->enc[l];
        EncActs *e = &a->enc[l];
        const float *x0 = l == 0 ? a->src_emb : sublayer_output(k, &a->enc[l - 1].sub[1]);
        const float *x1 = sublayer_output(k, &e->sub[0]);
        const float *in;
        float *din;

        /* forward: x2 = LayerNorm(x1 + Dropout(FFN(x1))) */
        din = sublayer_out_backward(be, k, dx, a->d_sub, a->d_ln, gw->ln2_g, gw->ln2_b, dy, &e->sub[1], w->ln2_g,
                                    rs, D);
        in = sublayer_input(k, &e->sub[1], x1);
        ffn_any_backward(m, din, gw->ffn_w1, gw->ffn_b1, gw->ffn_w2, gw->ffn_b2, gw->ffn_w3, a->d_sub, e->hidden,
                         e->ffn_a, e->ffn_b, in, w->ffn_w1, w->ffn_w2, w->ffn_w3, rs);
        sublayer_in_backward(be, k, dx, gw->ln2_g, gw->ln2_b, a->d_ln, &e->sub[1], x1, w->ln2_g, rs, D);
        swap(&dy, &dx);

        /* forward: x1 = LayerNorm(x0 + Dropout(SelfAttn(x0))) */
        din = sublayer_out_backward(be, k, dx, a->d_sub, a->d_ln, gw->ln1_g, gw->ln1_b, dy, &e->sub[0], w->ln1_g,
                                    rs, D);
        in = sublayer_input(k, &e->sub[0], x0);
        be->mha_backward(din, din, &gw->self_attn, a->d_scratch, a->d_sub, &e->attn, &w->self_attn,
                     in, in, B, Ts, Ts, D, hh, dk, dv);
        sublayer_in_backward(be, k, dx, gw->ln1_g, gw->ln1_b, a->d_ln, &e->sub[0], x0, w->ln1_g, rs, D);
        swap(&dy, &dx);
    }

    /* forward: src_emb = Dropout(E[src] * sqrt(D) + PE)  (use 3 of 3 of E) */
    be->zero(a->d_src_emb, ns * sizeof(float));
    be->dropout_backward(a->d_src_emb, dy, a->src_keep, ns);
    be->embed_backward(G->embed, a->d_src_emb, a->src, B, Ts, D, V);
    pos_backward(m, a->d_src_emb, B, Ts);
    a->backward_done = 1;
}

/* ============================================================================
 * 4. Inspection
 * ========================================================================== */

const float *model_memory(const Model *m) {
    assert(m->acts->encoded);
    return m->acts->memory;
}

const float *model_attention(const Model *m, AttnKind kind, int layer) {
    assert(layer >= 0 && layer < m->cfg.N);
    const ModelActs *a = m->acts;
    switch (kind) {
    case ATTN_ENC_SELF: assert(a->encoded && m->cfg.arch != ARCH_DECODER); return a->enc[layer].attn.weights;
    case ATTN_DEC_SELF: assert(a->decoded); return a->dec[layer].self.weights;
    case ATTN_DEC_CROSS: assert(a->decoded && m->cfg.arch != ARCH_DECODER); return a->dec[layer].cross.weights;
    }
    return NULL;
}

const uint8_t *model_mask(const Model *m, AttnKind kind) {
    const ModelActs *a = m->acts;
    switch (kind) {
    case ATTN_ENC_SELF: return m->cfg.pad_id >= 0 && m->cfg.arch != ARCH_DECODER ? a->h_enc_mask : NULL;
    case ATTN_DEC_SELF: return a->h_dec_mask;
    case ATTN_DEC_CROSS: return m->cfg.pad_id >= 0 && m->cfg.arch != ARCH_DECODER ? a->h_cross_mask : NULL;
    }
    return NULL;
}

const float *model_embedded(const Model *m, int decoder) {
    assert(decoder ? m->acts->decoded : m->acts->encoded && m->cfg.arch != ARCH_DECODER);
    return decoder ? m->acts->tgt_emb : m->acts->src_emb;
}

const float *model_sublayer(const Model *m, int decoder, int layer, SubKind sub, SubPart part) {
    const ModelActs *a = m->acts;
    assert(layer >= 0 && layer < m->cfg.N && part >= SUB_OUT && part <= SUB_Y);
    assert(decoder ? (a->decoded && sub >= 0 && sub < 3) : (a->encoded && sub >= 0 && sub < 2));
    assert(m->cfg.arch != ARCH_DECODER || (decoder && sub != SUB_CROSS_ATTN));
    const SubActs *s = decoder ? &a->dec[layer].sub[sub] : &a->enc[layer].sub[sub];
    switch (part) {
    case SUB_OUT: return s->out;
    case SUB_SUM: return s->res;
    case SUB_Y: break;
    }
    return sublayer_output(sublayer_kind(&m->cfg), s);
}

const float *model_decoder_output(const Model *m) {
    assert(m->acts->decoded);
    return m->acts->dec_out;
}

const float *model_logits(const Model *m) {
    assert(m->acts->decoded);
    return m->acts->logits;
}

const float *model_input_grad(const Model *m, int decoder) {
    assert(m->acts->backward_done && (decoder || m->cfg.arch != ARCH_DECODER));
    return decoder ? m->acts->d_tgt_emb : m->acts->d_src_emb;
}

