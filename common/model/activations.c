/* activations.c - the layout of the model's one activation block (the
 * regions and what is in them: activations.h), the count that sizes it
 * (model_acts_floats) and the check that a batch fits it (acts_fit). */
#include "model/activations.h"
#include "layers/multihead.h"
#include "model/sublayer.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

/* A bump allocator over one region. With base == NULL it only counts, which
 * is how build sizes each region: the same code computes size and layout. */
typedef struct {
    float *base;
    size_t used;
} Bump;

static float *take(Bump *b, size_t n) {
    float *p = b->base ? b->base + b->used : NULL;
    b->used += (n + 15) & ~(size_t)15;   /* 64-byte alignment for SIMD */
    return p;
}
static int *take_ints(Bump *b, size_t n) { return (int *)take(b, n); }
static uint8_t *take_bytes(Bump *b, size_t n) { return (uint8_t *)take(b, (n + 3) / 4); }

/* A layer's saved tensors, laid out by the layer's own function
 * (sublayer.h, layers/multihead.h): counted first (buf NULL), then pointed
 * into the region taken for them. */
static void take_sub(Bump *b, SubActs *s, size_t rows, size_t D) {
    float *buf = take(b, sublayer_acts_layout(s, NULL, rows, D));
    if (buf) sublayer_acts_layout(s, buf, rows, D);
}

static void take_mha(Bump *b, MhaActs *a, const Config *c, int B, int Tq, int Tk) {
    float *buf = take(b, mha_acts_layout(a, NULL, B, Tq, Tk, c->h, c->d_k, c->d_v));
    if (buf) mha_acts_layout(a, buf, B, Tq, Tk, c->h, c->d_k, c->d_v);
}

/* SwiGLU's saved products x W1, x W3, (rows, d_ff) each; none for ReLU */
static void take_glu(Bump *b, float **fa, float **fb, const Config *c, size_t rows) {
    int glu = c->ffn == FFN_SWIGLU;
    *fa = glu ? take(b, rows * (size_t)c->d_ff) : NULL;
    *fb = glu ? take(b, rows * (size_t)c->d_ff) : NULL;
}

size_t acts_layout_encoder(ModelActs *a, const Config *c, float *base, int B, int Ts) {
    Bump b = {base, 0};
    if (c->arch == ARCH_DECODER) return 0;   /* no encoder: an empty region */
    size_t rows = (size_t)B * Ts, D = (size_t)c->d_model;
    a->src = take_ints(&b, rows);
    a->src_emb = take(&b, rows * D);
    a->src_keep = take(&b, rows * D);
    a->enc_mask = take_bytes(&b, rows * (size_t)Ts);
    EncActs count_only;   /* model_acts_floats counts with no per-layer tables */
    for (int l = 0; l < c->N; l++) {
        EncActs *e = a->enc ? &a->enc[l] : &count_only;
        take_sub(&b, &e->sub[0], rows, D);
        take_sub(&b, &e->sub[1], rows, D);
        take_mha(&b, &e->attn, c, B, Ts, Ts);
        e->hidden = take(&b, rows * (size_t)c->d_ff);
        take_glu(&b, &e->ffn_a, &e->ffn_b, c, rows);
    }
    a->enc_ln = take(&b, rows * D);
    a->enc_mean = take(&b, rows);
    a->enc_rstd = take(&b, rows);
    return b.used;
}

size_t acts_layout_decoder(ModelActs *a, const Config *c, float *base, int B, int Ts, int Tt) {
    Bump b = {base, 0};
    size_t rows = (size_t)B * Tt, D = (size_t)c->d_model;
    a->tgt = take_ints(&b, rows);
    a->tgt_emb = take(&b, rows * D);
    a->tgt_keep = take(&b, rows * D);
    a->dec_mask = take_bytes(&b, rows * (size_t)Tt);
    a->cross_mask = take_bytes(&b, rows * (size_t)Ts);
    a->pad_tmp = take_bytes(&b, rows * (size_t)Tt);
    DecActs count_only;
    for (int l = 0; l < c->N; l++) {
        DecActs *d = a->dec ? &a->dec[l] : &count_only;
        for (int s = 0; s < 3; s++)   /* sub[1], cross-attention: none in a language model */
            if (s != 1 || c->arch != ARCH_DECODER) take_sub(&b, &d->sub[s], rows, D);
        take_mha(&b, &d->self, c, B, Tt, Tt);
        if (c->arch != ARCH_DECODER) take_mha(&b, &d->cross, c, B, Tt, Ts);
        d->hidden = take(&b, rows * (size_t)c->d_ff);
        take_glu(&b, &d->ffn_a, &d->ffn_b, c, rows);
    }
    a->dec_ln = take(&b, rows * D);
    a->dec_mean = take(&b, rows);
    a->dec_rstd = take(&b, rows);
    a->logits = take(&b, rows * (size_t)c->vocab);
    a->logp = take(&b, rows * (size_t)c->vocab);
    return b.used;
}

static size_t max3(size_t a, size_t b, size_t c) {
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

size_t acts_layout_backward(ModelActs *a, const Config *c, float *base, int B, int Ts, int Tt) {
    Bump b = {base, 0};
    size_t T = (size_t)(Ts > Tt ? Ts : Tt), D = (size_t)c->d_model, rows = (size_t)B * T;
    a->d_y = take(&b, rows * D);
    a->d_x = take(&b, rows * D);
    a->d_ln = take(&b, rows * D);
    a->d_sub = take(&b, rows * D);
    a->d_mem = take(&b, (size_t)B * Ts * D);
    a->d_hidden = take(&b, rows * (size_t)c->d_ff * (c->ffn == FFN_SWIGLU ? 3 : 1));   /* swiglu_ffn_backward */
    a->d_scratch = take(&b, max3(mha_scratch_size(B, Ts, Ts, c->h, c->d_k, c->d_v),
                                 mha_scratch_size(B, Tt, Tt, c->h, c->d_k, c->d_v),
                                 mha_scratch_size(B, Tt, Ts, c->h, c->d_k, c->d_v)));
    a->d_src_emb = take(&b, (size_t)B * Ts * D);
    a->d_tgt_emb = take(&b, (size_t)B * Tt * D);
    a->ones = take(&b, (size_t)B);
    return b.used;
}

size_t model_acts_floats(const Config *c, int B, int Ts, int Tt) {
    /* Ts: 0 for ARCH_DECODER (no source), at least 1 otherwise */
    if (B < 1 || Ts < (c->arch != ARCH_DECODER) || Tt < 1 || config_validate(c, NULL, 0)) return 0;
    if (c->arch == ARCH_DECODER && Ts != 0) return 0;
    /* A generous upper bound in double first (every term of the layout
     * below, at T = max(Ts, Tt), twice over): sizes whose count would
     * overflow size_t are answered SIZE_MAX before any size_t product. */
    double T = Ts > Tt ? Ts : Tt, rows = (double)B * T, D = c->d_model, F = c->d_ff, V = c->vocab;
    double attn = c->h * (2.0 * c->d_k + 2.0 * c->d_v + T);
    double bound = 2 * rows * (c->N * (20 * D + 6 * F + 20 + 3 * attn) + 10 * D + 3 * F + attn + 2 * V + 2 * T + 20)
                 + 1024.0 * (c->N + 1);
    if (bound > 1e18) return SIZE_MAX;
    ModelActs a = {0};   /* no per-layer tables, no base: the layouts only count */
    return acts_layout_encoder(&a, c, NULL, B, Ts) + acts_layout_decoder(&a, c, NULL, B, Ts, Tt) +
           acts_layout_backward(&a, c, NULL, B, Ts, Tt);
}

/* Every call's regions must fit the block: a batch beyond the capacity the
 * model was built with is a programming error (model_check_sizes tells a
 * caller beforehand, with a message), so it stops here, shapes printed,
 * before anything is written past the end. need: floats from the start of
 * the block to the end of the caller's region. */
void acts_fit(const Model *m, const char *who, size_t need, int B, int Ts, int Tt) {
    if (need <= m->acts->cap) return;
    char tgt[40] = " (the encoder)";
    if (Tt > 0) snprintf(tgt, sizeof tgt, " / Tt=%d target", Tt);
    fprintf(stderr, "%s: a batch of B=%d sequences of Ts=%d source%s tokens needs %zu floats of activations; "
            "the model holds %zu (built for max_B=%d, max_Ts=%d, max_Tt=%d; model_acts_floats of the largest "
            "batch sizes a model_build_cap)\n", who, B, Ts, tgt, need, m->acts->cap, m->max_B, m->max_Ts, m->max_Tt);
    assert(0 && "batch beyond the activation capacity the model was built with");
    abort();   /* even with NDEBUG: never write past the block */
}
