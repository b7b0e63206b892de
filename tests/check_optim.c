/* check_optim.c - the Section 5.3 learning-rate schedule and Adam. */
#define _GNU_SOURCE   /* sched_getcpu, sched_setaffinity: a test confines itself to one CPU */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "ref/optim.h"
#include "fast/parallel.h"
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
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    double s1 = adam_step(a.p, a.g, a.m, a.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, 1);
#ifdef _OPENMP
    omp_set_num_threads(threads > 1 ? threads : 2);
#endif
    double s2 = adam_step(b.p, b.g, b.m, b.v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, 1);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    ck_assert_msg(memcmp(&s1, &s2, sizeof s1) == 0, "sum of squares %.17g (1 thread) vs %.17g", s1, s2);
    ck_assert(!memcmp(a.p, b.p, n * sizeof(float)) && !memcmp(a.v, b.v, n * sizeof(float)));
    adam_state_free(&a);
    adam_state_free(&b);
}
END_TEST

/* ---- parallel_run hands out every chunk exactly once ------------------------ */
typedef struct {
    int *hits;
    long n, grain;
    int bad;
} RunCheck;

/* a chunk is at most grain long, or all of [0, n) run in the caller */
static void count_hits(void *ctx, long lo, long hi) {
    RunCheck *c = ctx;
    if ((hi - lo > c->grain && !(lo == 0 && hi == c->n)) || lo >= hi)
        __atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);
    for (long i = lo; i < hi; i++) __atomic_fetch_add(&c->hits[i], 1, __ATOMIC_RELAXED);
}

START_TEST(test_parallel_run_covers_once) {
    long ns[] = {1, 2, 7, 64, 1000, 10007};
    long grains[] = {1, 3, 64, 5000};
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    omp_set_num_threads(threads > 1 ? threads : 2);   /* the pool even on one core */
#endif
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 4; b++)
            for (int rep = 0; rep < 3; rep++) {
                int *hits = calloc(ns[a], sizeof(int));
                RunCheck c = {hits, ns[a], grains[b], 0};
                parallel_run(ns[a], grains[b], count_hits, &c);
                ck_assert_msg(!c.bad, "n=%ld grain=%ld: a chunk was empty or too long", ns[a], grains[b]);
                for (long i = 0; i < ns[a]; i++)
                    ck_assert_msg(hits[i] == 1, "n=%ld grain=%ld: item %ld done %d times", ns[a], grains[b], i,
                                  hits[i]);
                free(hits);
            }
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
}
END_TEST

/* ---- parallel_in_turn: the second part only after the first -------------- */
typedef struct {
    long n, h;
    int *hits;
    _Atomic int first_done, bad;
    pthread_t who[2];
} TurnCheck;

static void turn_part(void *ctx, long lo, long hi) {
    TurnCheck *c = ctx;
    int part = lo == 0 ? 0 : 1;
    if ((part == 0 && hi != c->h) || (part == 1 && (lo != c->h || hi != c->n))) c->bad = 1;
    if (part == 1 && !c->first_done) c->bad = 1;   /* started before the first had returned */
    c->who[part] = pthread_self();
    if (part == 0) {   /* take 0.2 ms, so that a worker holding part 1 has to wait */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            sched_yield();   /* lets the worker run even where threads take turns (valgrind) */
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 200000L);
    }
    for (long i = lo; i < hi; i++) c->hits[i]++;
    if (part == 0) c->first_done = 1;
}

START_TEST(test_parallel_in_turn) {
    int threads = omp_get_max_threads();
    omp_set_num_threads(threads > 1 ? threads : 2);
    long cases[][2] = {{1000, 500}, {1000, 1}, {1000, 999}, {7, 3}};
    int apart = 0, rounds = 0;   /* rounds whose two parts ran on different threads */
    /* 40 rounds, then on until a worker has run a second part (a worker
     * that slept may wake too late for a few; under valgrind, for many) */
    for (; rounds < 40 || (threads > 1 && !apart && rounds < 2000); rounds++) {
        long n = cases[rounds % 4][0], h = cases[rounds % 4][1];
        TurnCheck c = {n, h, calloc(n, sizeof(int)), 0, 0, {0}};
        parallel_in_turn(n, h, turn_part, &c);
        ck_assert_msg(!c.bad, "n=%ld h=%ld: a part was cut wrong or started too early", n, h);
        for (long i = 0; i < n; i++)
            ck_assert_msg(c.hits[i] == 1, "n=%ld h=%ld: item %ld done %d times", n, h, i, c.hits[i]);
        apart += !pthread_equal(c.who[0], c.who[1]);
        free(c.hits);
    }
    /* with two processors a worker runs some second parts (else the wait
     * above was never tested); on one it may never get the chance */
    if (threads > 1) ck_assert_msg(apart > 0, "no second part ran on a worker in %d rounds", rounds);
    else printf("optim: parallel_in_turn ran on one processor: the wait was not tested\n");
    omp_set_num_threads(threads);
}
END_TEST

/* ---- a worker that shares its core --------------------------------------
 * Another program on the worker's CPU takes it away every other time
 * slice. The worker finds itself off its core and shares it (parallel.c):
 * it takes chunks only early in each of its slices and leaves the rest of
 * a job to the caller. Every chunk must still be done exactly once. A
 * child process sets it up, so that nothing leaks into the other tests:
 * it starts the pool, pins itself (this thread only) to one CPU and a busy
 * loop to another (the worker, free to run anywhere, moves off the
 * caller's CPU and so meets the busy loop), and runs jobs until the
 * worker has shared its core. */
static pthread_t share_caller;
static _Atomic long share_worker_chunks;   /* chunks a worker ran */

static void slow_hits(void *ctx, long lo, long hi) {   /* 20 us an item */
    count_hits(ctx, lo, hi);
    if (!pthread_equal(pthread_self(), share_caller)) share_worker_chunks++;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 20000L * (hi - lo));
}

enum { SHARE_OK, SHARE_WRONG, SHARE_NEVER, SHARE_NO_PIN, SHARE_NO_WORKER };

static int share_jobs(void) {
    enum { N = 64 };
    int hits[N];
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int rounds = 0;; rounds++) {
        memset(hits, 0, sizeof hits);
        RunCheck c = {hits, N, 1, 0};
        parallel_run(N, 1, slow_hits, &c);
        for (int i = 0; i < N; i++)
            if (hits[i] != 1 || c.bad) return SHARE_WRONG;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double secs = (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec);
        if (rounds >= 100 && parallel_times_shared() > 0) return SHARE_OK;
        if (secs > 3) return share_worker_chunks ? SHARE_NEVER : SHARE_NO_WORKER;
    }
}

static int share_child(void) {
#if defined(_OPENMP) && defined(__linux__)
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) return SHARE_NO_PIN;
    int a = -1, b = -1;
    for (int c = 0; c < CPU_SETSIZE && b < 0; c++)   /* the first two CPUs it may use */
        if (CPU_ISSET(c, &all)) {
            if (a < 0) a = c;
            else b = c;
        }
    omp_set_num_threads(2);
    share_caller = pthread_self();
    int hits[64] = {0};
    RunCheck c = {hits, 64, 1, 0};
    parallel_run(64, 1, count_hits, &c);            /* the worker starts, free to run on all CPUs */
    pid_t hog = fork();
    if (hog < 0) return SHARE_NO_PIN;
    if (hog == 0) {                                 /* the busy loop, on CPU b, gone with its parent */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        CPU_ZERO(&one);
        CPU_SET(b, &one);
        sched_setaffinity(0, sizeof one, &one);
        for (volatile unsigned long x = 0;; x++) {}
    }
    CPU_ZERO(&one);
    CPU_SET(a, &one);
    int rc = sched_setaffinity(0, sizeof one, &one) != 0 ? SHARE_NO_PIN : share_jobs();
    kill(hog, SIGKILL);
    waitpid(hog, NULL, 0);
    return rc;
#else
    return SHARE_NO_PIN;
#endif
}

START_TEST(test_parallel_run_shared_core) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) _exit(share_child());
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "the child did not exit");
    int rc = WEXITSTATUS(status);
    if (rc == SHARE_NO_PIN) {
        printf("optim: fewer than 2 CPUs (or no way to pin threads): a worker sharing its core was not tested\n");
        return;
    }
    ck_assert_msg(rc != SHARE_WRONG, "with a busy loop beside the worker a chunk was skipped or done twice");
    if (rc == SHARE_NO_WORKER) {   /* valgrind runs one thread at a time, and gave the worker no turn */
        printf("optim: the worker never ran a chunk in 3 s: a worker sharing its core was not tested\n");
        return;
    }
    ck_assert_msg(rc == SHARE_OK, "with a busy loop beside it the worker never shared its core in 3 s");
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
    tcase_add_test(fused, test_parallel_run_covers_once);
    tcase_add_test(fused, test_parallel_in_turn);
    tcase_add_test(fused, test_parallel_run_shared_core);
    suite_add_tcase(s, fused);
    return s;
}
