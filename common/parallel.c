/* parallel.c - a sane thread count before the first parallel region. */
#include "parallel.h"

#include <stdio.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int parallel_cap_threads(const char *prog) {
#ifdef _OPENMP
    /* libgomp reads OMP_NUM_THREADS when the program starts but starts no
     * thread until the first parallel region: lowering the count here, in
     * main, is in time. */
    int procs = omp_get_num_procs();
    int cap = PARALLEL_MAX_THREADS_PER_CPU * (procs > 0 ? procs : 1);
    int want = omp_get_max_threads();
    if (want > cap) {
        fprintf(stderr, "%s: note: OMP_NUM_THREADS asks for %d threads on %d processor%s; using %d "
                "(at most %d per processor)\n", prog, want, procs, procs == 1 ? "" : "s", cap,
                PARALLEL_MAX_THREADS_PER_CPU);
        omp_set_num_threads(cap);
        want = cap;
    }
    return want;
#else
    (void)prog;
    return 1;
#endif
}

void parallel_set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* ---- the work-sharing pool (see parallel.h) ------------------------------ */
#ifdef _OPENMP
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define POOL_MAX 64            /* workers at most (threads - 1)                 */
#define POOL_SPIN_NS 200000L   /* a worker spins this long for the next job, then
                                * sleeps: the gaps between a step's jobs are shorter */
#define POOL_WAIT_NS 200000L   /* the caller waited this much longer than one of its
                                * own chunks takes for a worker's chunk: that core
                                * is busy elsewhere (see below)                    */
#define POOL_PREEMPTED_NS 500000L /* a spinning worker saw this long between two
                                * looks at the clock: it lost its core meanwhile */
#define POOL_AGAIN_NS 20000000L /* a sign of a busy core (those two, or the share
                                * of chunks below) counts the second time within
                                * this: one alone is the host taking a vCPU for 1-5 ms,
                                * which this VM does every 0.2-2 s (up to 6 times in
                                * a 3.6 s run of the Annotated step, each of which had
                                * sent 50-1600 ms to one thread); another program on the
                                * core gives one every time slice, a few ms apart  */
#define POOL_SOLO_NS 50000000L /* ... so for this long the caller works alone,     */
#define POOL_SOLO_MAX_NS 1600000000L /* doubled up to this while it keeps happening */

/* The job is one 64-bit word, so that taking a chunk is one compare-and-swap
 * on it: generation (24 bits) | hi (20 bits) | lo (20 bits); chunks [lo, hi)
 * are still to be taken. A worker holding an old generation can never take
 * a chunk of a newer job.
 *
 * The caller takes chunks from the front (lo), the workers from the back
 * (hi): with two threads the caller does the first rows of every op and
 * the worker the last ones, wherever they meet. So the rows one op wrote
 * are, mostly, read by the next op on the same core, from its own cache;
 * handing them to the other core costs a trip between the cores for every
 * cache line, which on this virtual machine (the two vCPUs are sometimes
 * far apart on the host) took as long as the work itself in chapter 08's
 * small steps. */
#define ST_GEN(s) ((uint32_t)((s) >> 40))
#define ST_HI(s) ((uint32_t)(((s) >> 20) & 0xFFFFF))
#define ST_LO(s) ((uint32_t)((s)&0xFFFFF))
#define ST_ONE_HI ((uint64_t)1 << 20)
#define ST_MAXCH 0xFFFFFu

static struct {
    _Atomic uint64_t state;
    _Atomic uint32_t done;      /* chunks of this job finished               */
    _Atomic uint32_t wake;      /* futex word, bumped with every job         */
    _Atomic int sleepers;       /* workers asleep (or about to be) on wake   */
    _Atomic int active;         /* workers this job may use                  */
    _Atomic int away;           /* workers in retreat (see retreat)           */
    ParallelFn fn;              /* written before state, read after a claim  */
    void *ctx;
    long n, grain;
    int started;                /* workers running                          */
    long solo_until;            /* now_ns() before which jobs run in the caller */
    long solo_ns;               /* the length of the last solo period         */
    long win_all, win_mine;     /* chunks of recent jobs: all, and the caller's */
    long sign_at;               /* now_ns() of the last busy_sign(), or 0            */
    pthread_mutex_t lock;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* one turn of a wait for another thread: spin a while, then give the core up */
static void wait_turn(int spins) {
    if (spins < 2000) CPU_RELAX();
    else sched_yield();
}

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* this thread is running a chunk (initial-exec TLS: see tls_ws in gemm.c) */
static _Thread_local int in_job __attribute__((tls_model("initial-exec")));

/* Takes a chunk of generation gen, the first one left or (from_back) the
 * last: 1 and its index, or 0 if none is left. */
static int pool_claim(uint32_t gen, int from_back, uint32_t *chunk) {
    uint64_t s = atomic_load_explicit(&pool.state, memory_order_acquire);
    for (;;) {
        if (ST_GEN(s) != gen || ST_LO(s) >= ST_HI(s)) return 0;
        uint64_t next = from_back ? s - ST_ONE_HI : s + 1;
        if (atomic_compare_exchange_weak_explicit(&pool.state, &s, next, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *chunk = from_back ? ST_HI(s) - 1 : ST_LO(s);
            return 1;
        }
    }
}

/* runs chunks of job gen until none is left; returns how many it ran */
static long pool_chunks(uint32_t gen, int from_back) {
    uint32_t c;
    long ran = 0;
    while (pool_claim(gen, from_back, &c)) {
        long lo = (long)c * pool.grain, hi = lo + pool.grain < pool.n ? lo + pool.grain : pool.n;
        pool.fn(pool.ctx, lo, hi);
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
        ran++;
    }
    return ran;
}

/* The length of the next period of staying out (the caller working alone,
 * or a worker in retreat), the last one `period` long and ended at
 * `ended`: held up again soon after it ended (the other program is still
 * there), twice as long, up to POOL_SOLO_MAX_NS, so under lasting
 * contention the trials cost less and less; otherwise POOL_SOLO_NS again. */
static long next_period(long period, long ended, long now) {
    int again = ended && now - ended < 2 * period;
    return again ? (2 * period < POOL_SOLO_MAX_NS ? 2 * period : POOL_SOLO_MAX_NS) : POOL_SOLO_NS;
}

/* A worker that finds it was not running for a while (another program
 * shares its core) stays out of the jobs for a while: it sleeps
 * next_period() and the caller does the chunks meanwhile. A worker holding
 * a chunk when it loses its core holds the caller up; this way it mostly
 * notices while it is between jobs, and gives up its place before taking
 * one. */
static void retreat(long *period, long *until) {
    *period = next_period(*period, *until, now_ns());
    struct timespec ts = {*period / 1000000000L, *period % 1000000000L};
    atomic_fetch_add(&pool.away, 1);
    while (nanosleep(&ts, &ts) != 0) {}
    atomic_fetch_sub(&pool.away, 1);
    *until = now_ns();
}

/* A sign of a busy core at time now, the last one at *at (0: none yet):
 * 1 when that was within POOL_AGAIN_NS (the second sign soon: another
 * program, not a lone host event); *at becomes now. */
static int again_soon(long *at, long now) {
    int again = *at && now - *at < POOL_AGAIN_NS;
    *at = now;
    return again;
}

static void *pool_worker(void *arg) {
    int id = (int)(intptr_t)arg;
    in_job = 1;                                   /* a worker never starts a nested job */
    uint32_t seen = ST_GEN(atomic_load(&pool.state));
    long retreat_ns = 0, retreat_end = 0, off_at = 0;
    for (;;) {
        uint64_t s;
        int spins = 0;
        long t0 = now_ns(), last = t0;
        while (ST_GEN(s = atomic_load_explicit(&pool.state, memory_order_acquire)) == seen) {
            if (++spins % 64) {
                CPU_RELAX();
                continue;
            }
            long t = now_ns();
            if (t - last > POOL_PREEMPTED_NS) {   /* this thread was off its core */
                if (again_soon(&off_at, t)) {    /* the second time soon: not a lone event */
                    retreat(&retreat_ns, &retreat_end);
                    t0 = last = now_ns();
                    continue;
                }
            }
            last = t;
            if (t - t0 < POOL_SPIN_NS) {
                CPU_RELAX();
                continue;
            }
            /* sleep until the next job: re-check after announcing ourselves,
             * so a job published meanwhile is not missed */
            atomic_fetch_add(&pool.sleepers, 1);
            uint32_t w = atomic_load(&pool.wake);
            if (ST_GEN(atomic_load(&pool.state)) == seen)
                syscall(SYS_futex, &pool.wake, FUTEX_WAIT_PRIVATE, w, NULL, NULL, 0);
            atomic_fetch_sub(&pool.sleepers, 1);
            t0 = last = now_ns();
        }
        seen = ST_GEN(s);
        if (id < atomic_load(&pool.active)) pool_chunks(seen, 1);
    }
    return NULL;
}

int parallel_threads(void) { return in_job ? 1 : omp_get_max_threads(); }

/* A child of fork() has only the thread that forked: no workers. It starts
 * its own the first time it needs them (Check runs every test in a forked
 * child; fork is called outside parallel_run, so the lock is free). */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_after_fork(void) {
    pool.started = 0;
    pool.sign_at = 0;
    atomic_store(&pool.away, 0);
    atomic_store(&pool.sleepers, 0);
    pthread_mutex_init(&pool.lock, NULL);
}

static void pool_register_fork(void) { pthread_atfork(NULL, NULL, pool_after_fork); }

/* Work alone for a while (next_period). */
static void go_solo(void) {
    long now = now_ns();
    pool.solo_ns = next_period(pool.solo_ns, pool.solo_until, now);
    pool.solo_until = now + pool.solo_ns;
}

/* A sign that a worker is not getting its core (see parallel_run). One
 * alone is the host's doing and soon over; the second within
 * POOL_AGAIN_NS is another program's, and the caller goes solo. */
static void busy_sign(void) {
    if (again_soon(&pool.sign_at, now_ns())) go_solo();
}

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
    if (nch > ST_MAXCH) {                         /* coarser chunks, same cut rule */
        grain = (n + ST_MAXCH - 1) / ST_MAXCH;
        nch = (n + grain - 1) / grain;
    }
    /* one caller at a time (two threads of a program calling at once
     * take turns; the pool is not reentrant) */
    pthread_once(&pool_once, pool_register_fork);
    pthread_mutex_lock(&pool.lock);
    /* Straggler guard: a worker that took a chunk and then lost its core
     * to another program holds the caller up until it is scheduled again
     * (a time slice, milliseconds). When that happened twice recently, the
     * caller does the jobs alone for a while (the worker goes to sleep
     * and leaves its core to the other program), then tries again. */
    /* (Likewise while every worker is in retreat: the job is then one
     * call, as on one thread, not chunk by chunk.) */
    if ((pool.solo_until && now_ns() < pool.solo_until) ||
        (pool.started > 0 && atomic_load(&pool.away) >= pool.started)) {
        pthread_mutex_unlock(&pool.lock);
        fn(ctx, 0, n);
        return;
    }
    int before = pool.started;
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
    /* A worker started for this job begins late (its thread is being
     * created), so the caller's wait for it below is no sign of a busy
     * core, and does not send the next 50 ms to one thread. Only a worker
     * that did start counts: when pthread_create keeps failing, the guard
     * keeps working. */
    int fresh = pool.started > before;
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.grain = grain;
    atomic_store(&pool.active, threads - 1);
    atomic_store(&pool.done, 0);
    uint32_t gen = (ST_GEN(atomic_load(&pool.state)) + 1) & 0xFFFFFF;
    atomic_store_explicit(&pool.state, (uint64_t)gen << 40 | (uint64_t)nch << 20, memory_order_release);
    atomic_fetch_add(&pool.wake, 1);
    if (atomic_load(&pool.sleepers) > 0)
        syscall(SYS_futex, &pool.wake, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    in_job = 1;
    long w0 = now_ns();
    long mine = pool_chunks(gen, 0);
    long per_chunk = mine > 0 ? (now_ns() - w0) / mine : 0;   /* this thread's time per chunk */
    in_job = 0;
    /* wait only for chunks a worker has taken and not finished */
    if (atomic_load_explicit(&pool.done, memory_order_acquire) < nch) {
        long t0 = now_ns(), waited = 0;
        for (int spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < nch; spins++)
            wait_turn(spins);
        waited = now_ns() - t0;
        /* A worker that runs finishes its last chunk at most about one
         * chunk's time after this thread ran out of chunks; longer means it
         * lost its core (or shares it: then it is slower than this thread) */
        if (waited > POOL_WAIT_NS + per_chunk && !fresh) busy_sign();
    }
    /* The other sign of busy cores: the workers, spinning and ready, should
     * take their share of the chunks; when over the last jobs they took
     * less than a third of it, they are not getting a core (and their
     * spinning may take time from this thread: Linux shares a core among
     * a session's threads): a sign too. */
    pool.win_all += nch;
    pool.win_mine += mine;
    if (pool.win_all >= 256) {
        double theirs = (double)(pool.win_all - pool.win_mine) / pool.win_all;
        double fair = (double)(threads - 1) / threads;
        if (theirs < fair / 3) busy_sign();
        pool.win_all = pool.win_mine = 0;
    }
    pthread_mutex_unlock(&pool.lock);
}
/* The two parts of parallel_in_turn as a job of two chunks: the caller
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
#else
int parallel_threads(void) { return 1; }

void parallel_in_turn(long n, long h, ParallelFn fn, void *ctx) {
    (void)h;
    if (n > 0) fn(ctx, 0, n);
}

void parallel_run(long n, long grain, ParallelFn fn, void *ctx) {
    (void)grain;
    if (n > 0) fn(ctx, 0, n);
}
#endif
