/* optim.c - Adam and the warmup-then-decay learning rate of Section 5.3.
 *
 *   lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
 *
 * The two terms of the min cross at step == warmup: before it the rate grows
 * linearly (step * warmup^-1.5), after it it decays as 1/sqrt(step). So the
 * peak is factor * (d_model * warmup)^-0.5, reached exactly at step == warmup.
 */
#include "ref/optim.h"
#include "fast/parallel.h"

#include <assert.h>
#include <math.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

float lr_schedule(int step, int d_model, int warmup, float factor) {
    assert(step >= 1 && "lr_schedule: steps count from 1 (step 0 would divide by zero)");
    assert(d_model >= 1 && warmup >= 1);
    /* In double: step^-0.5 and warmup^-1.5 are tiny and we want the exact
     * crossing at step == warmup, where both terms equal warmup^-0.5. */
    double s = step, w = warmup;
    double decay = 1.0 / sqrt(s);
    double rise = s / (w * sqrt(w));
    return (float)(factor / sqrt((double)d_model) * (rise < decay ? rise : decay));
}

void adam_update(float *param, const float *grad, float *m, float *v, size_t n,
                 float lr, float beta1, float beta2, float eps, int step) {
    assert(step >= 1);
    /* m and v start at 0, so early on they are biased toward 0 by the
     * factors (1 - beta^t); dividing by them undoes that (Kingma & Ba 2015,
     * Sec. 2). With beta2 = 0.98 (the paper's choice, Sec. 5.3, instead of
     * Adam's usual 0.999) v forgets old gradients after ~50 steps. */
    double bc1 = 1.0 - pow(beta1, step);
    double bc2 = 1.0 - pow(beta2, step);
    /* m_hat = m / bc1, v_hat = v / bc2, step = lr * m_hat / (sqrt(v_hat) + eps),
     * written out literally so it reads like Algorithm 1 of Kingma & Ba.
     * Each element is independent: adam_step below shares them among the
     * threads and vector lanes. */
    float a1 = (float)(1.0 / bc1), a2 = (float)(1.0 / bc2);
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float m_hat = m[i] * a1;
        float v_hat = v[i] * a2;
        param[i] -= lr * m_hat / (sqrtf(v_hat) + eps);
    }
}

/* ---- the fused step: finite check + norm + Adam ------------------------------ */

double adam_step_ref(float *param, const float *grad, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, int step) {
    double sq = 0;
    for (size_t i = 0; i < n; i++) sq += (double)grad[i] * grad[i];
    if (!isfinite(sq)) return sq;                 /* refuse the step: nothing changes */
    adam_update(param, grad, m, v, n, lr, beta1, beta2, eps, step);
    return sq;
}

/* sum of x[i]^2 over one chunk as 16 running doubles (lane l takes every
 * 16th element from l), added up pairwise at the end: a fixed order */
static double chunk_sum_squares(const float *x, size_t n) {
    double acc[16] = {0};
    size_t i = 0;
#if defined(__AVX512F__)
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (; i + 16 <= n; i += 16) {
        __m512d lo = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
        __m512d hi = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8));
        a0 = _mm512_add_pd(a0, _mm512_mul_pd(lo, lo));
        a1 = _mm512_add_pd(a1, _mm512_mul_pd(hi, hi));
    }
    _mm512_storeu_pd(acc, a0);
    _mm512_storeu_pd(acc + 8, a1);
#elif defined(__AVX2__)
    __m256d a[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    for (; i + 16 <= n; i += 16)
        for (int q = 0; q < 4; q++) {
            __m256d xq = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * q));
            a[q] = _mm256_add_pd(a[q], _mm256_mul_pd(xq, xq));
        }
    for (int q = 0; q < 4; q++) _mm256_storeu_pd(acc + 4 * q, a[q]);
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
} AdamJob;

static void pass1_chunks(void *ctx, long c0, long c1) {
    AdamJob *j = ctx;
    for (long c = c0; c < c1; c++) {
        size_t lo = (size_t)c * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
        j->partial[c] = chunk_sum_squares(j->grad + lo, hi - lo);
    }
}

/* adam_update's loop body on [lo, hi), 16 (AVX2: 8) lanes at a time: the same
 * multiplies and adds in the same order (no FMA), correctly rounded sqrt
 * and divide, so every lane gets adam_update's bits */
static void adam_range(const AdamJob *j, size_t lo, size_t hi) {
    float *restrict p = j->param, *restrict m = j->m, *restrict v = j->v;
    const float *restrict g = j->grad;
    const float b1 = j->beta1, b2 = j->beta2, c1 = 1.0f - j->beta1, c2 = 1.0f - j->beta2;
    size_t i = lo;
#if defined(__AVX512F__)
    const __m512 vb1 = _mm512_set1_ps(b1), vb2 = _mm512_set1_ps(b2), vc1 = _mm512_set1_ps(c1),
                 vc2 = _mm512_set1_ps(c2), va1 = _mm512_set1_ps(j->a1), va2 = _mm512_set1_ps(j->a2),
                 vlr = _mm512_set1_ps(j->lr), veps = _mm512_set1_ps(j->eps);
    for (; i + 16 <= hi; i += 16) {
        __m512 gi = _mm512_loadu_ps(g + i);
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(vb1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(vc1, gi));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(vb2, _mm512_loadu_ps(v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(vc2, gi), gi));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        __m512 m_hat = _mm512_mul_ps(mi, va1), v_hat = _mm512_mul_ps(vi, va2);
        __m512 upd = _mm512_div_ps(_mm512_mul_ps(vlr, m_hat), _mm512_add_ps(_mm512_sqrt_ps(v_hat), veps));
        _mm512_storeu_ps(p + i, _mm512_sub_ps(_mm512_loadu_ps(p + i), upd));
    }
#elif defined(__AVX2__)
    const __m256 vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2), vc1 = _mm256_set1_ps(c1),
                 vc2 = _mm256_set1_ps(c2), va1 = _mm256_set1_ps(j->a1), va2 = _mm256_set1_ps(j->a2),
                 vlr = _mm256_set1_ps(j->lr), veps = _mm256_set1_ps(j->eps);
    for (; i + 8 <= hi; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i);
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(vc1, gi));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)),
                                  _mm256_mul_ps(_mm256_mul_ps(vc2, gi), gi));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 m_hat = _mm256_mul_ps(mi, va1), v_hat = _mm256_mul_ps(vi, va2);
        __m256 upd = _mm256_div_ps(_mm256_mul_ps(vlr, m_hat), _mm256_add_ps(_mm256_sqrt_ps(v_hat), veps));
        _mm256_storeu_ps(p + i, _mm256_sub_ps(_mm256_loadu_ps(p + i), upd));
    }
#endif
    for (; i < hi; i++) {
        float gi = g[i];
        m[i] = b1 * m[i] + c1 * gi;
        v[i] = b2 * v[i] + c2 * gi * gi;
        float m_hat = m[i] * j->a1;
        float v_hat = v[i] * j->a2;
        p[i] -= j->lr * m_hat / (sqrtf(v_hat) + j->eps);
    }
}

static void pass2_chunks(void *ctx, long c0, long c1) {
    AdamJob *j = ctx;
    size_t lo = (size_t)c0 * j->chunk, hi = (size_t)c1 * j->chunk < j->n ? (size_t)c1 * j->chunk : j->n;
    adam_range(j, lo, hi);
}

/* chunk sums kept on the stack: at most this many chunks (larger arrays get
 * larger chunks; the chunk size depends on n only) */
#define ADAM_MAX_CHUNKS 4096

double adam_step(float *param, const float *grad, float *m, float *v, size_t n,
                 float lr, float beta1, float beta2, float eps, int step) {
    assert(step >= 1);
    double partial[ADAM_MAX_CHUNKS];
    size_t chunk = ADAM_CHUNK;
    if (n > chunk * ADAM_MAX_CHUNKS) chunk = (n + ADAM_MAX_CHUNKS - 1) / ADAM_MAX_CHUNKS;
    chunk = (chunk + 15) / 16 * 16;               /* whole vectors */
    long chunks = (long)((n + chunk - 1) / chunk);
    double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    AdamJob j = {param, m, v, grad, n, chunk, partial, lr, beta1, beta2, eps,
                 (float)(1.0 / bc1), (float)(1.0 / bc2)};
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
