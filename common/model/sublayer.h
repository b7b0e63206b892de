/* sublayer.h - the residual connection around every sub-layer (Sec. 3.1),
 * one step before the Sublayer and one after it, through the backend table:
 *
 *   post-LN (the paper): x' = LayerNorm(x + Sublayer(x))
 *   pre-LN:              x' = x + Sublayer(LayerNorm(x))
 *
 * The training pass (model.c: every position at once, with dropout on the
 * Sublayer's output first, Sec. 5.4) and the cached decoding step (decode.c:
 * one new position per row) both call these two, so a decoder layer's
 * residual steps are written once; the Sublayers between them differ (the
 * step's attention reads the KV cache, its products stream the weights:
 * decode.h). Shapes: x, ln, res, sub (rows, D); mean, rstd (rows); g, b (D).
 */
#ifndef SUBLAYER_H
#define SUBLAYER_H

#include "model/backend.h"

/* What the Sublayer reads: x itself (post-LN), or ln = LayerNorm(x) with
 * gain g and bias b (pre-LN; mean, rstd saved for backward). */
const float *sublayer_in(const Backend *be, float *ln, float *mean, float *rstd, const float *x,
                         const float *g, const float *b, int pre_ln, int rows, int D);

/* res = x + sub (the residual connection; res may be x itself), then
 * post-LN: ln = LayerNorm(res) (ln may be x). Returns the sub-layer's
 * output x': ln (post-LN) or res (pre-LN). */
const float *sublayer_out(const Backend *be, float *res, float *ln, float *mean, float *rstd, const float *x,
                          const float *sub, const float *g, const float *b, int pre_ln, int rows, int D);

#endif
