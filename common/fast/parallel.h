/* parallel.h - the library's threads, in one place: a small pool of POSIX
 * threads that shares a job's chunks, the thread count, and OpenMP's simd.
 *
 * SIMD before an element-wise loop: the iterations are independent, so the
 * compiler may use vector instructions (at -O2 GCC only vectorises loops
 * whose trip count it knows; our rows are d_model or d_ff long). Without
 * OpenMP (make NO_OMP=1) it is nothing: no "unknown pragma" warning.
 * SIMD_SUM(s) before a loop that only adds into s: the same, the sum kept
 * in vector lanes and the lanes added at the end (another order of the
 * additions than the plain chain: equal up to rounding).
 */
#ifndef PARALLEL_H
#define PARALLEL_H

#ifdef _OPENMP
#define OMP_PRAGMA(x) _Pragma(#x)
#define SIMD OMP_PRAGMA(omp simd)
#define SIMD_SUM(s) OMP_PRAGMA(omp simd reduction(+:s))
#else
#define SIMD
#define SIMD_SUM(s)
#endif

/* ---- the work-sharing pool (parallel.c) ------------------------------------
 * parallel_run(n, grain, fn, ctx) calls fn(ctx, lo, hi) on chunks [lo, hi)
 * of [0, n), each at most `grain` long (the last one shorter), and returns
 * when every chunk is done. The chunks are not dealt out in advance: the
 * calling thread and the pool's workers each take the next undone chunk
 * (one atomic word holds the range not yet taken) until none is left, the
 * caller from the front and the workers from the back. So a worker that is slow to start (its core
 * busy with another program) simply takes fewer chunks, or none, and the
 * caller waits only for chunks a worker has taken and not yet finished.
 * Runs fn(ctx, 0, n) in the caller, in one piece, when n <= grain, when one
 * thread is asked for (OMP_NUM_THREADS=1, parallel_set_threads(1), a build
 * without OpenMP unless told otherwise) and inside another parallel_run (no
 * nesting). Every caller makes fn's result independent of how [0, n) is
 * cut, so the answer does not depend on the thread count or on who took
 * which chunk. The thread count is parallel_threads(), read at every call. */
typedef void (*ParallelFn)(void *ctx, long lo, long hi);
void parallel_run(long n, long grain, ParallelFn fn, void *ctx);

/* parallel_in_turn(n, h, fn, ctx): fn(ctx, 0, h), then fn(ctx, h, n), the
 * second only once the first has returned: for work that must run in order
 * (a sum down the rows) over rows two threads wrote. The caller does the
 * first part and a worker, if one is free, the second, so each reads the
 * rows it wrote from its own cache. Otherwise the caller does both. */
void parallel_in_turn(long n, long h, ParallelFn fn, void *ctx);

/* threads parallel_run would use now (1 inside a parallel_run): the
 * pool's own count, set by parallel_set_threads, at first OMP_NUM_THREADS
 * (its first value) or else one per CPU this process may use, as OpenMP
 * would count; without OpenMP OMP_NUM_THREADS or else 1, until
 * parallel_set_threads says otherwise.
 * The OpenMP runtime is never asked: omp_set_num_threads does not change it. */
int parallel_threads(void);

/* asks for n threads from now on (n < 1: 1) */
void parallel_set_threads(int n);

/* Caps the thread count at PARALLEL_MAX_THREADS_PER_CPU threads per
 * processor: OMP_NUM_THREADS=100000 once made libgomp try to start 100000
 * threads (and crash when their stacks did not fit). Says so on stderr,
 * naming prog, when it lowers the count; returns the count in use.
 * cli_parse calls it. */
#define PARALLEL_MAX_THREADS_PER_CPU 4
int parallel_cap_threads(const char *prog);

#endif
