/* sublayer.h - Add & Norm: the residual connection around every sub-layer
 * (Sec. 3.1), its forward, its backward and what it saves.
 *
 *   post-LN (the paper): y = Norm(x + Dropout(Sublayer(x)))
 *   pre-LN:              y = x + Dropout(Sublayer(Norm(x)))
 *
 * "We apply dropout to the output of each sub-layer, before it is added to
 * the sub-layer input and normalized" (Sec. 5.4). The Norm is LayerNorm
 * (Ba et al. 2016); which Norm, and where it sits, is SubLayerKind, read
 * here and nowhere else: the model (model.c) and the cached decoding step
 * (decode.c) only call the functions below.
 *
 * A sub-layer is run in two halves around its Sublayer (multi-head
 * attention or the FFN, each the caller's own):
 *
 *   in = sublayer_in(be, k, s, x, g, b)         the Sublayer's input
 *   s->out = Sublayer(in)                        (the caller)
 *   y  = sublayer_out(be, k, s, x, g, b, drop)   Dropout, Add, Norm
 *
 * and its backward the same way in reverse:
 *
 *   din = sublayer_out_backward(be, k, dx, dsub, dln, dg, db, dy, s, g)
 *   Sublayer backward: din += (its input gradient, from dsub)
 *   sublayer_in_backward(be, k, dx, dg, db, dln, s, x, g)
 *
 * Shapes: x, y, s's tensors (rows, D); mean, rstd (rows); g, b (D): the
 * Norm's gain and bias. Every op runs through the backend table (backend.h);
 * nothing here allocates; backward ACCUMULATES into dg, db (and the caller's
 * Sublayer into din), as every backward does.
 */
#ifndef SUBLAYER_H
#define SUBLAYER_H

#include <stddef.h>
#include <stdint.h>
#include "model/backend.h"
#include "model/params.h"

/* Which Norm: NormKind (params.h), LayerNorm (the paper's) or RMSNorm. */

/* How every residual sub-layer of a model is wired. */
typedef struct {
    int pre_ln;       /* 0: post-LN (the paper), 1: pre-LN (Norm before the Sublayer) */
    NormKind norm;    /* which Norm                                                 */
} SubLayerKind;

/* The wiring c asks for (the same for every sub-layer of the model). */
SubLayerKind sublayer_kind(const Config *c);

/* What one sub-layer saves for backward. */
typedef struct {
    float *ln;          /* (rows,D) Norm's output: the Sublayer's input (pre-LN)
                           or the sub-layer's output y (post-LN)            */
    float *mean, *rstd; /* (rows)   saved by the Norm for backward          */
    float *out;         /* (rows,D) Sublayer output, dropout applied in place */
    float *keep;        /* (rows,D) dropout scales (0 or 1/(1-P_drop))      */
    float *res;         /* (rows,D) x + out: the sum the Norm reads (post-LN),
                           the output y (pre-LN)                            */
} SubActs;

/* Points s's fields into buf, each on a 64-byte boundary (16 floats, for
 * SIMD), and returns the floats they take; buf NULL only counts (fields
 * NULL). The one place this layout is written. */
size_t sublayer_acts_layout(SubActs *s, float *buf, size_t rows, size_t D);

/* One dropout site of a training pass (dropout_mask.h): P_drop of the pass
 * (0 at inference: every scale 1), the tensor's number and its key. */
typedef struct {
    float p;
    uint64_t key;
    uint32_t site;
} DropoutSite;

/* ---- the Norm ------------------------------------------------------------- */

/* out (rows,D) = Norm(x) with gain g and bias b; mean, rstd (rows) saved.
 * Also the Norm that ends a pre-LN stack (model.c). */
void sublayer_norm_forward(const Backend *be, SubLayerKind k, float *out, float *mean, float *rstd,
                           const float *x, const float *g, const float *b, int rows, int D);
/* dx +=, dg +=, db += through out = Norm(x), from dout. */
void sublayer_norm_backward(const Backend *be, SubLayerKind k, float *dx, float *dg, float *db,
                            const float *dout, const float *x, const float *mean, const float *rstd,
                            const float *g, int rows, int D);

/* ---- forward -------------------------------------------------------------- */

/* What the Sublayer reads: x itself (post-LN), or s->ln = Norm(x) (pre-LN). */
const float *sublayer_in(const Backend *be, SubLayerKind k, SubActs *s, const float *x, const float *g,
                         const float *b, int rows, int D);

/* After the Sublayer wrote s->out: s->out = Dropout(s->out) with drop's
 * site (its scales in s->keep; drop NULL: no dropout at all, s->keep unused:
 * the cached decoding step), s->res = x + s->out, then post-LN s->ln =
 * Norm(s->res). Returns y: s->ln (post-LN) or s->res (pre-LN). s->res may
 * be x itself (pre-LN), s->ln may be x (post-LN): the decoding step
 * updates its one row of x in place. */
const float *sublayer_out(const Backend *be, SubLayerKind k, SubActs *s, const float *x, const float *g,
                          const float *b, const DropoutSite *drop, int rows, int D);

/* What the Sublayer read in forward (post-LN: x; pre-LN: s->ln), and the
 * sub-layer's output y (post-LN: s->ln; pre-LN: s->res). */
const float *sublayer_input(SubLayerKind k, const SubActs *s, const float *x);
const float *sublayer_output(SubLayerKind k, const SubActs *s);

/* ---- backward ------------------------------------------------------------- */

/* From dy = dL/dy: dx = dL/dx through the residual path (written, not
 * added), dsub = dL/d(Sublayer output) (written), and dln zeroed for pre-LN.
 * Returns where the Sublayer's backward must add its input gradient: dx
 * (post-LN: the Sublayer read x) or dln (pre-LN: it read Norm(x)). dg, db
 * += the post-LN Norm's gradients. dx, dsub, dln: (rows,D), distinct from
 * dy and from each other. */
float *sublayer_out_backward(const Backend *be, SubLayerKind k, float *dx, float *dsub, float *dln, float *dg,
                             float *db, const float *dy, const SubActs *s, const float *g, int rows, int D);

/* After the Sublayer's backward: pre-LN, dx +=, dg +=, db += through
 * s->ln = Norm(x), from dln; post-LN, nothing. x: the sub-layer's input. */
void sublayer_in_backward(const Backend *be, SubLayerKind k, float *dx, float *dg, float *db, const float *dln,
                          const SubActs *s, const float *x, const float *g, int rows, int D);

#endif
