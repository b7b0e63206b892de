/* sublayer.c - Add & Norm (Sec. 3.1): forward and backward side by side,
 * the layout of what it saves, and the one switch of its Norm (sublayer.h).
 */
#include "model/sublayer.h"
#include "ref/lm_ops.h"

#include <assert.h>

SubLayerKind sublayer_kind(const Config *c) {
    return (SubLayerKind){.pre_ln = c->pre_ln, .norm = (NormKind)c->norm};
}

size_t sublayer_acts_layout(SubActs *s, float *buf, size_t rows, size_t D) {
    size_t n = rows * D;
    float **field[] = {&s->ln, &s->mean, &s->rstd, &s->out, &s->keep, &s->res};
    const size_t size[] = {n, rows, rows, n, n, n};
    size_t at = 0;
    for (size_t i = 0; i < sizeof size / sizeof size[0]; i++) {
        *field[i] = buf ? buf + at : NULL;
        at += (size[i] + 15) & ~(size_t)15;
    }
    return at;
}

/* ---- the Norm ---------------------------------------------------------------
 * The switch a new Norm plugs into: one case in each of these two.
 * RMSNorm is not in the backend table yet: its case calls the plain op of
 * ref/lm_ops.h on the host arrays, so a model with NORM_RMS runs on the CPU
 * only (model_to refuses another backend). It saves rstd alone; mean and
 * b (no bias) go unused. */

void sublayer_norm_forward(const Backend *be, SubLayerKind k, float *out, float *mean, float *rstd,
                           const float *x, const float *g, const float *b, int rows, int D) {
    switch (k.norm) {
    case NORM_LAYER: be->layernorm_forward(out, mean, rstd, x, g, b, rows, D); return;
    case NORM_RMS: rmsnorm_forward_ref(out, rstd, x, g, rows, D); return;   /* x / RMS(x) * g */
    }
    assert(0 && "unknown NormKind");
}

void sublayer_norm_backward(const Backend *be, SubLayerKind k, float *dx, float *dg, float *db,
                            const float *dout, const float *x, const float *mean, const float *rstd,
                            const float *g, int rows, int D) {
    switch (k.norm) {
    case NORM_LAYER: be->layernorm_backward(dx, dg, db, dout, x, mean, rstd, g, rows, D); return;
    case NORM_RMS: rmsnorm_backward_ref(dx, dg, dout, x, rstd, g, rows, D); return;
    }
    assert(0 && "unknown NormKind");
}

/* ---- forward ------------------------------------------------------------------ */

const float *sublayer_in(const Backend *be, SubLayerKind k, SubActs *s, const float *x, const float *g,
                         const float *b, int rows, int D) {
    if (!k.pre_ln) return x;                                           /* post-LN: Sublayer(x) */
    sublayer_norm_forward(be, k, s->ln, s->mean, s->rstd, x, g, b, rows, D);   /* pre-LN: Sublayer(Norm(x)) */
    return s->ln;
}

const float *sublayer_out(const Backend *be, SubLayerKind k, SubActs *s, const float *x, const float *g,
                          const float *b, const DropoutSite *drop, int rows, int D) {
    size_t n = (size_t)rows * D;
    if (drop) be->dropout_forward(s->out, s->keep, s->out, drop->p, n, drop->key, drop->site);
    be->residual_forward(s->res, x, s->out, n);                        /* res = x + Dropout(Sublayer) */
    if (k.pre_ln) return s->res;                                       /* pre-LN: y = res */
    sublayer_norm_forward(be, k, s->ln, s->mean, s->rstd, s->res, g, b, rows, D);   /* post-LN: y = Norm(res) */
    return s->ln;
}

const float *sublayer_input(SubLayerKind k, const SubActs *s, const float *x) { return k.pre_ln ? s->ln : x; }

const float *sublayer_output(SubLayerKind k, const SubActs *s) { return k.pre_ln ? s->res : s->ln; }

/* ---- backward ----------------------------------------------------------------- */

float *sublayer_out_backward(const Backend *be, SubLayerKind k, float *dx, float *dsub, float *dln, float *dg,
                             float *db, const float *dy, const SubActs *s, const float *g, int rows, int D) {
    size_t n = (size_t)rows * D;
    /* forward: res = x + out, so dres reaches x unchanged (the residual
     * path) and out too. dx starts as dres: */
    if (!k.pre_ln) {
        /* post-LN forward: y = Norm(res) */
        be->zero(dx, n * sizeof(float));
        sublayer_norm_backward(be, k, dx, dg, db, dy, s->res, s->mean, s->rstd, g, rows, D);
    } else {
        be->copy(dx, dy, n * sizeof(float));     /* pre-LN forward: y = res */
    }
    /* forward: out = Dropout(Sublayer(in)) in place, with scales keep:
     * dsub = dres * keep */
    be->zero(dsub, n * sizeof(float));
    be->dropout_backward(dsub, dx, s->keep, n);
    if (!k.pre_ln) return dx;                    /* the Sublayer read x itself */
    be->zero(dln, n * sizeof(float));
    return dln;                                  /* the Sublayer read Norm(x) */
}

void sublayer_in_backward(const Backend *be, SubLayerKind k, float *dx, float *dg, float *db, const float *dln,
                          const SubActs *s, const float *x, const float *g, int rows, int D) {
    /* pre-LN forward: in = Norm(x) */
    if (k.pre_ln) sublayer_norm_backward(be, k, dx, dg, db, dln, x, s->mean, s->rstd, g, rows, D);
}
