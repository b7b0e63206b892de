/* check_parallel.c - the thread pool (fast/parallel.c).
 *
 *   Core    every chunk of [0, n) done exactly once, none longer than the
 *           grain; one thread: one call in the caller; a job inside a job
 *           runs in one piece; two program threads calling at once
 *   Order   parallel_in_turn: the second part only after the first
 *   Busy    with a busy-loop process on one of the CPUs: every job still
 *           finishes, covers [0, n) once, and Adam and gemm give the bits
 *           of one thread
 *   Portable parallel.c calls only POSIX threads, C11 atomics and its shim
 *           (fast/thread_shim.c), so it compiles for macOS, and never the
 *           OpenMP runtime; the shim's
 *           calls do what they say, or nothing where the build has no
 *           affinity (-DAIYN_PORTABLE_THREADS, macOS)
 *
 * No assertion here depends on how fast anything runs: on a busy machine
 * a worker may get no turn at all, and then the caller does every chunk.
 * Where a test wants to see a worker run a chunk (to know the path it
 * means to test ran), it gives the worker longer turns until one does.
 * How fast two threads are beside a busy program is bench's to measure
 * (build/bench busy). */
#define _GNU_SOURCE   /* sched_setaffinity: the busy loop stays on one CPU */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include "core/rng.h"
#include "fast/gemm.h"
#include "fast/optim_fast.h"
#include "fast/parallel.h"
#include "fast/thread_shim.h"
#include "ref/optim.h"
#include "core/clock.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------------ */
typedef struct {
    _Atomic int *hits;
    long n, grain;
    _Atomic int bad;
    _Atomic long by_others;   /* chunks run by a thread other than `caller` */
    pthread_t caller;
} RunCheck;

/* A chunk is at most grain long, or all of [0, n) run in the caller. The
 * first chunk another thread runs waits 0.1 ms before it counts, so that a
 * caller that did not wait for it would see its items not done. */
static void count_hits(void *ctx, long lo, long hi) {
    RunCheck *c = ctx;
    if ((hi - lo > c->grain && !(lo == 0 && hi == c->n)) || lo >= hi || lo < 0 || hi > c->n) c->bad = 1;
    if (!pthread_equal(pthread_self(), c->caller) && c->by_others++ == 0) {
        double t0 = clock_wall_s();
        while (clock_wall_s() - t0 < 1e-4) {}
    }
    for (long i = lo; i < hi; i++) c->hits[i]++;
}

/* parallel_run(n, grain) with count_hits: NULL if every item was done
 * once by chunks cut right, else what went wrong; adds the chunks other
 * threads ran to *by_others */
static const char *run_once(long n, long grain, long *by_others) {
    _Atomic int *hits = calloc((size_t)n, sizeof *hits);
    if (!hits) return "out of memory";
    RunCheck c = {hits, n, grain, 0, 0, pthread_self()};
    parallel_run(n, grain, count_hits, &c);
    const char *bad = c.bad ? "a chunk was empty, too long or out of range" : NULL;
    for (long i = 0; i < n && !bad; i++)
        if (hits[i] != 1) bad = "an item was done twice, or never";
    free(hits);
    *by_others += c.by_others;
    return bad;
}

/* run_once, asserting; returns how many chunks other threads ran */
static long run_and_check(long n, long grain) {
    long others = 0;
    const char *bad = run_once(n, grain, &others);
    ck_assert_msg(!bad, "n=%ld grain=%ld: %s", n, grain, bad);
    return others;
}

/* at least 2 threads for the pool, even on one core (restored by the caller) */
static int want_two(void) {
    int threads = parallel_threads();
    parallel_set_threads(threads > 1 ? threads : 2);
    return threads;
}

/* ---- Core ------------------------------------------------------------------- */
static const long ns[] = {1, 2, 7, 64, 1000, 10007};
static const long grains[] = {1, 3, 64, 5000};

START_TEST(test_covers_once) {
    int threads = want_two();
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 4; b++)
            for (int rep = 0; rep < 3; rep++) run_and_check(ns[a], grains[b]);
    parallel_set_threads(threads);
}
END_TEST

/* one thread asked for: fn(ctx, 0, n) once, in the caller, whatever the grain */
START_TEST(test_one_thread_in_caller) {
    int threads = parallel_threads();
    parallel_set_threads(1);
    ck_assert_int_eq(parallel_threads(), 1);
    ck_assert_int_eq(run_and_check(1000, 7), 0);
    parallel_set_threads(threads);
}
END_TEST

/* a job started inside a chunk runs in one piece on that thread */
typedef struct {
    _Atomic int bad, chunks;
} NestCheck;

static void inner_chunk(void *ctx, long lo, long hi) {
    NestCheck *c = ctx;
    if (lo != 0 || hi != 100) c->bad = 1;   /* one piece */
}

static void outer_chunk(void *ctx, long lo, long hi) {
    NestCheck *c = ctx;
    if (parallel_threads() != 1) c->bad = 1;
    for (long i = lo; i < hi; i++) parallel_run(100, 1, inner_chunk, c);
    c->chunks++;
}

START_TEST(test_nested_runs_inline) {
    int threads = want_two();
    NestCheck c = {0, 0};
    parallel_run(64, 1, outer_chunk, &c);
    ck_assert_msg(!c.bad, "a job inside a job was cut, or saw more than 1 thread");
    ck_assert_int_eq(c.chunks, 64);
    parallel_set_threads(threads);
}
END_TEST

/* two threads of a program call parallel_run at once: they take turns;
 * each returns what went wrong first, or NULL */
static void *caller_thread(void *arg) {
    (void)arg;
    long others = 0;
    const char *bad = NULL;
    for (int r = 0; r < 200 && !bad; r++) bad = run_once(1 + r * 37 % 997, 1 + r % 5, &others);
    return (void *)bad;
}

START_TEST(test_two_callers) {
    int threads = want_two();
    pthread_t t;
    void *theirs = NULL;
    ck_assert_int_eq(pthread_create(&t, NULL, caller_thread, NULL), 0);
    const char *mine = caller_thread(NULL);
    ck_assert_int_eq(pthread_join(t, &theirs), 0);
    ck_assert_msg(!mine && !theirs, "two callers at once: %s", mine ? mine : (const char *)theirs);
    parallel_set_threads(threads);
}
END_TEST

/* ---- Order: parallel_in_turn ------------------------------------------------ */
typedef struct {
    long n, h;
    int *hits;
    _Atomic int first_done, bad;
    pthread_t who[2];
    double hold;   /* seconds the first part takes, so that a worker holding the second waits */
} TurnCheck;

static void turn_part(void *ctx, long lo, long hi) {
    TurnCheck *c = ctx;
    int part = lo == 0 ? 0 : 1;
    if ((part == 0 && hi != c->h) || (part == 1 && (lo != c->h || hi != c->n))) c->bad = 1;
    if (part == 1 && !c->first_done) c->bad = 1;   /* started before the first had returned */
    c->who[part] = pthread_self();
    if (part == 0) {   /* so that a worker holding part 1 has to wait */
        double t0 = clock_wall_s();
        while (clock_wall_s() - t0 < c->hold) sched_yield();   /* (lets the worker run where threads take turns) */
    }
    for (long i = lo; i < hi; i++) c->hits[i]++;
    if (part == 0) c->first_done = 1;
}

/* one round of parallel_in_turn: -1 if a part was cut wrong, started
 * before the first had returned or did an item other than once; else 1 if
 * the parts ran on two threads, 0 if on one */
static int in_turn_once(long n, long h, double hold) {
    TurnCheck c = {n, h, calloc((size_t)n, sizeof(int)), 0, 0, {0}, hold};
    if (!c.hits) return -1;
    parallel_in_turn(n, h, turn_part, &c);
    int bad = c.bad;
    for (long i = 0; i < n; i++) bad |= c.hits[i] != 1;
    free(c.hits);
    return bad ? -1 : !pthread_equal(c.who[0], c.who[1]);
}

static int in_turn_round(long n, long h, double hold) {
    int r = in_turn_once(n, h, hold);
    ck_assert_msg(r >= 0, "n=%ld h=%ld: a part was cut wrong, started too early or did an item twice", n, h);
    return r;
}

static const long turn_cases[][2] = {{1000, 500}, {1000, 1}, {1000, 999}, {7, 3}};

START_TEST(test_in_turn) {
    int threads = want_two();
    /* 40 rounds, then on until a worker has run a second part, so that the
     * wait for the first is tested: the first part holds 0.2 ms, twice as
     * long each 20 rounds without a worker (up to 0.1 s: a busy machine's
     * scheduler gives a waiting thread a turn well within that) */
    int apart = 0, rounds = 0;
    double hold = 2e-4, t0 = clock_wall_s();
    for (; rounds < 40 || (!apart && clock_wall_s() - t0 < 20); rounds++) {
        if (rounds >= 40 && rounds % 20 == 0 && hold < 0.1) hold *= 2;
        apart += in_turn_round(turn_cases[rounds % 4][0], turn_cases[rounds % 4][1], hold);
    }
    ck_assert_msg(apart > 0, "no worker ran a second part in %d rounds (%.0f s, the first part held up to %.3f s): "
                  "the wait for the first part was not tested", rounds, clock_wall_s() - t0, hold);
    parallel_set_threads(threads);
}
END_TEST

/* ---- Busy: another program on one of the CPUs --------------------------------
 * A busy-loop process, pinned where the system lets it to one CPU this
 * process may use; the pool's threads run where the scheduler puts them,
 * so a worker may share that CPU and lose it in the middle of a chunk.
 * The caller then waits for that chunk: the jobs must still all finish,
 * each chunk once, and the answers must be those of one thread. */
static pid_t busy_start(void) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid > 0) return pid;
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);             /* gone with the test */
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) == 0) {
        int last = -1;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &all)) last = c;
        CPU_ZERO(&one);
        CPU_SET(last, &one);
        sched_setaffinity(0, sizeof one, &one);
    }
#endif
    for (volatile unsigned long x = 0;; x++) {}
}

static void busy_stop(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

START_TEST(test_busy_neighbour) {
    int threads = want_two();
    pid_t busy = busy_start();
    /* every chunk once, over and over (the verdicts once the loop is gone) */
    long by_workers = 0;
    const char *bad = NULL;
    int turn_bad = 0;
    for (int round = 0; round < 50 && !bad; round++)
        for (int a = 0; a < 6 && !bad; a++) bad = run_once(ns[a], grains[round % 4], &by_workers);
    for (int r = 0; r < 20; r++) turn_bad |= in_turn_once(turn_cases[r % 4][0], turn_cases[r % 4][1], 2e-4) < 0;

    /* Adam over 40 chunks (a sum per chunk, added in chunk order) and a
     * gemm of a model's size (128 x 512 . 512 x 512): 1 thread, then the
     * pool beside the busy loop, the same bits */
    size_t n = 40 * ADAM_CHUNK + 11;
    int M = 128, K = 512, N = 512;
    Rng rng;
    rng_seed(&rng, 5);
    float *g = randn(&rng, n, 1), *p[2], *m[2], *v[2];
    float *A = randn(&rng, (size_t)M * K, 1), *B = randn(&rng, (size_t)K * N, 1), *C[2];
    double sq[2];
    for (int t = 0; t < 2; t++) {
        parallel_set_threads(t == 0 ? 1 : (threads > 1 ? threads : 2));
        p[t] = calloc(n, sizeof(float));
        m[t] = calloc(n, sizeof(float));
        v[t] = calloc(n, sizeof(float));
        C[t] = calloc((size_t)M * N, sizeof(float));
        if (!p[t] || !m[t] || !v[t] || !C[t]) {
            busy_stop(busy);
            ck_abort_msg("out of memory");
        }
        for (int step = 1; step <= 3; step++) sq[t] = adam_step(p[t], g, m[t], v[t], n, 1e-3f, 0.9f, 0.98f, 1e-9f, step);
        for (int r = 0; r < 3; r++) gemm(0, 0, M, N, K, 1.0f, A, K, B, N, 1.0f, C[t], N);
    }
    busy_stop(busy);
    ck_assert_msg(!bad, "beside a busy loop: %s", bad);
    ck_assert_msg(!turn_bad, "beside a busy loop parallel_in_turn cut a part wrong, started one too early or "
                  "did an item twice");
    ck_assert_msg(memcmp(&sq[0], &sq[1], sizeof sq[0]) == 0, "Adam's sum of squares %.17g (1 thread) vs %.17g",
                  sq[0], sq[1]);
    ck_assert_msg(!memcmp(p[0], p[1], n * sizeof(float)) && !memcmp(m[0], m[1], n * sizeof(float)) &&
                  !memcmp(v[0], v[1], n * sizeof(float)), "Adam's weights differ between 1 thread and the pool");
    ck_assert_msg(!memcmp(C[0], C[1], (size_t)M * N * sizeof(float)), "gemm differs between 1 thread and the pool");
    if (!by_workers)
        printf("parallel: beside the busy loop no worker ran a chunk (the machine gave it no turn): the "
               "answers came from the caller alone\n");
    for (int t = 0; t < 2; t++) {
        free(p[t]);
        free(m[t]);
        free(v[t]);
        free(C[t]);
    }
    free(g);
    free(A);
    free(B);
    parallel_set_threads(threads);
}
END_TEST

/* ---- Portable: parallel.c beyond Linux ---------------------------------------- */
/* the text of a C file with its comments blanked out (the caller frees it) */
static char *code_without_comments(const char *path) {
    size_t len;
    char *s = read_file(path, &len);
    ck_assert_msg(s != NULL, "cannot read %s: run the tests from the repository root", path);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"') {                             /* a string: skip it whole */
            for (i++; i < len && s[i] != '"' && s[i] != '\n'; i++)
                if (s[i] == '\\') i++;
        } else if (s[i] == '/' && i + 1 < len && s[i + 1] == '*') {
            for (; i < len && !(s[i] == '*' && i + 1 < len && s[i + 1] == '/'); i++)
                if (s[i] != '\n') s[i] = ' ';
            if (i + 1 < len) s[i] = s[i + 1] = ' ';
            i++;
        } else if (s[i] == '/' && i + 1 < len && s[i + 1] == '/') {
            for (; i < len && s[i] != '\n'; i++) s[i] = ' ';
        }
    }
    return s;
}

/* the line number of offset `at` in s */
static int line_of(const char *s, const char *at) {
    int no = 1;
    for (; s < at; s++) no += *s == '\n';
    return no;
}

/* parallel.c and parallel.h include only C11 and POSIX headers (and the
 * library's own), name no Linux call (everything else is the shim's,
 * fast/thread_shim.c) and call no OpenMP runtime function. Fails on the
 * pool that called sched_setaffinity and omp_get_max_threads itself. */
START_TEST(test_pool_uses_portable_calls) {
    static const char *const FILES[] = {"common/fast/parallel.c", "common/fast/parallel.h"};
    static const char *const HEADERS[] = {
        "pthread.h", "stdatomic.h", "stdint.h", "stddef.h", "stdbool.h", "stdio.h", "stdlib.h",
        "string.h", "limits.h", "errno.h", "time.h",
    };
    static const char *const LINUX_ONLY[] = {
        "_GNU_SOURCE", "sched_getcpu", "sched_setaffinity", "sched_getaffinity", "cpu_set_t",
        "CPU_SET", "CPU_ISSET", "CPU_COUNT", "futex", "syscall", "prctl", "pthread_setaffinity_np",
        "gettid", "__linux__", "immintrin", "_mm_pause", "__asm__",
    };
    int bad = 0;
    for (int f = 0; f < 2; f++) {
        char *code = code_without_comments(FILES[f]);
        for (const char *p = strstr(code, "#include"); p; p = strstr(p + 1, "#include")) {
            const char *name = p + strlen("#include");
            name += strspn(name, " \t");
            if (*name == '"') continue;                /* the library's own */
            size_t n = strcspn(name + 1, ">\n");
            int known = 0;
            for (size_t h = 0; h < sizeof HEADERS / sizeof *HEADERS; h++)
                known |= strlen(HEADERS[h]) == n && !strncmp(name + 1, HEADERS[h], n);
            if (!known) {
                fprintf(stderr, "check_parallel: %s:%d includes <%.*s>, not a C11 or POSIX header "
                        "(platform calls belong in fast/thread_shim.c)\n", FILES[f], line_of(code, p),
                        (int)n, name + 1);
                bad++;
            }
        }
        for (size_t w = 0; w < sizeof LINUX_ONLY / sizeof *LINUX_ONLY; w++)
            for (const char *p = strstr(code, LINUX_ONLY[w]); p; p = strstr(p + 1, LINUX_ONLY[w])) {
                fprintf(stderr, "check_parallel: %s:%d names %s (platform calls belong in "
                        "fast/thread_shim.c)\n", FILES[f], line_of(code, p), LINUX_ONLY[w]);
                bad++;
            }
        /* the OpenMP runtime: clang's (libomp 14) dies of SIGBUS at its first
         * call under a file-size limit below 1 KiB (check_io's full disk) */
        for (const char *p = strstr(code, "omp_"); p; p = strstr(p + 1, "omp_")) {
            fprintf(stderr, "check_parallel: %s:%d calls the OpenMP runtime (the pool counts its own "
                    "threads)\n", FILES[f], line_of(code, p));
            bad++;
        }
        free(code);
    }
    ck_assert_msg(bad == 0, "%d platform-specific line(s) in the thread pool (listed above)", bad);
}
END_TEST

/* The shim: a CPU count; on Linux a CPU number, and a step off the CPU that
 * leaves the thread free to run on every CPU it had; with the fallbacks
 * (AIYN_PORTABLE_THREADS, macOS) -1 and nothing. Either way the pool
 * covers every chunk once. */
START_TEST(test_shim_calls) {
    int cpu = thread_shim_cpu();
#if defined(__linux__) && !defined(AIYN_PORTABLE_THREADS)
    ck_assert_int_eq(thread_shim_has_affinity(), 1);
#else
    ck_assert_int_eq(thread_shim_has_affinity(), 0);
#endif
    if (!thread_shim_has_affinity()) {
        ck_assert_int_eq(cpu, -1);
    } else {
        ck_assert_int_ge(cpu, 0);
#if defined(__linux__)
        cpu_set_t before, after;
        ck_assert_int_eq(sched_getaffinity(0, sizeof before, &before), 0);
        thread_shim_save_cpus();
        for (int r = 0; r < 20; r++) thread_shim_step_off(thread_shim_cpu());   /* (moves it if it can) */
        thread_shim_step_off(-1);
        ck_assert_int_eq(sched_getaffinity(0, sizeof after, &after), 0);
        ck_assert_msg(CPU_EQUAL(&before, &after), "thread_shim_step_off left the thread on %d of its %d CPUs",
                      CPU_COUNT(&after), CPU_COUNT(&before));
#endif
    }
    ck_assert_int_ge(thread_shim_cpu_count(), 1);
    thread_shim_step_off(cpu);
    for (int r = 0; r < 100; r++) thread_shim_pause();
    thread_shim_yield();
    int threads = want_two();
    for (int rep = 0; rep < 3; rep++) run_and_check(1000, 7);
    parallel_set_threads(threads);
}
END_TEST

Suite *parallel_suite(void) {
    Suite *s = suite_create("parallel");
    suite_case(s, "Core", test_covers_once, test_one_thread_in_caller, test_nested_runs_inline, test_two_callers);
    tcase_set_timeout(suite_case(s, "Order", test_in_turn), 30);
    /* a busy machine, under valgrind too: slow, never timed */
    tcase_set_timeout(suite_case(s, "Busy", test_busy_neighbour), 120);
    suite_case(s, "Portable", test_pool_uses_portable_calls, test_shim_calls);
    return s;
}
