/* parallel.c - a sane thread count before the first parallel region. */
#define _GNU_SOURCE   /* the pool: sched_getcpu, sched_setaffinity, cpu_set_t */
#include "fast/parallel.h"

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
/* a worker that shares its core (Share, below): */
#define POOL_OFF_NS 300000L    /* more wall time than this went by than it ran:
                                * it lost its core meanwhile                      */
#define POOL_AGAIN_NS 20000000L /* it counts the second loss within this: this VM's
                                * host takes a vCPU away for 1-5 ms every 0.2-2 s,
                                * a lone event soon over; another program on the
                                * core takes it every other time slice, ms apart  */
#define POOL_SHARE_NS 200000000L /* then it shares its core until this long after
                                * its last loss                                   */
#define POOL_RUN_NS 4000000L   /* its first guess at its time slice (this kernel's
                                * tick, 4 ms); then it measures it                */
#define POOL_READ_NS 10000000L /* its CPU clock read at least this often         */
/* the caller, judging the workers over a window of jobs (parallel_run): */
#define POOL_WINDOW 256        /* at least this many chunks, and POOL_AGAIN_NS     */
#define POOL_SHARE_MIN 0.7     /* it ran less of the window than this: it shares
                                * its own core                                    */
#define POOL_SOLO_NS 50000000L /* the workers did not pay: for this long the
                                * caller works alone,                             */
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
    _Atomic int caller_cpu;     /* the CPU the caller ran on at its last job */
    cpu_set_t cpus;             /* the CPUs the caller could use when the pool started */
    ParallelFn fn;              /* written before state, read after a claim  */
    void *ctx;
    long n, grain;
    int started;                /* workers running                          */
    long solo_until;            /* now_ns() before which jobs run in the caller */
    long solo_ns;               /* the length of the last solo period         */
    long win_all;               /* chunks of the jobs of the window (parallel_run) */
    long win_waited, win_saved; /* ... the caller's waits for workers, and the time
                                 * their chunks would have taken the caller       */
    long win_wall, win_cpu;     /* ... when the window began: wall clock and the
                                 * caller's CPU clock (win_wall 0: not begun)     */
    pthread_t win_owner;        /* ... the thread that called then              */
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

/* ---- a worker that shares its core ---------------------------------------
 * Another program on a worker's core (a busy loop, a compiler) takes the
 * core away for a time slice and gives it back for one: 4 ms each here,
 * the kernel's tick. A chunk the worker holds when it loses its core holds
 * the caller up until it is back, so the caller would do better alone. But
 * the worker can still help, if it takes chunks only when it will finish
 * them before it loses the core again. So a worker that found itself off
 * its core (more wall time went by than its thread's CPU clock counted)
 * twice within POOL_AGAIN_NS shares its core, until POOL_SHARE_NS after
 * the last time: it takes chunks only in the first half of each time
 * slice (back on its core, or woken for a job), and leaves the rest of a
 * job to the caller. Measured with a busy loop on one of this VM's 2
 * cores: chapter 08's step at 0.82 of the 1-thread step, the Annotated
 * step at 0.87-0.90 (bench/README.md, item 16). */
static _Atomic long times_shared;   /* parallel_times_shared() */

typedef struct {
    long look;      /* wall clock at the last look (0: none yet)               */
    long off;       /* wall clock minus this thread's CPU clock, at read       */
    long read;      /* the last look that read the CPU clock                   */
    long gap;       /* when it last found it had lost its core (0: never)      */
    long until;     /* it shares its core until then                           */
    long slice;     /* its time slice began: back on its core, or woken since  */
    long run;       /* how long it kept its core the last time: its time slice */
} Share;

static long thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* A look at the clocks (at every job, and before every chunk while it
 * shares its core): more wall time went by than it ran, and it was off
 * its core. */
static void share_look(Share *s) {
    long now = now_ns();
    /* The CPU clock is a system call (about 0.6 us here, as much as a small
     * chunk): it is read only when it may show a loss, after POOL_OFF_NS
     * without a look, and every POOL_READ_NS to keep its count fresh. */
    if (s->look && now - s->look <= POOL_OFF_NS && now - s->read < POOL_READ_NS) {
        s->look = now;
        return;
    }
    long off = now - thread_cpu_ns();
    if (s->look && off - s->off > POOL_OFF_NS) {         /* it lost its core since the last look */
        long kept = s->look - s->slice;                  /* on its core since slice, at least */
        if (s->slice && kept > 1000000L && kept < 20000000L) s->run = kept;
        long back = s->look + (off - s->off);            /* the earliest it got it back */
        s->slice = back < now ? back : now;
        /* the second time within POOL_AGAIN_NS (not a lone host event), or
         * again while it shares: it shares its core for POOL_SHARE_NS more */
        if ((s->gap && now - s->gap < POOL_AGAIN_NS) || now < s->until) {
            if (now >= s->until) atomic_fetch_add_explicit(&times_shared, 1, memory_order_relaxed);
            s->until = now + POOL_SHARE_NS;
        }
        s->gap = now;
    }
    s->look = now, s->off = off, s->read = now;
}

/* Woken for a job: the time asleep was no loss of its core, and it starts
 * a time slice. */
static void share_wake(Share *s) {
    long now = now_ns();
    s->look = s->read = s->slice = now;
    s->off = now - thread_cpu_ns();
}

static int share_on(const Share *s) { return s->look < s->until; }

/* May it take a chunk now? Always, unless it shares its core; then only
 * in the first half of its time slice. */
static int share_may_take(Share *s) {
    share_look(s);
    return !share_on(s) || s->look - s->slice < s->run / 2;
}

/* A worker on the caller's CPU moves to the caller's other CPUs: beside
 * the caller it only takes the caller's time. (The kernel puts a woken
 * thread beside the thread that woke it when no CPU is idle: with another
 * program on the other CPU, the worker woke beside the caller.) */
static void share_move(void) {
    int c = atomic_load_explicit(&pool.caller_cpu, memory_order_relaxed);
    if (c < 0 || sched_getcpu() != c) return;
    cpu_set_t m = pool.cpus;
    CPU_CLR(c, &m);
    if (CPU_COUNT(&m) > 0) sched_setaffinity(0, sizeof m, &m);
}

/* runs chunks of job gen until none is left (or, for a worker that shares
 * its core, sh, until its time for them is up); returns how many it ran */
static long pool_chunks(uint32_t gen, int from_back, Share *sh) {
    uint32_t c;
    long ran = 0;
    while ((!sh || share_may_take(sh)) && pool_claim(gen, from_back, &c)) {
        long lo = (long)c * pool.grain, hi = lo + pool.grain < pool.n ? lo + pool.grain : pool.n;
        pool.fn(pool.ctx, lo, hi);
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
        ran++;
    }
    return ran;
}

/* The length of the next period the caller works alone, the last one
 * `period` long and ended at `ended`: held up again soon after it ended
 * (the other program is still there), twice as long, up to
 * POOL_SOLO_MAX_NS, so under lasting contention the trials cost less and
 * less; otherwise POOL_SOLO_NS again. */
static long next_period(long period, long ended, long now) {
    int again = ended && now - ended < 2 * period;
    return again ? (2 * period < POOL_SOLO_MAX_NS ? 2 * period : POOL_SOLO_MAX_NS) : POOL_SOLO_NS;
}

static void *pool_worker(void *arg) {
    int id = (int)(intptr_t)arg;
    in_job = 1;                                   /* a worker never starts a nested job */
    uint32_t seen = ST_GEN(atomic_load(&pool.state));
    Share sh = {.run = POOL_RUN_NS};
    for (;;) {
        uint64_t s;
        int spins = 0;
        long t0 = now_ns();
        while (ST_GEN(s = atomic_load_explicit(&pool.state, memory_order_acquire)) == seen) {
            if (++spins % 64 || now_ns() - t0 < POOL_SPIN_NS) {
                CPU_RELAX();
                continue;
            }
            /* sleep until the next job: re-check after announcing ourselves,
             * so a job published meanwhile is not missed (and first look
             * at the clocks: it may have lost its core while it spun) */
            share_look(&sh);
            atomic_fetch_add(&pool.sleepers, 1);
            uint32_t w = atomic_load(&pool.wake);
            if (ST_GEN(atomic_load(&pool.state)) == seen)
                syscall(SYS_futex, &pool.wake, FUTEX_WAIT_PRIVATE, w, NULL, NULL, 0);
            atomic_fetch_sub(&pool.sleepers, 1);
            share_wake(&sh);
            t0 = now_ns();
        }
        seen = ST_GEN(s);
        if (id < atomic_load(&pool.active)) {
            share_look(&sh);
            share_move();
            pool_chunks(seen, 1, share_on(&sh) ? &sh : NULL);
        }
    }
    return NULL;
}

int parallel_threads(void) { return in_job ? 1 : omp_get_max_threads(); }

long parallel_times_shared(void) { return atomic_load(&times_shared); }

/* A child of fork() has only the thread that forked: no workers. It starts
 * its own the first time it needs them (Check runs every test in a forked
 * child; fork is called outside parallel_run, so the lock is free). */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_after_fork(void) {
    pool.started = 0;
    pool.win_wall = 0;
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
    /* Straggler guard: when the workers did not pay over the last window
     * (below), the caller does the jobs alone for a while (the workers
     * sleep and leave their cores to whatever took them), then tries again. */
    if (pool.solo_until && now_ns() < pool.solo_until) {
        pool.win_wall = 0;                        /* the window counts shared jobs only */
        pthread_mutex_unlock(&pool.lock);
        fn(ctx, 0, n);
        return;
    }
    if (!pool.started) sched_getaffinity(0, sizeof pool.cpus, &pool.cpus);
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
    pool.fn = fn;
    pool.ctx = ctx;
    atomic_store_explicit(&pool.caller_cpu, sched_getcpu(), memory_order_relaxed);   /* share_move */
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
    long mine = pool_chunks(gen, 0, NULL);
    long per_chunk = mine > 0 ? (now_ns() - w0) / mine : 0;   /* this thread's time per chunk */
    in_job = 0;
    /* wait only for chunks a worker has taken and not finished */
    long waited = 0;
    if (atomic_load_explicit(&pool.done, memory_order_acquire) < nch) {
        long t0 = now_ns();
        for (int spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < nch; spins++)
            wait_turn(spins);
        waited = now_ns() - t0;
    }
    /* Do the workers pay? Over a window of jobs this thread shared (at
     * least POOL_WINDOW chunks and POOL_AGAIN_NS), two signs that they do
     * not, and then this thread works alone for a while (go_solo):
     *   - it waited for the workers' chunks longer than they would have
     *     taken it (a worker lost its core holding one: a time slice);
     *   - it ran less than POOL_SHARE_MIN of the wall time: it shares its
     *     own core, with a worker (whose spinning then takes its time) or
     *     with another program. */
    if (!pool.win_wall || !pthread_equal(pool.win_owner, pthread_self())) {
        pool.win_all = pool.win_waited = pool.win_saved = 0;
        pool.win_wall = now_ns(), pool.win_cpu = thread_cpu_ns(), pool.win_owner = pthread_self();
    }
    pool.win_all += nch;
    pool.win_waited += waited;
    pool.win_saved += (nch - mine) * per_chunk;
    long wall = now_ns();
    if (pool.win_all >= POOL_WINDOW && wall - pool.win_wall >= POOL_AGAIN_NS) {
        long cpu = thread_cpu_ns();
        double ran = (double)(cpu - pool.win_cpu) / (double)(wall - pool.win_wall);
        if (pool.win_waited > pool.win_saved || ran < POOL_SHARE_MIN) go_solo();
        pool.win_all = pool.win_waited = pool.win_saved = 0;
        pool.win_wall = wall, pool.win_cpu = cpu;
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

long parallel_times_shared(void) { return 0; }

void parallel_in_turn(long n, long h, ParallelFn fn, void *ctx) {
    (void)h;
    if (n > 0) fn(ctx, 0, n);
}

void parallel_run(long n, long grain, ParallelFn fn, void *ctx) {
    (void)grain;
    if (n > 0) fn(ctx, 0, n);
}
#endif
