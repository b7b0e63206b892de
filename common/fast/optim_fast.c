/* optim_fast.c - adam_step and adamw_step, the tuned twins of adam_step_ref
 * and adamw_step_ref (ref/optim.c): the finite check, the gradient norm and
 * Adam (or AdamW) over all threads and vector lanes, each loop written once
 * over fast/simd.h's vector macros (AVX-512, AVX2; plain C on other CPUs).
 * See optim_fast.h for what it guarantees. */
#include "fast/optim_fast.h"
#include "ref/optim.h"
#include "fast/parallel.h"

#include <assert.h>
#include <math.h>
#include "fast/simd.h"

/* sum of x[i]^2 over one chunk as 16 running doubles (lane l takes every
 * 16th element from l), added up pairwise at the end: a fixed order */
static double chunk_sum_squares(const float *x, size_t n) {
    double acc[16] = {0};
    size_t i = 0;
#if VF_LANES
    vdouble a[16 / VD_LANES];
    for (int q = 0; q < 16 / VD_LANES; q++) a[q] = vd_zero();
    for (; i + 16 <= n; i += 16)
        for (int q = 0; q < 16 / VD_LANES; q++) {
            vdouble xq = vd_widen(x + i + VD_LANES * q);
            a[q] = vd_add(a[q], vd_mul(xq, xq));
        }
    for (int q = 0; q < 16 / VD_LANES; q++) vd_store(acc + VD_LANES * q, a[q]);
#else
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] += (double)x[i + l] * x[i + l];
#endif
    for (int l = 0; i < n; i++, l++) acc[l] += (double)x[i] * x[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

typedef struct {
    float *param, *m, *v;
    const float *grad;
    size_t n, chunk;
    double *partial;          /* (chunks) pass 1's sums */
    float lr, beta1, beta2, eps, a1, a2;
    const AdamwTensor *tensors; /* AdamW: the tensors end to end, each decayed or not */
    int ntensors;             /* (0: plain Adam, no decay anywhere)                   */
    float wd;                 /* AdamW's weight decay                                 */
} AdamJob;

static void pass1_chunks(void *ctx, long c0, long c1) {
    AdamJob *j = ctx;
    for (long c = c0; c < c1; c++) {
        size_t lo = (size_t)c * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
        j->partial[c] = chunk_sum_squares(j->grad + lo, hi - lo);
    }
}

/* adamw_update's loop body (ref/optim.c) on [lo, hi), VF_LANES at a time (16
 * with AVX-512, 8 with AVX2): the same multiplies and adds in the same order
 * (no FMA), correctly rounded sqrt and divide, so every lane gets
 * adamw_update's bits. keep = 1 - lr * wd; Adam's keep is 1, and p * 1 is
 * p, so adam_update's bits too. */
static void adam_range(const AdamJob *j, size_t lo, size_t hi, float keep) {
    float *restrict p = j->param, *restrict m = j->m, *restrict v = j->v;
    const float *restrict g = j->grad;
    const float b1 = j->beta1, b2 = j->beta2, c1 = 1.0f - j->beta1, c2 = 1.0f - j->beta2;
    size_t i = lo;
#if VF_LANES
    const vfloat vb1 = vf_set1(b1), vb2 = vf_set1(b2), vc1 = vf_set1(c1), vc2 = vf_set1(c2),
                 va1 = vf_set1(j->a1), va2 = vf_set1(j->a2), vlr = vf_set1(j->lr), veps = vf_set1(j->eps),
                 vkeep = vf_set1(keep);
    for (; i + VF_LANES <= hi; i += VF_LANES) {
        vfloat gi = vf_load(g + i);
        vfloat mi = vf_add(vf_mul(vb1, vf_load(m + i)), vf_mul(vc1, gi));
        vfloat vi = vf_add(vf_mul(vb2, vf_load(v + i)), vf_mul(vf_mul(vc2, gi), gi));
        vf_store(m + i, mi);
        vf_store(v + i, vi);
        vfloat m_hat = vf_mul(mi, va1), v_hat = vf_mul(vi, va2);
        vfloat upd = vf_div(vf_mul(vlr, m_hat), vf_add(vf_sqrt(v_hat), veps));
        vf_store(p + i, vf_sub(vf_mul(vf_load(p + i), vkeep), upd));
    }
#endif
    for (; i < hi; i++) {
        float gi = g[i];
        m[i] = b1 * m[i] + c1 * gi;
        v[i] = b2 * v[i] + c2 * gi * gi;
        float m_hat = m[i] * j->a1;
        float v_hat = v[i] * j->a2;
        float pi = p[i] * keep;
        p[i] = pi - j->lr * m_hat / (sqrtf(v_hat) + j->eps);
    }
}

static void pass2_chunks(void *ctx, long c0, long c1) {
    AdamJob *j = ctx;
    size_t lo = (size_t)c0 * j->chunk, hi = (size_t)c1 * j->chunk < j->n ? (size_t)c1 * j->chunk : j->n;
    if (j->ntensors == 0) {
        adam_range(j, lo, hi, 1.0f);
        return;
    }
    /* AdamW: the part of each tensor that falls in [lo, hi), with its factor */
    float decayed = (float)(1.0 - (double)j->lr * j->wd);
    size_t t0 = 0;
    for (int t = 0; t < j->ntensors && t0 < hi; t++) {
        size_t t1 = t0 + j->tensors[t].n;
        if (t1 > lo) adam_range(j, t0 > lo ? t0 : lo, t1 < hi ? t1 : hi, j->tensors[t].decay ? decayed : 1.0f);
        t0 = t1;
    }
}

/* chunk sums kept on the stack: at most this many chunks (larger arrays get
 * larger chunks; the chunk size depends on n only) */
#define ADAM_MAX_CHUNKS 4096

/* adam_step and adamw_step: the same two passes; tensors NULL with
 * ntensors 0 is Adam */
static double step_both(float *param, const float *grad, float *m, float *v, size_t n, const AdamwTensor *tensors,
                        int ntensors, float lr, float beta1, float beta2, float eps, float wd, int step) {
    assert(step >= 1);
    double partial[ADAM_MAX_CHUNKS];
    size_t chunk = ADAM_CHUNK;
    if (n > chunk * ADAM_MAX_CHUNKS) chunk = (n + ADAM_MAX_CHUNKS - 1) / ADAM_MAX_CHUNKS;
    chunk = (chunk + 15) / 16 * 16;               /* whole vectors */
    long chunks = (long)((n + chunk - 1) / chunk);
    double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    AdamJob j = {param, m, v, grad, n, chunk, partial, lr, beta1, beta2, eps,
                 (float)(1.0 / bc1), (float)(1.0 / bc2), tensors, ntensors, wd};
    /* pass 1: every gradient read once, a sum per chunk, chunks shared among
     * the threads (4 at a time: 256 KiB each) */
    parallel_run(chunks, 4, pass1_chunks, &j);
    double sq = 0;
    for (long c = 0; c < chunks; c++) sq += partial[c];
    if (!isfinite(sq)) return sq;                 /* refuse the step: nothing changes */
    /* pass 2: Adam, chunk by chunk (same cut, so same work per claim) */
    parallel_run(chunks, 4, pass2_chunks, &j);
    return sq;
}

double adam_step(float *param, const float *grad, float *m, float *v, size_t n,
                 float lr, float beta1, float beta2, float eps, int step) {
    return step_both(param, grad, m, v, n, NULL, 0, lr, beta1, beta2, eps, 0.0f, step);
}

double adamw_step(float *param, const float *grad, float *m, float *v, size_t n, const AdamwTensor *tensors,
                  int ntensors, float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
    AdamwTensor all = {n, 1};
    if (!tensors) tensors = &all, ntensors = 1;
    size_t total = 0;
    for (int t = 0; t < ntensors; t++) total += tensors[t].n;
    assert(total == n && "adamw_step: the tensors' sizes must add up to n");
    (void)total;
    return step_both(param, grad, m, v, n, tensors, ntensors, lr, beta1, beta2, eps, weight_decay, step);
}
