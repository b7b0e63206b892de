/* rows.h - the decoder step's ops, plain: one new position per row.
 *
 * A decoding step (model/decode.h) runs the decoder for one new position of
 * each of R rows (one row per sentence and beam) against what earlier
 * positions left in the KV cache. Its ops are the training pass's, cut to a
 * few rows: products with few rows, Eq. (1) for one query, and copies of
 * rows into and out of the cache. These are the plain loops a reader reads
 * first; fast/rows_fast.h has the tuned twins the CPU backend runs (same
 * signatures; tests/check_decode.c compares each pair).
 *
 * Sizes: R rows, IN / OUT a product's widths, D = d_model, V vocabulary,
 * h heads of d_k (queries, keys) and d_v (values) each.
 */
#ifndef ROWS_H
#define ROWS_H

#include <stddef.h>
#include <stdint.h>

/* out (R,OUT) = inp (R,IN) @ W (IN,OUT) + bias (OUT, or NULL) */
void linear_rows_forward_ref(float *out, const float *inp, const float *W, const float *bias,
                             int R, int IN, int OUT);

/* out (R,V) = x (R,D) @ E^T, E (V,D): the logits against the shared
 * embedding (Sec. 3.4), one dot product per row and vocabulary entry */
void logits_rows_forward_ref(float *out, const float *x, const float *E, int R, int D, int V);

/* Eq. (1) for one query per row and head against n cached keys.
 * Row r, head i: the query at q[(r*h + i)*d_k]; keys K[((b*h + i)*stride
 * + j)*d_k] and values V[((b*h + i)*stride + j)*d_v] for j < n, with
 * b = r / group (group rows share one sentence's keys: the K beams in the
 * cross-attention; 1 in the self-attention, where every row has its own);
 * keep (R/group, n) bytes, 0 = blocked (source padding), or NULL.
 * out (R, h*d_v) = the heads concatenated; weights (R,h,n) the softmax.
 * A fully blocked row gives zeros, never NaN. */
void attend_rows_forward_ref(float *out, float *weights, const float *q, const float *K, const float *V,
                             const uint8_t *keep, int R, int group, int h, int n, int stride, int d_k, int d_v);

/* For j < n, the width floats at dst + j*dst_pitch become those at
 * src + idx[j]*src_pitch (idx NULL: j). idx is host memory; dst and src
 * must not overlap. The cache's append (a strided copy), its reorder when
 * beams are pruned, and the split of the cross-attention K, V into heads.
 * A copy has no faster twin: the CPU backend runs this one. */
void gather_rows(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, const int *idx, int n,
                 size_t width);

#endif
