/* check_optim.c - the Section 5.3 learning-rate schedule and Adam, the
 * warmup-and-cosine schedule and AdamW (the thread pool's own tests:
 * check_parallel.c). */
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

/* ---- AdamW and the cosine schedule ------------------------------------------ */

/* nanoGPT's recipe: warmup 100, max_steps 2000, lr_max 1e-3, lr_min 1e-4.
 *   step 1       1e-3 * 1/100                                  = 1e-5
 *   step 50      half way up the ramp                          = 5e-4
 *   step 100     the peak                                      = 1e-3
 *   step 575     a quarter into the decay: 1e-4 + 9e-4 (1 + cos(pi/4)) / 2
 *                = 1e-4 + 9e-4 * 0.85355339                    = 8.68198052e-4
 *   step 1050    the midpoint: cos(pi/2) = 0, (1e-3 + 1e-4) / 2 = 5.5e-4
 *   step 2000    the end                                       = 1e-4
 *   step 2500    constant after the end                        = 1e-4 */
START_TEST(test_cosine_values) {
    struct { int step; double want; } c[] = {
        {1, 1e-5}, {50, 5e-4}, {100, 1e-3}, {575, 8.68198052e-4}, {1050, 5.5e-4}, {2000, 1e-4}, {2500, 1e-4},
    };
    for (int i = 0; i < (int)(sizeof c / sizeof c[0]); i++) {
        double got = lr_warmup_cosine(c[i].step, 100, 2000, 1e-3f, 1e-4f);
        ck_assert_msg(fabs(got - c[i].want) <= 1e-6 * c[i].want, "lr_warmup_cosine(%d, 100, 2000, 1e-3, 1e-4) = %.9g, want %.9g",
                      c[i].step, got, c[i].want);
    }
    /* the ends are the very floats given */
    ck_assert(lr_warmup_cosine(100, 100, 2000, 1e-3f, 1e-4f) == 1e-3f);
    ck_assert(lr_warmup_cosine(2000, 100, 2000, 1e-3f, 1e-4f) == 1e-4f);
    /* warmup 0: the decay starts at the peak; lr_min 0: cosine to zero */
    ck_assert_double_eq_tol(lr_warmup_cosine(1, 0, 4, 2.0f, 0.0f), 2.0 * (1 + cos(M_PI / 4)) / 2, 1e-6);
    ck_assert_double_eq_tol(lr_warmup_cosine(2, 0, 4, 2.0f, 0.0f), 1.0, 1e-6);
    ck_assert(lr_warmup_cosine(4, 0, 4, 2.0f, 0.0f) == 0.0f);
}
END_TEST

/* Loop over (warmup, max_steps): strictly up to the peak, never up after it
 * (a step of a long decay may change the rate by less than a float's last
 * bit), lr_min from max_steps on, the midpoint (max + min) / 2. */
static const int cos_cases[][2] = {{100, 2000}, {1, 10}, {0, 7}, {400, 401}, {10, 11000}};
START_TEST(test_cosine_shape) {
    int warmup = cos_cases[_i][0], max_steps = cos_cases[_i][1];
    const float hi = 3e-3f, lo = 2e-4f;
    float prev = warmup ? 0 : hi;
    for (int s = 1; s <= max_steps + 10; s++) {
        float lr = lr_warmup_cosine(s, warmup, max_steps, hi, lo);
        if (s <= warmup) ck_assert_msg(lr > prev, "not rising at step %d (warmup %d)", s, warmup);
        else if (s <= max_steps) ck_assert_msg(lr <= prev, "rising at step %d in the decay", s);
        else ck_assert_msg(lr == lo, "step %d after the end: %g, not lr_min", s, lr);
        ck_assert(lr <= hi && lr > 0);
        prev = lr;
    }
    if ((max_steps - warmup) % 2 == 0)
        ck_assert_double_eq_tol(lr_warmup_cosine(warmup + (max_steps - warmup) / 2, warmup, max_steps, hi, lo),
                                (hi + lo) / 2.0, 1e-6 * hi);
}
END_TEST

/* weight_decay 0 is Adam, bit for bit: the plain update, the fused plain
 * step (with a mask that decays everything) and the tuned one, over a few
 * steps of a state with moments already in it. */
START_TEST(test_adamw_wd0_is_adam) {
    size_t n = 2 * ADAM_CHUNK + 37;
    AdamwTensor parts[] = {{5, 1}, {ADAM_CHUNK, 0}, {ADAM_CHUNK + 30, 1}, {2, 0}};
    AdamState a = adam_state(n), b = adam_state(n), c = adam_state(n), d = adam_state(n);
    for (int s = 1; s <= 3; s++) {
        float lr = lr_warmup_cosine(s, 2, 5, 1e-3f, 1e-4f);
        adam_update(a.p, a.g, a.m, a.v, n, lr, 0.9f, 0.99f, 1e-8f, s);
        adamw_update(b.p, b.g, b.m, b.v, n, lr, 0.9f, 0.99f, 1e-8f, 0.0f, s);
        double sc = adamw_step_ref(c.p, c.g, c.m, c.v, n, parts, 4, lr, 0.9f, 0.99f, 1e-8f, 0.0f, s);
        double sd = adamw_step(d.p, d.g, d.m, d.v, n, NULL, 0, lr, 0.9f, 0.99f, 1e-8f, 0.0f, s);
        ck_assert(isfinite(sc) && isfinite(sd));
        const AdamState *other[] = {&b, &c, &d};
        for (int k = 0; k < 3; k++)
            ck_assert_msg(!memcmp(a.p, other[k]->p, n * sizeof(float)) && !memcmp(a.m, other[k]->m, n * sizeof(float)) &&
                          !memcmp(a.v, other[k]->v, n * sizeof(float)),
                          "step %d: AdamW with weight decay 0 (%s) differs from Adam", s,
                          k == 0 ? "adamw_update" : k == 1 ? "adamw_step_ref" : "adamw_step");
    }
    /* and adam_step, which shares adamw_step's loop, is still adam_update */
    AdamState e = adam_state(n), f = adam_state(n);
    adam_step(e.p, e.g, e.m, e.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, 1);
    adam_update(f.p, f.g, f.m, f.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, 1);
    ck_assert(!memcmp(e.p, f.p, n * sizeof(float)));
    AdamState *all[] = {&a, &b, &c, &d, &e, &f};
    for (int k = 0; k < 6; k++) adam_state_free(all[k]);
}
END_TEST

/* One AdamW step by hand: lr 0.01, wd 0.1, beta1 0.9, beta2 0.99, eps 1e-8.
 * p = (1, -2, 0.5), g = (0.1, -0.2, 0).
 *   the decay: keep = 1 - 0.01 * 0.1 = 0.999, p -> (0.999, -1.998, 0.4995)
 *   Adam's first step: m_hat = g, v_hat = g^2, so lr * g / (|g| + 1e-8):
 *   0.01 * 0.1 / 0.10000001 = 0.0099999990 and 0.01 (0 where g = 0)
 *   p = (0.999 - 0.0099999990, -1.998 + 0.0099999995, 0.4995)
 *     = (0.989000001, -1.9880000005, 0.4995)
 * The third parameter, with no gradient, still shrinks by lr * wd * p =
 * 0.0005. Had the decay been added to the gradient instead (L2: g + wd p
 * = 0.05), Adam would have divided it by its own size and moved the
 * parameter a whole lr = 0.01, to 0.49: what decoupling avoids.
 * With the third parameter in an exempt tensor it stays at 0.5. */
START_TEST(test_adamw_one_step) {
    float p[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.1f, -0.2f, 0.0f}, m[3] = {0}, v[3] = {0};
    adamw_update(p, g, m, v, 3, 0.01f, 0.9f, 0.99f, 1e-8f, 0.1f, 1);
    float want[3] = {0.989000001f, -1.9880000005f, 0.4995f};
    ck_assert_close_arrays(p, want, 3, 1e-6);
    float want_m[3] = {0.01f, -0.02f, 0}, want_v[3] = {1e-4f, 4e-4f, 0};
    ck_assert_close_arrays(m, want_m, 3, 1e-8);
    ck_assert_close_arrays(v, want_v, 3, 1e-9);
    /* the same step through the fused ops, the third parameter exempt */
    AdamwTensor parts[] = {{2, 1}, {1, 0}};
    float want_x[3] = {0.989000001f, -1.9880000005f, 0.5f};
    for (int fast = 0; fast < 2; fast++) {
        float q[3] = {1.0f, -2.0f, 0.5f}, mq[3] = {0}, vq[3] = {0};
        double sq = (fast ? adamw_step : adamw_step_ref)(q, g, mq, vq, 3, parts, 2, 0.01f, 0.9f, 0.99f, 1e-8f, 0.1f, 1);
        ck_assert_double_eq_tol(sq, 0.05, 1e-8);      /* 0.1^2 + 0.2^2 */
        ck_assert_close_arrays(q, want_x, 3, 1e-6);
        ck_assert(q[2] == 0.5f);
    }
}
END_TEST

/* The mask: a decayed tensor gets adamw_update's bits, an exempt one
 * adam_update's, whichever chunk they fall in. */
START_TEST(test_adamw_mask) {
    size_t n = 3 * ADAM_CHUNK + 100;
    AdamwTensor parts[] = {{ADAM_CHUNK - 3, 0}, {7, 1}, {ADAM_CHUNK, 0}, {ADAM_CHUNK + 96, 1}};
    for (int fast = 0; fast < 2; fast++) {
        AdamState a = adam_state(n), b = adam_state(n);
        (fast ? adamw_step : adamw_step_ref)(a.p, a.g, a.m, a.v, n, parts, 4, 1e-2f, 0.9f, 0.99f, 1e-8f, 0.5f, 1);
        size_t at = 0;
        for (int t = 0; t < 4; t++) {
            if (parts[t].decay)
                adamw_update(b.p + at, b.g + at, b.m + at, b.v + at, parts[t].n, 1e-2f, 0.9f, 0.99f, 1e-8f, 0.5f, 1);
            else
                adam_update(b.p + at, b.g + at, b.m + at, b.v + at, parts[t].n, 1e-2f, 0.9f, 0.99f, 1e-8f, 1);
            at += parts[t].n;
        }
        ck_assert_msg(!memcmp(a.p, b.p, n * sizeof(float)), "%s: the mask was not followed",
                      fast ? "adamw_step" : "adamw_step_ref");
        /* and the decay did something: the decayed tensors differ from Adam's */
        AdamState c = adam_state(n);
        adam_update(c.p, c.g, c.m, c.v, n, 1e-2f, 0.9f, 0.99f, 1e-8f, 1);
        for (size_t i = ADAM_CHUNK - 3; i < ADAM_CHUNK + 4; i++) ck_assert(a.p[i] != c.p[i]);
        ck_assert(!memcmp(a.p, c.p, (ADAM_CHUNK - 3) * sizeof(float)));
        adam_state_free(&a);
        adam_state_free(&b);
        adam_state_free(&c);
    }
}
END_TEST

/* The tuned AdamW against the plain one, tensors cut across the chunks and
 * the vector width: weights and moments to the bit, the sum of squares to
 * double rounding. */
START_TEST(test_adamw_step_matches_ref) {
    size_t n = fused_sizes[_i];
    /* tensors of 1, 13, 100, 1000, ... floats in turn, decayed every other one */
    AdamwTensor parts[64];
    int k = 0;
    static const size_t lens[] = {1, 13, 100, 1000, ADAM_CHUNK + 1, 5};
    for (size_t at = 0; at < n; k++) {
        size_t len = lens[k % 6] < n - at ? lens[k % 6] : n - at;
        if (k == 63) len = n - at;
        parts[k] = (AdamwTensor){len, k % 2};
        at += len;
    }
    AdamState a = adam_state(n), b = adam_state(n);
    for (int s = 1; s <= 3; s++) {
        double sa = adamw_step(a.p, a.g, a.m, a.v, n, parts, k, 1e-3f, 0.9f, 0.99f, 1e-8f, 0.1f, s);
        double sb = adamw_step_ref(b.p, b.g, b.m, b.v, n, parts, k, 1e-3f, 0.9f, 0.99f, 1e-8f, 0.1f, s);
        ck_assert_msg(fabs(sa - sb) <= 1e-12 * sb, "n=%zu: sum of squares %.17g vs ref %.17g", n, sa, sb);
        ck_assert_msg(!memcmp(a.p, b.p, n * sizeof(float)) && !memcmp(a.m, b.m, n * sizeof(float)) &&
                      !memcmp(a.v, b.v, n * sizeof(float)), "n=%zu step %d: AdamW weights differ from ref", n, s);
    }
    adam_state_free(&a);
    adam_state_free(&b);
}
END_TEST

/* A non-finite gradient anywhere and AdamW refuses the step: not even the
 * decay, which needs no gradient, touches a weight. */
START_TEST(test_adamw_refuses_nonfinite) {
    size_t n = 3 * ADAM_CHUNK + 5;
    size_t where[] = {0, ADAM_CHUNK + 7, n - 1};
    float bad[] = {NAN, INFINITY, -INFINITY};
    AdamwTensor parts[] = {{ADAM_CHUNK, 1}, {ADAM_CHUNK, 0}, {ADAM_CHUNK + 5, 1}};
    for (int fast = 0; fast < 2; fast++)
        for (int w = 0; w < 3; w++)
            for (int k = 0; k < 3; k++) {
                AdamState a = adam_state(n), b = adam_state(n);
                a.g[where[w]] = bad[k];
                double sq = (fast ? adamw_step : adamw_step_ref)(a.p, a.g, a.m, a.v, n, parts, 3, 1e-3f, 0.9f, 0.99f,
                                                                 1e-8f, 0.1f, 1);
                ck_assert_msg(!isfinite(sq), "bad gradient at %zu: sum %g should not be finite", where[w], sq);
                ck_assert_msg(!memcmp(a.p, b.p, n * sizeof(float)) && !memcmp(a.m, b.m, n * sizeof(float)) &&
                              !memcmp(a.v, b.v, n * sizeof(float)), "%s: bad gradient at %zu changed the weights",
                              fast ? "adamw_step" : "adamw_step_ref", where[w]);
                adam_state_free(&a);
                adam_state_free(&b);
            }
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
    TCase *w = tcase_create("AdamW");
    tcase_add_test(w, test_cosine_values);
    tcase_add_loop_test(w, test_cosine_shape, 0, (int)(sizeof cos_cases / sizeof cos_cases[0]));
    tcase_add_test(w, test_adamw_wd0_is_adam);
    tcase_add_test(w, test_adamw_one_step);
    tcase_add_test(w, test_adamw_mask);
    tcase_add_loop_test(w, test_adamw_step_matches_ref, 0, (int)(sizeof fused_sizes / sizeof fused_sizes[0]));
    tcase_add_test(w, test_adamw_refuses_nonfinite);
    suite_add_tcase(s, w);
    return s;
}
