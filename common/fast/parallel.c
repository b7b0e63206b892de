/* parallel.c - the thread count, and a small work-sharing pool (POSIX threads).
 *
 * The pool, in one picture (parallel.h says what the calls promise):
 *
 *     caller:   publish job -> take chunks from the front ----> wait for the
 *     worker k: (spinning or asleep) -> take chunks from the back   chunks
 *                                                                   taken
 *
 * One job at a time. Its chunks not yet taken are one range [lo, hi) kept
 * in one 64-bit word, `left`, so taking a chunk is one compare-and-swap:
 * the caller takes lo (and moves it up), a worker takes hi - 1 (and moves
 * it down), until the range is empty. Then the caller waits only for the
 * chunks the workers took and have not finished (`done` counts finished
 * ones): it never waits for a worker that has not started, it only waits
 * for one that is in the middle of a chunk.
 *
 * Why the caller works from the front and the workers from the back: with
 * two threads the caller does the first rows of every op and the worker
 * the last ones, wherever they meet. The rows one op wrote are then mostly
 * read by the next op on the same core, from its own cache (nn.c's column
 * sums and gemm.c's cut along K count on it). Nothing else depends on who
 * took which chunk: every caller writes each chunk's outputs apart from
 * the others', so the answer is the same on any thread count.
 *
 * Between jobs a worker spins for POOL_SPIN_S (a training step runs
 * hundreds of small jobs back to back, and waking a sleeping thread costs
 * more than most of them), then sleeps on a condition variable until the
 * next job. Only POSIX threads and C11 atomics: it builds on Linux and
 * macOS alike, with or without OpenMP (whose runtime it never calls). The
 * few calls beyond them (a spin hint, and on Linux which CPU a thread is
 * on) are in thread_shim.c, each
 * with a fallback that does nothing where the platform lacks it. */
#include "fast/parallel.h"
#include "core/clock.h"
#include "fast/thread_shim.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define POOL_MAX 64           /* workers at most (threads - 1)                   */
#define POOL_SPIN_S 2e-4      /* a worker spins this long (s) for the next job, then sleeps */

/* ---- the thread count ----------------------------------------------------
 * The pool's own number, first read the way OpenMP reads its own:
 * OMP_NUM_THREADS (its first value) when set, else one thread per CPU this
 * process may run on. The pool never calls the OpenMP runtime: OpenMP only
 * vectorises loops here (SIMD, parallel.h), and LLVM's runtime (clang's
 * libomp 14) dies of a bus error when it starts under a file-size limit
 * below 1 KiB (it sizes a shared-memory file), as tests/check_io.c's full
 * disk does. Without OpenMP (make NO_OMP=1): 1 thread unless asked. */
/* this thread is running a chunk: a job inside a job runs in one piece
 * (initial-exec TLS: see tls_ws in gemm.c) */
static _Thread_local int in_job __attribute__((tls_model("initial-exec")));

static _Atomic int threads_wanted;   /* 0: not read yet */

/* OMP_NUM_THREADS's first value ("4", "4,2"), else 0 */
static int env_threads(void) {
    const char *s = getenv("OMP_NUM_THREADS");
    if (!s) return 0;
    char *end;
    long n = strtol(s, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (end == s || n < 1 || (*end && *end != ',')) return 0;
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* OMP_NUM_THREADS when set (with or without OpenMP: it is the one knob
 * every program shares); else, built with OpenMP, one per CPU, and
 * without it (make NO_OMP=1, Apple's clang) 1 */
static int threads_default(void) {
    int n = env_threads();
    if (n) return n;
#ifdef _OPENMP
    n = thread_shim_cpu_count();
    return n > 0 ? n : 1;
#else
    return 1;
#endif
}

int parallel_threads(void) {
    if (in_job) return 1;
    int n = atomic_load_explicit(&threads_wanted, memory_order_relaxed);
    if (!n) {                 /* first use: unless parallel_set_threads came first */
        int unset = 0, d = threads_default();
        n = atomic_compare_exchange_strong(&threads_wanted, &unset, d) ? d : unset;
    }
    return n;
}

void parallel_set_threads(int n) { atomic_store(&threads_wanted, n < 1 ? 1 : n); }

int parallel_cap_threads(const char *prog) {
    int procs = thread_shim_cpu_count();
    if (procs < 1) procs = 1;
    int cap = PARALLEL_MAX_THREADS_PER_CPU * procs;
    int want = parallel_threads();
    if (want > cap) {
        fprintf(stderr, "%s: note: OMP_NUM_THREADS asks for %d threads on %d processor%s; using %d "
                "(at most %d per processor)\n", prog, want, procs, procs == 1 ? "" : "s", cap,
                PARALLEL_MAX_THREADS_PER_CPU);
        parallel_set_threads(cap);
        want = cap;
    }
    return want;
}

/* ---- the pool ------------------------------------------------------------ */
#define LEFT(lo, hi) ((uint64_t)(hi) << 32 | (uint32_t)(lo))
#define LEFT_LO(s) ((long)(uint32_t)(s))
#define LEFT_HI(s) ((long)((s) >> 32))

static struct {
    _Atomic uint64_t left;      /* chunks not yet taken: LEFT(lo, hi)          */
    _Atomic long done;          /* chunks of this job finished                 */
    _Atomic unsigned job;       /* bumped with every job: what workers watch   */
    _Atomic int active;         /* workers this job may use                    */
    _Atomic int sleepers;       /* workers asleep (or about to be) on `wake`   */
    ParallelFn fn;              /* the job: written before `left`, read by a   */
    void *ctx;                  /* thread only after it took a chunk           */
    long n, grain;
    int started;                /* workers running                             */
    pthread_mutex_t lock;       /* one caller at a time                        */
    pthread_mutex_t sleep_lock; /* with `wake`: where workers sleep            */
    pthread_cond_t wake;
    _Atomic int caller_cpu;     /* the CPU the caller ran on at its last job
                                 * (-1: the platform does not say)             */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .sleep_lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER};

/* one turn of a wait for another thread: spin a while, then give the core
 * up (the thread waited for may be waiting for this very core) */
static void wait_turn(int spins) {
    if (spins < 2000) thread_shim_pause();
    else thread_shim_yield();
}

/* Takes a chunk, the first one left or (from_back) the last: 1 and its
 * index, or 0 if none is left. */
static int take_chunk(int from_back, long *chunk) {
    uint64_t s = atomic_load_explicit(&pool.left, memory_order_acquire);
    for (;;) {
        long lo = LEFT_LO(s), hi = LEFT_HI(s);
        if (lo >= hi) return 0;
        uint64_t next = from_back ? LEFT(lo, hi - 1) : LEFT(lo + 1, hi);
        if (atomic_compare_exchange_weak_explicit(&pool.left, &s, next, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *chunk = from_back ? hi - 1 : lo;
            return 1;
        }
    }
}

/* runs chunks of the current job until none is left to take */
static void run_chunks(int from_back) {
    long c;
    while (take_chunk(from_back, &c)) {
        long lo = c * pool.grain, hi = lo + pool.grain < pool.n ? lo + pool.grain : pool.n;
        pool.fn(pool.ctx, lo, hi);
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
    }
}

/* ---- a worker beside the caller -----------------------------------------
 * With every core busy (another program on the other one), Linux may put a
 * worker on the caller's own CPU, where it only takes turns with the
 * caller; the two places (worker beside the caller, or beside the other
 * program) look the same to the scheduler. So a worker that finds itself
 * on the caller's CPU when it starts a job steps aside: onto the caller's
 * other CPUs, after which any CPU is allowed again (no thread stays
 * pinned). Measured on a 2-core VM shared with other jobs, chapter 08's
 * training step with a busy loop on one core, 2 threads / 1 thread: 0.84
 * to 0.97 with it, 0.93 to 1.12 without (medians of 5-14 rounds, several
 * sets). The price: with four busy loops instead of one, where the two
 * threads do better taking turns on one core, 1.08 against 0.83.
 * Where the platform cannot say which CPU a thread is on or move it
 * (macOS; thread_shim.h) both steps do nothing. */
static void note_caller(void) {
    if (!pool.started) thread_shim_save_cpus();   /* no worker yet reads the set */
    atomic_store_explicit(&pool.caller_cpu, thread_shim_cpu(), memory_order_relaxed);
}

static void step_aside(void) {
    thread_shim_step_off(atomic_load_explicit(&pool.caller_cpu, memory_order_relaxed));
}

static void *pool_worker(void *arg) {
    int id = (int)(intptr_t)arg;
    in_job = 1;                                   /* a worker never starts a nested job */
    unsigned seen = atomic_load(&pool.job);
    for (;;) {
        double t0 = clock_wall_s();
        for (int spins = 1; atomic_load_explicit(&pool.job, memory_order_acquire) == seen; spins++) {
            if (spins % 64 || clock_wall_s() - t0 < POOL_SPIN_S) {
                wait_turn(spins);
                continue;
            }
            /* asleep until the next job; `sleepers` goes up before the
             * last look at `job`, so a caller that publishes a job after
             * that look sees a sleeper and wakes it */
            pthread_mutex_lock(&pool.sleep_lock);
            atomic_fetch_add(&pool.sleepers, 1);
            while (atomic_load(&pool.job) == seen) pthread_cond_wait(&pool.wake, &pool.sleep_lock);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.sleep_lock);
        }
        seen = atomic_load(&pool.job);
        if (id < atomic_load(&pool.active)) {
            step_aside();
            run_chunks(1);
        }
    }
    return NULL;
}

/* A child of fork() has only the thread that forked: no workers. It starts
 * its own the first time it needs them (Check runs every test in a forked
 * child; fork is called outside parallel_run, so the locks are free). */
static void pool_after_fork(void) {
    pool.started = 0;
    atomic_store(&pool.sleepers, 0);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_mutex_init(&pool.sleep_lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
}

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_register_fork(void) { pthread_atfork(NULL, NULL, pool_after_fork); }

void parallel_run(long n, long grain, ParallelFn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int threads = parallel_threads();
    if (threads > POOL_MAX + 1) threads = POOL_MAX + 1;
    if (n <= grain || threads <= 1) {
        fn(ctx, 0, n);
        return;
    }
    long nch = (n + grain - 1) / grain;
    /* An even share: a few chunks that are not a multiple of the threads
     * leave one thread more than the others (3 chunks on 2 threads: 2
     * against 1), so a few are cut finer. The cut never changes a result. */
    if (grain > 1 && nch < 4L * threads && nch % threads) {
        long want = (nch / threads + 1) * threads;
        grain = (n + want - 1) / want;
        nch = (n + grain - 1) / grain;
    }
    if (nch > (long)INT32_MAX) {                  /* the range fits its 32-bit halves */
        grain = (n + INT32_MAX - 1) / INT32_MAX;
        nch = (n + grain - 1) / grain;
    }
    pthread_once(&pool_once, pool_register_fork);
    pthread_mutex_lock(&pool.lock);
    note_caller();
    while (pool.started < threads - 1) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &at, pool_worker, (void *)(intptr_t)pool.started);
        pthread_attr_destroy(&at);
        if (rc) break;                            /* fewer workers: still correct */
        pool.started++;
    }
    /* publish: the job first, then its chunks, then the news */
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.grain = grain;
    atomic_store(&pool.active, threads - 1);
    atomic_store(&pool.done, 0);
    atomic_store_explicit(&pool.left, LEFT(0, nch), memory_order_release);
    atomic_fetch_add(&pool.job, 1);
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.sleep_lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.sleep_lock);
    }
    in_job = 1;
    run_chunks(0);
    in_job = 0;
    /* wait only for chunks a worker has taken and not finished */
    for (int spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < nch; spins++)
        wait_turn(spins);
    pthread_mutex_unlock(&pool.lock);
}

/* ---- two parts in turn ---------------------------------------------------
 * The two parts of parallel_in_turn as a job of two chunks: the caller
 * takes chunk 0 (it takes from the front) and a worker chunk 1, which
 * waits for chunk 0. Chunk 0 never waits, so nothing can wait forever for
 * a chunk no one runs; a job run in one call does both in order. */
typedef struct {
    ParallelFn fn;
    void *ctx;
    long n, h;
    _Atomic int first_done;
} InTurn;

static void in_turn_chunk(void *arg, long c0, long c1) {
    InTurn *t = arg;
    for (long c = c0; c < c1; c++) {
        if (c == 0) {
            t->fn(t->ctx, 0, t->h);
            atomic_store_explicit(&t->first_done, 1, memory_order_release);
            continue;
        }
        for (int spins = 0; !atomic_load_explicit(&t->first_done, memory_order_acquire); spins++)
            wait_turn(spins);
        t->fn(t->ctx, t->h, t->n);
    }
}

void parallel_in_turn(long n, long h, ParallelFn fn, void *ctx) {
    if (h <= 0 || h >= n) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    InTurn t = {fn, ctx, n, h, 0};
    parallel_run(2, 1, in_turn_chunk, &t);
}
