/* sublayer.c - the residual connection around a sub-layer (sublayer.h). */
#include "model/sublayer.h"

const float *sublayer_in(const Backend *be, float *ln, float *mean, float *rstd, const float *x,
                         const float *g, const float *b, int pre_ln, int rows, int D) {
    if (!pre_ln) return x;
    be->layernorm_forward(ln, mean, rstd, x, g, b, rows, D);
    return ln;
}

const float *sublayer_out(const Backend *be, float *res, float *ln, float *mean, float *rstd, const float *x,
                          const float *sub, const float *g, const float *b, int pre_ln, int rows, int D) {
    be->residual_forward(res, x, sub, (size_t)rows * D);
    if (pre_ln) return res;
    be->layernorm_forward(ln, mean, rstd, res, g, b, rows, D);
    return ln;
}
