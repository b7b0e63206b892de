/* table1.h - the four layer types of Table 1 ("Why Self-Attention", Sec. 4),
 * small and plain, with what the table says about each of them measured:
 *
 *   layer type              complexity/layer   sequential ops   max path length
 *   self-attention          O(n^2 d)           O(1)             O(1)
 *   recurrent               O(n d^2)           O(n)             O(n)
 *   convolutional           O(k n d^2)         O(1)             O(log_k n) dilated, O(n/k) contiguous
 *   restricted self-attn    O(r n d)           O(1)             O(n/r)
 *
 * n is the sequence length, d the representation width (d_model), k the
 * kernel size, r the neighbourhood of restricted self-attention.
 *
 * Every layer maps x (n, d) to out (n, d), forward only, and adds the
 * floating-point operations it performs to a Flops counter as it runs: each
 * library call it makes (a gemm, one head's attention over a window, a bias
 * add, a tanh) adds what that call computes, for the sizes it was actually
 * called with (the edge rows a convolution skips, the shorter windows at the
 * ends of the sequence, the n steps of the recurrence). Tests hold the totals
 * against closed forms.
 *
 * Counting convention: a multiply-add is 2 FLOPs (gemm of (M,K)x(K,N) is
 * 2MKN); an add, multiply, compare, exp or tanh is 1. One query row of
 * attention over Tk keys is Tk (2 d_k + 6 + 2 d_v) + 1: the dot products,
 * then per score scale, max-compare, subtract, exp, sum and normalise, the
 * weighted sum of the values, and one 1/sum per row.
 *
 * Ownership: t1_layer_build allocates the layer's parameters and its work
 * space (for up to n_max positions), t1_layer_free frees them; t1_forward
 * never allocates. t1_path_length allocates its own bit sets and frees them.
 */
#ifndef TABLE1_H
#define TABLE1_H

#include <stddef.h>
#include <stdint.h>
#include "layers/multihead.h"
#include "core/rng.h"

typedef enum {
    T1_SELF_ATTENTION,   /* the library's multi-head attention, d_model -> d_model  */
    T1_RECURRENT,        /* h_t = tanh(W x_t + U h_{t-1} + b)                       */
    T1_CONVOLUTION,      /* 1-D convolution, kernel k, "same" zero padding          */
    T1_SEPARABLE,        /* depthwise conv (kernel k per channel), then pointwise d x d */
    T1_RESTRICTED,       /* self-attention over the keys within r/2 of the query    */
    T1_KINDS
} T1Kind;

/* "self-attention", "recurrent", ... */
const char *t1_kind_name(T1Kind kind);

/* FLOPs, split into Table 1's term and the rest: the paper's column keeps
 * only the leading term of each layer (for self-attention n^2 d: scores,
 * softmax, weighted sum; its O(n d^2) projections are not in the table). */
typedef struct {
    uint64_t table;   /* the operations Table 1's complexity counts              */
    uint64_t other;   /* projections (the attention layers), biases, tanh        */
} Flops;

typedef struct {
    T1Kind kind;
    int n_max, d, h, k, r, dil;  /* dil: dilation of the convolutions (1 = contiguous) */
    MhaParams mha;       /* attention layers: W_Q, W_K, W_V, W_O, each (d, d)        */
    float *w;            /* recurrent W (d,d); conv taps (k,d,d); separable depthwise (k,d) */
    float *u;            /* recurrent U (d,d); separable pointwise (d,d)             */
    float *b;            /* bias (d): recurrent, convolutions                        */
    float *params;       /* the one allocation every weight points into              */
    float *work;         /* the one allocation of activations for n_max positions    */
    size_t n_params, n_work;   /* floats in each                                      */
    MhaActs acts;        /* attention layers: views into work                        */
    float *qh, *kh, *vh, *oh;  /* attention layers: heads split into (h, n, d_k), in work */
    float *tmp;          /* recurrent: x W (n_max, d); separable: the depthwise output */
    float *zeros;        /* recurrent: h_{-1} = 0 (d), in work                       */
} T1Layer;

/* Builds a layer of this kind for sequences of up to n_max positions, weights
 * drawn N(0, 1/d) from rng (biases 0.1). h heads (attention layers: d % h == 0),
 * kernel k (odd, convolutions), window r (restricted), dilation dil >= 1.
 * Returns 0, or -1 when out of memory (nothing is left allocated). */
int t1_layer_build(T1Layer *L, T1Kind kind, int n_max, int d, int h, int k, int r, int dil, Rng *rng);
void t1_layer_free(T1Layer *L);   /* NULL or an unbuilt (zeroed) layer: no-op */

/* out (n, d) = layer(x (n, d)), n <= n_max; adds the FLOPs it performs to *f
 * (f may be NULL). For the attention layers the scores it wrote are left in
 * L->acts.weights (self-attention: (h, n, n); restricted: the last window). */
void t1_forward(T1Layer *L, float *out, const float *x, int n, Flops *f);

/* Offset of tap m (0..k-1) of a kernel-k convolution with dilation dil:
 * (m - (k-1)/2) * dil, so the kernel is centred on the output position. The
 * forward pass and t1_taps both use it. */
int t1_conv_offset(int m, int k, int dil);

/* Which input positions output position i (of n) of one layer reads, written
 * into taps (room for n); returns how many. The recurrent layer's output t
 * reads x_t and its own previous output h_{t-1}: taps gets {t}, and
 * *reads_prev (may be NULL) is set to 1 when t > 0. */
int t1_taps(T1Kind kind, int i, int n, int k, int r, int dil, int *taps, int *reads_prev);

/* Runs the layer once on x and once per input position s with x[s, :]
 * perturbed, and records which outputs changed: dep (n, n), dep[i*n + s] = 1
 * when output i moved when input s did. Work space: xp, y0, y1 (n*d each).
 * This is the connectivity the BFS below assumes, observed on the running code. */
void t1_probe(T1Layer *L, uint8_t *dep, const float *x, float *xp, float *y0, float *y1, int n);

/* Dilation of layer l (0, 1, ...) in a stack of dilated convolutions over n
 * positions: the powers of k below n, repeated: 1, k, k^2, ..., 1, k, ... */
int t1_dilation(int l, int n, int k);

/* Maximum path length between any input position and any output position
 * in a stack of layers of this kind (dilated: convolutions with
 * t1_dilation's schedule), measured breadth-first on the taps:
 * attention and convolution layers: the number of layers after which every
 * output position is reached from every input position (every path through
 * a stack of L layers is L edges long); recurrent: one layer already
 * connects x_s to every h_t with t >= s, over t - s + 1 edges (x_s -> h_s ->
 * ... -> h_t); the longest of these shortest paths. *unreachable (may be
 * NULL) gets the number of (input, output) pairs never connected (the
 * recurrent layer reads left to right: h_t never sees x_s for s > t).
 * Returns -1 when out of memory or when max_layers layers do not connect. */
int t1_path_length(T1Kind kind, int n, int k, int r, int dilated, int max_layers, long *unreachable);

/* The longest chain of operations that must run one after another in one
 * layer over n positions: every output position is one operation, ready one
 * step after the latest of its taps (inputs are ready at step 0). Recurrent:
 * n; the others: 1. */
int t1_sequential_ops(T1Kind kind, int n, int k, int r);

/* Where to fit an exponent: the longest run of points at the end of a sweep
 * (m points, sizes ascending) where Table 1's term is at least `share` of the
 * counted FLOPs (share[i] = table / (table + other)), and within the upper
 * half of the sweep (the asymptotic regime: at small sizes time goes to call
 * overhead, not to the FLOPs). Returns the first index of that run; m minus
 * it is its length (0 when the last point fails). */
int t1_fit_from(const double *table_share, int m, double share);

/* Where cost a (m points over sizes x, ascending) overtakes cost b for good:
 * the last upward crossing of a/b through 1, between points p-1 and p,
 * interpolated on log-log axes. Returns that size; 0 with *always = 1 when
 * a > b at every point; -1 when a <= b at the last point. */
double t1_crossover(const double *x, const double *a, const double *b, int m, int *always);

/* Least-squares slope of log(y) against log(x) over points lo..hi-1: the
 * exponent p in y ~ x^p. */
double t1_loglog_slope(const double *x, const double *y, int lo, int hi);

#endif
