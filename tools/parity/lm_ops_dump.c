/* lm_ops_dump.c - the inputs, outputs and gradients of each 2026 operation
 * (ref/lm_ops.h, layers/lm_ffn.h) on random data, written as one safetensors
 * file for tools/parity/lm_ops.py to recompute in PyTorch (make parity-lm).
 *
 *   lm_ops_dump FILE.safetensors
 *
 * Every op runs forward, then backward from a random upstream gradient
 * "<op>.dy" (and, for the mixture, the weight of its balance loss). Names
 * are "<op>.<tensor>"; sizes that the Python side needs are in "<op>.sizes"
 * (int32). Exit status 0, or 1 with a message when the file cannot be written.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/fail.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "layers/lm_ffn.h"
#include "ref/attention.h"
#include "ref/lm_ops.h"

/* ---- the tensors to write, and the memory they own ------------------------- */

#define MAX_TENSORS 160
static SafeTensor tensors[MAX_TENSORS];
static char names[MAX_TENSORS][64];
static void *owned[MAX_TENSORS];
static int n_tensors;
static Rng rng;

/* adds data (owned from now on) under "op.what" with the given shape */
static void *put(const char *op, const char *what, SafeDtype dt, void *data, int ndim, ...) {
    if (n_tensors == MAX_TENSORS) {
        fprintf(stderr, "lm_ops_dump: more than %d tensors\n", MAX_TENSORS);
        exit(1);
    }
    SafeTensor *t = &tensors[n_tensors];
    snprintf(names[n_tensors], sizeof names[0], "%s.%s", op, what);
    t->name = names[n_tensors];
    t->dtype = dt;
    t->data = data;
    t->ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) t->shape[i] = va_arg(ap, int);
    va_end(ap);
    owned[n_tensors++] = data;
    return data;
}

static float *normal(size_t n, float std) {
    float *x = xmalloc(n * sizeof(float));
    rng_fill_normal(&rng, x, n, 0.0f, std);
    return x;
}
static float *zeros(size_t n) { return xcalloc(n ? n : 1, sizeof(float)); }
static int *ints(int n, const int *v) {
    int *x = xmalloc((size_t)n * sizeof(int));
    memcpy(x, v, (size_t)n * sizeof(int));
    return x;
}

/* ---- the ops ------------------------------------------------------------------ */

static void dump_rmsnorm(void) {
    enum { N = 5, C = 12 };
    const char *op = "rmsnorm";
    float *x = put(op, "x", SAFETENSORS_F32, normal(N * C, 2.0f), 2, N, C);
    float *g = put(op, "g", SAFETENSORS_F32, normal(C, 1.0f), 1, C);
    float *dy = put(op, "dy", SAFETENSORS_F32, normal(N * C, 1.0f), 2, N, C);
    float *y = put(op, "y", SAFETENSORS_F32, zeros(N * C), 2, N, C), *rstd = zeros(N);
    float *dx = put(op, "dx", SAFETENSORS_F32, zeros(N * C), 2, N, C);
    float *dg = put(op, "dg", SAFETENSORS_F32, zeros(C), 1, C);
    rmsnorm_forward_ref(y, rstd, x, g, N, C);
    rmsnorm_backward_ref(dx, dg, dy, x, rstd, g, N, C);
    free(rstd);
}

static void dump_rope(void) {
    enum { N = 6, H = 3, D = 8 };
    const char *op = "rope";
    int *pos = put(op, "pos", SAFETENSORS_I32, ints(N, (int[N]){0, 1, 2, 7, 100, 2047}), 1, N);
    float *x = put(op, "x", SAFETENSORS_F32, normal(N * H * D, 1.0f), 3, N, H, D);
    float *dy = put(op, "dy", SAFETENSORS_F32, normal(N * H * D, 1.0f), 3, N, H, D);
    float *y = put(op, "y", SAFETENSORS_F32, zeros(N * H * D), 3, N, H, D);
    float *dx = put(op, "dx", SAFETENSORS_F32, zeros(N * H * D), 3, N, H, D);
    rope_forward_ref(y, x, pos, N, H, D, ROPE_BASE);
    rope_backward_ref(dx, dy, pos, N, H, D, ROPE_BASE);
}

static void dump_swiglu(void) {
    enum { N = 5, D = 8, F = 12 };
    const char *op = "swiglu_ffn";
    float *x = put(op, "x", SAFETENSORS_F32, normal(N * D, 1.0f), 2, N, D);
    float *W1 = put(op, "W1", SAFETENSORS_F32, normal(D * F, 0.5f), 2, D, F);
    float *W3 = put(op, "W3", SAFETENSORS_F32, normal(D * F, 0.5f), 2, D, F);
    float *W2 = put(op, "W2", SAFETENSORS_F32, normal(F * D, 0.5f), 2, F, D);
    float *dy = put(op, "dy", SAFETENSORS_F32, normal(N * D, 1.0f), 2, N, D);
    float *y = put(op, "y", SAFETENSORS_F32, zeros(N * D), 2, N, D);
    float *dx = put(op, "dx", SAFETENSORS_F32, zeros(N * D), 2, N, D);
    float *dW1 = put(op, "dW1", SAFETENSORS_F32, zeros(D * F), 2, D, F);
    float *dW3 = put(op, "dW3", SAFETENSORS_F32, zeros(D * F), 2, D, F);
    float *dW2 = put(op, "dW2", SAFETENSORS_F32, zeros(F * D), 2, F, D);
    float *a = zeros(N * F), *b = zeros(N * F), *h = zeros(N * F), *scr = zeros(3 * N * F);
    swiglu_ffn_forward(y, a, b, h, x, W1, W3, W2, N, D, F);
    swiglu_ffn_backward(dx, dW1, dW3, dW2, scr, dy, a, b, h, x, W1, W3, W2, N, D, F);
    free(a); free(b); free(h); free(scr);
}

/* h = 6 query heads over kv_heads key/value heads, causal */
static void dump_gqa(int kv) {
    enum { B = 2, H = 6, T = 5, DK = 4, DV = 3 };
    char op[32];
    snprintf(op, sizeof op, "gqa_kv%d", kv);
    put(op, "sizes", SAFETENSORS_I32, ints(1, (int[1]){kv}), 1, 1);
    float *Q = put(op, "Q", SAFETENSORS_F32, normal(B * H * T * DK, 1.0f), 4, B, H, T, DK);
    float *K = put(op, "K", SAFETENSORS_F32, normal(B * kv * T * DK, 1.0f), 4, B, kv, T, DK);
    float *V = put(op, "V", SAFETENSORS_F32, normal(B * kv * T * DV, 1.0f), 4, B, kv, T, DV);
    float *dy = put(op, "dy", SAFETENSORS_F32, normal(B * H * T * DV, 1.0f), 4, B, H, T, DV);
    float *y = put(op, "y", SAFETENSORS_F32, zeros(B * H * T * DV), 4, B, H, T, DV);
    float *w = put(op, "weights", SAFETENSORS_F32, zeros(B * H * T * T), 4, B, H, T, T);
    float *dQ = put(op, "dQ", SAFETENSORS_F32, zeros(B * H * T * DK), 4, B, H, T, DK);
    float *dK = put(op, "dK", SAFETENSORS_F32, zeros(B * kv * T * DK), 4, B, kv, T, DK);
    float *dV = put(op, "dV", SAFETENSORS_F32, zeros(B * kv * T * DV), 4, B, kv, T, DV);
    uint8_t mask[B * T * T];
    float scr[T * T];
    lm_mask_causal(mask, B, T, T);
    gqa_forward_ref(y, w, Q, K, V, mask, B, H, kv, T, T, DK, DV);
    gqa_backward_ref(dQ, dK, dV, scr, dy, w, Q, K, V, B, H, kv, T, T, DK, DV);
}

static void dump_moe(const char *op, ExpertKind kind, int k, int renorm) {
    enum { N = 16, D = 8, F = 6, E = 4 };
    MoeConfig c = {D, F, E, k, kind, renorm};
    float d_aux = 0.1f;
    put(op, "sizes", SAFETENSORS_I32, ints(6, (int[6]){D, F, E, k, kind == EXPERT_SWIGLU, renorm}), 1, 6);
    float *da = put(op, "d_aux", SAFETENSORS_F32, zeros(1), 0);
    *da = d_aux;
    MoeParams p = {0}, g = {0};
    float *x = put(op, "x", SAFETENSORS_F32, normal(N * D, 1.0f), 2, N, D);
    p.w_r = put(op, "w_r", SAFETENSORS_F32, normal(D * E, 1.0f), 2, D, E);
    p.w1 = put(op, "w1", SAFETENSORS_F32, normal(E * D * F, 0.5f), 3, E, D, F);
    if (kind == EXPERT_SWIGLU) p.w3 = put(op, "w3", SAFETENSORS_F32, normal(E * D * F, 0.5f), 3, E, D, F);
    p.w2 = put(op, "w2", SAFETENSORS_F32, normal(E * F * D, 0.5f), 3, E, F, D);
    float *dy = put(op, "dy", SAFETENSORS_F32, normal(N * D, 1.0f), 2, N, D);
    float *y = put(op, "y", SAFETENSORS_F32, zeros(N * D), 2, N, D);
    float *aux = put(op, "aux", SAFETENSORS_F32, zeros(1), 0);
    float *dx = put(op, "dx", SAFETENSORS_F32, zeros(N * D), 2, N, D);
    g.w_r = put(op, "dw_r", SAFETENSORS_F32, zeros(D * E), 2, D, E);
    g.w1 = put(op, "dw1", SAFETENSORS_F32, zeros(E * D * F), 3, E, D, F);
    if (kind == EXPERT_SWIGLU) g.w3 = put(op, "dw3", SAFETENSORS_F32, zeros(E * D * F), 3, E, D, F);
    g.w2 = put(op, "dw2", SAFETENSORS_F32, zeros(E * F * D), 3, E, F, D);
    int *choice = put(op, "choice", SAFETENSORS_I32, xcalloc((size_t)N * k, sizeof(int)), 2, N, k);
    MoeActs a;
    float *fbuf = zeros(moe_acts_floats(&c, N)), *scr = zeros(moe_scratch_floats(&c, N));
    int *ibuf = xcalloc(moe_acts_ints(&c, N), sizeof(int));
    moe_acts_layout(&a, fbuf, ibuf, &c, N);
    *aux = moe_forward(y, &a, &p, x, &c, N);
    moe_backward(dx, &g, scr, dy, d_aux, &a, &p, x, &c, N);
    memcpy(choice, a.choice, (size_t)N * k * sizeof(int));
    free(fbuf); free(scr); free(ibuf);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: lm_ops_dump FILE.safetensors\n"
                        "  writes each 2026 op's inputs, outputs and gradients for tools/parity/lm_ops.py\n");
        return 1;
    }
    rng_seed(&rng, 2026);
    dump_rmsnorm();
    dump_rope();
    dump_swiglu();
    int kvs[3] = {6, 3, 1};                   /* multi-head, grouped, multi-query */
    for (int i = 0; i < 3; i++) dump_gqa(kvs[i]);
    dump_moe("moe_relu_top2", EXPERT_RELU, 2, 1);
    dump_moe("moe_swiglu_top2", EXPERT_SWIGLU, 2, 1);
    dump_moe("moe_relu_top1_switch", EXPERT_RELU, 1, 0);
    char err[256];
    const char *meta[] = {"rope_base", "10000", "rmsnorm_eps", "1e-5"};
    int rc = safetensors_write(argv[1], tensors, n_tensors, meta, 2, err, sizeof err);
    if (rc) fprintf(stderr, "lm_ops_dump: %s\n", err);
    else printf("lm_ops_dump: %d tensors in %s\n", n_tensors, argv[1]);
    for (int i = 0; i < n_tensors; i++) free(owned[i]);
    return rc ? 1 : 0;
}
