/* check_optim.c - the Section 5.3 learning-rate schedule and Adam (the
 * thread pool's own tests: check_parallel.c). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fast/parallel.h"
#include "fast/optim_fast.h"
#include "ref/optim.h"
#include "testutil.h"

/* ---- Core: the schedule at hand-computed steps ------------------------------
 * d_model = 512, warmup = 4000, factor 1 (the paper's base setting):
 *   peak (step 4000)  = 512^-0.5 * 4000^-0.5 = 1/sqrt(2048000) = 6.98771243e-4
 *   step 1            = 512^-0.5 * 1 * 4000^-1.5                = 1.74692811e-7
 *   step 2000 (warmup/2: half way up the linear ramp)          = 3.49385621e-4
 *   step 16000 (4 x warmup: 1/sqrt(4) of the peak)             = 3.49385621e-4
 *   step 100000       = 512^-0.5 * 100000^-0.5                 = 1.39754249e-4 */
START_TEST(test_schedule_values) {
    struct { int step; double want; } c[] = {
        {1, 1.746928107e-7}, {100, 1.746928107e-5}, {2000, 3.493856215e-4},
        {4000, 6.987712430e-4}, {16000, 3.493856215e-4}, {100000, 1.397542486e-4},
    };
    for (int i = 0; i < (int)(sizeof c / sizeof c[0]); i++) {
        double got = lr_schedule(c[i].step, 512, 4000, 1.0f);
        ck_assert_msg(fabs(got - c[i].want) <= 1e-6 * c[i].want,
                      "lr_schedule(%d, 512, 4000, 1) = %.9g, want %.9g", c[i].step, got, c[i].want);
    }
    /* factor scales linearly: 2 * 64^-0.5 * 200^-0.5 = 0.0176776695 */
    ck_assert_double_eq_tol(lr_schedule(200, 64, 200, 2.0f), 0.0176776695, 1e-8);
}
END_TEST

/* Loop over (d_model, warmup): the rate rises strictly to step == warmup and
 * falls strictly after it, and the peak is factor / sqrt(d_model * warmup). */
static const int sched_cases[][2] = {{512, 4000}, {512, 8000}, {256, 4000}, {64, 300}, {32, 1}};
START_TEST(test_schedule_peak_at_warmup) {
    int d_model = sched_cases[_i][0], warmup = sched_cases[_i][1];
    float peak = lr_schedule(warmup, d_model, warmup, 1.0f);
    ck_assert_double_eq_tol(peak, 1.0 / sqrt((double)d_model * warmup), 1e-6 * peak);
    if (warmup > 1) ck_assert(lr_schedule(warmup - 1, d_model, warmup, 1.0f) < peak);
    ck_assert(lr_schedule(warmup + 1, d_model, warmup, 1.0f) < peak);
    float prev = 0;
    for (int s = 1; s <= warmup; s += 1 + warmup / 97) {
        float lr = lr_schedule(s, d_model, warmup, 1.0f);
        ck_assert_msg(lr > prev, "not rising at step %d (warmup %d)", s, warmup);
        prev = lr;
    }
    prev = peak;
    for (int s = warmup + 1 + warmup / 10; s <= 20 * warmup; s += 1 + warmup / 7) {
        float lr = lr_schedule(s, d_model, warmup, 1.0f);
        ck_assert_msg(lr < prev, "not decaying at step %d (warmup %d)", s, warmup);
        prev = lr;
    }
}
END_TEST

/* ---- Core: Adam, two steps by hand --------------------------------------
 * lr 0.01, beta1 0.9, beta2 0.98, eps 1e-9 (Sec. 5.3).
 * Step 1, g = (0.1, -0.2, 0):
 *   m = 0.1 g = (0.01, -0.02, 0), v = 0.02 g^2 = (2e-4, 8e-4, 0)
 *   m_hat = m / (1 - 0.9) = g, v_hat = v / (1 - 0.98) = g^2
 *   so the first step is lr * g / |g| = lr * sign(g) (0 where g == 0):
 *   p = (1, -2, 0.5) - 0.01 (1, -1, 0) = (0.99, -1.99, 0.5)
 *   (without bias correction it would be lr * 0.01/sqrt(2e-4) = 0.00707.)
 * Step 2, g = (0.3, 0.1, 0):
 *   m_0 = 0.9 * 0.01 + 0.1 * 0.3 = 0.039, v_0 = 0.98 * 2e-4 + 0.02 * 0.09 = 0.001996
 *   m_hat = 0.039 / 0.19 = 0.2052632, v_hat = 0.001996 / 0.0396 = 0.0504040
 *   p_0 = 0.99 - 0.01 * 0.2052632 / 0.2245084 = 0.99 - 0.0091428 = 0.9808572
 *   m_1 = 0.9 * -0.02 + 0.1 * 0.1 = -0.008, v_1 = 0.98 * 8e-4 + 0.02 * 0.01 = 0.000984
 *   p_1 = -1.99 - 0.01 * (-0.008/0.19) / sqrt(0.000984/0.0396) = -1.9873289 */
START_TEST(test_adam_two_steps) {
    float p[3] = {1.0f, -2.0f, 0.5f}, m[3] = {0}, v[3] = {0};
    float g1[3] = {0.1f, -0.2f, 0.0f}, g2[3] = {0.3f, 0.1f, 0.0f};
    adam_update(p, g1, m, v, 3, 0.01f, 0.9f, 0.98f, 1e-9f, 1);
    float want_p1[3] = {0.99f, -1.99f, 0.5f}, want_m1[3] = {0.01f, -0.02f, 0}, want_v1[3] = {2e-4f, 8e-4f, 0};
    ck_assert_close_arrays(p, want_p1, 3, 1e-6);
    ck_assert_close_arrays(m, want_m1, 3, 1e-8);
    ck_assert_close_arrays(v, want_v1, 3, 1e-9);
    adam_update(p, g2, m, v, 3, 0.01f, 0.9f, 0.98f, 1e-9f, 2);
    float want_p2[3] = {0.9808572f, -1.9873289f, 0.5f};
    float want_m2[3] = {0.039f, -0.008f, 0}, want_v2[3] = {0.001996f, 0.000984f, 0};
    ck_assert_close_arrays(p, want_p2, 3, 1e-6);
    ck_assert_close_arrays(m, want_m2, 3, 1e-7);
    ck_assert_close_arrays(v, want_v2, 3, 1e-8);
}
END_TEST

/* ---- Limits -------------------------------------------------------------- */
START_TEST(test_adam_zero_grad_and_eps) {
    /* All-zero gradients from the start: m = v = 0 and 0 / (0 + eps) = 0,
     * so nothing moves and nothing is NaN (eps is what keeps it so). */
    float p[4] = {1, 2, 3, 4}, g[4] = {0}, m[4] = {0}, v[4] = {0};
    float want[4] = {1, 2, 3, 4};
    for (int s = 1; s <= 5; s++) adam_update(p, g, m, v, 4, 0.1f, 0.9f, 0.98f, 1e-9f, s);
    ck_assert_close_arrays(p, want, 4, 0.0);
    /* A huge gradient moves a parameter by about lr, no more: Adam's step is
     * scale-free (|m_hat / sqrt(v_hat)| <= 1 on the first step). Not 1e30:
     * its square overflows float32 to inf and the step would become 0. */
    float q[1] = {0}, big[1] = {1e15f}, m1[1] = {0}, v1[1] = {0};
    adam_update(q, big, m1, v1, 1, 0.5f, 0.9f, 0.98f, 1e-9f, 1);
    ck_assert(isfinite(q[0]));
    ck_assert_double_eq_tol(q[0], -0.5, 1e-6);
}
END_TEST

/* Many parameters (the parallel path) give the same result as one at a time. */
START_TEST(test_adam_large_matches_small) {
    enum { n = 100003 };
    static float p[n], g[n], m[n], v[n], p1[n], m1[n], v1[n];
    for (int i = 0; i < n; i++) {
        p[i] = p1[i] = sinf(0.1f * i);
        g[i] = cosf(0.37f * i);
        m[i] = v[i] = m1[i] = v1[i] = 0;
    }
    for (int s = 1; s <= 3; s++) {
        adam_update(p, g, m, v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, s);
        for (int i = 0; i < n; i++) adam_update(p1 + i, g + i, m1 + i, v1 + i, 1, 1e-3f, 0.9f, 0.98f, 1e-9f, s);
    }
    ck_assert_close_arrays(p, p1, n, 0.0);
}
END_TEST

/* ---- Fused: adam_step = finite check + norm + Adam in one op ---------------- */

/* n parameters with gradients of every size, the same start for two copies */
typedef struct {
    float *p, *g, *m, *v;
} AdamState;

static AdamState adam_state(size_t n) {
    AdamState a = {malloc(n * sizeof(float)), malloc(n * sizeof(float)), malloc(n * sizeof(float)),
                   malloc(n * sizeof(float))};
    ck_assert(a.p && a.g && a.m && a.v);
    for (size_t i = 0; i < n; i++) {
        a.p[i] = sinf(0.01f * i);
        a.g[i] = cosf(0.37f * i) * (i % 7 == 0 ? 1e3f : i % 5 == 0 ? 1e-4f : 1.0f);
        a.m[i] = 0.01f * sinf(0.3f * i);
        a.v[i] = 0.001f * (1.0f + cosf(0.2f * i));
    }
    return a;
}

static void adam_state_free(AdamState *a) {
    free(a->p);
    free(a->g);
    free(a->m);
    free(a->v);
}

/* The tuned step against the plain one at sizes around the chunk and the
 * vector width: the same parameters and moments to the bit (the update is
 * element-wise, the same operations in the same order), and the same sum
 * of squares to double rounding (chunk sums of 16 lanes vs one running sum). */
static const size_t fused_sizes[] = {1, 15, 17, 1000, ADAM_CHUNK - 1, ADAM_CHUNK + 3, 5 * ADAM_CHUNK + 77, 300001};

START_TEST(test_adam_step_matches_ref) {
    size_t n = fused_sizes[_i];
    AdamState a = adam_state(n), b = adam_state(n);
    for (int s = 1; s <= 3; s++) {
        double sa = adam_step(a.p, a.g, a.m, a.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, s);
        double sb = adam_step_ref(b.p, b.g, b.m, b.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, s);
        ck_assert_msg(fabs(sa - sb) <= 1e-12 * sb, "n=%zu: sum of squares %.17g vs ref %.17g", n, sa, sb);
        ck_assert_msg(!memcmp(a.p, b.p, n * sizeof(float)) && !memcmp(a.m, b.m, n * sizeof(float)) &&
                      !memcmp(a.v, b.v, n * sizeof(float)), "n=%zu step %d: weights differ from ref", n, s);
    }
    adam_state_free(&a);
    adam_state_free(&b);
}
END_TEST

/* One bad gradient anywhere (first, in the middle of a chunk, last; NaN,
 * +inf, -inf) and the step is refused: a non-finite sum comes back and not
 * one bit of the weights or moments changed (so training can stop with the
 * weights of the last good step). */
START_TEST(test_adam_step_refuses_nonfinite) {
    size_t n = 3 * ADAM_CHUNK + 5;
    size_t where[] = {0, ADAM_CHUNK + 7, n - 1};
    float bad[] = {NAN, INFINITY, -INFINITY};
    for (int w = 0; w < 3; w++)
        for (int k = 0; k < 3; k++) {
            AdamState a = adam_state(n), b = adam_state(n);
            a.g[where[w]] = bad[k];
            double sq = adam_step(a.p, a.g, a.m, a.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, 1);
            ck_assert_msg(!isfinite(sq), "bad gradient at %zu: sum %g should not be finite", where[w], sq);
            ck_assert(!isfinite(adam_step_ref(b.p, a.g, b.m, b.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, 1)));
            ck_assert_msg(!memcmp(a.p, b.p, n * sizeof(float)) && !memcmp(a.m, b.m, n * sizeof(float)) &&
                          !memcmp(a.v, b.v, n * sizeof(float)), "bad gradient at %zu changed the weights", where[w]);
            adam_state_free(&a);
            adam_state_free(&b);
        }
    /* the largest finite gradients are still finite: float max squared fits a double */
    float p = 0, g = 3.4e38f, m = 0, v = 0;
    ck_assert(isfinite(adam_step(&p, &g, &m, &v, 1, 1e-3f, 0.9f, 0.98f, 1e-9f, 1)));
}
END_TEST

/* Same bits on 1 thread and on all of them: the chunk sums are added in
 * chunk order whoever computed them. */
START_TEST(test_adam_step_thread_count) {
    size_t n = 40 * ADAM_CHUNK + 11;
    AdamState a = adam_state(n), b = adam_state(n);
#ifdef _OPENMP
    int threads = parallel_threads();
    parallel_set_threads(1);
#endif
    double s1 = adam_step(a.p, a.g, a.m, a.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, 1);
#ifdef _OPENMP
    parallel_set_threads(threads > 1 ? threads : 2);
#endif
    double s2 = adam_step(b.p, b.g, b.m, b.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, 1);
#ifdef _OPENMP
    parallel_set_threads(threads);
#endif
    ck_assert_msg(memcmp(&s1, &s2, sizeof s1) == 0, "sum of squares %.17g (1 thread) vs %.17g", s1, s2);
    ck_assert(!memcmp(a.p, b.p, n * sizeof(float)) && !memcmp(a.v, b.v, n * sizeof(float)));
    adam_state_free(&a);
    adam_state_free(&b);
}
END_TEST

Suite *optim_suite(void) {
    Suite *s = suite_create("optim");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_schedule_values);
    tcase_add_loop_test(core, test_schedule_peak_at_warmup, 0, (int)(sizeof sched_cases / sizeof sched_cases[0]));
    tcase_add_test(core, test_adam_two_steps);
    suite_add_tcase(s, core);
    TCase *lim = tcase_create("Limits");
    tcase_add_test(lim, test_adam_zero_grad_and_eps);
    tcase_add_test(lim, test_adam_large_matches_small);
    suite_add_tcase(s, lim);
    TCase *fused = tcase_create("Fused");
    tcase_add_loop_test(fused, test_adam_step_matches_ref, 0, (int)(sizeof fused_sizes / sizeof fused_sizes[0]));
    tcase_add_test(fused, test_adam_step_refuses_nonfinite);
    tcase_add_test(fused, test_adam_step_thread_count);
    suite_add_tcase(s, fused);
    return s;
}
