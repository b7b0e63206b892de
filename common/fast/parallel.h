/* parallel.h - the library's OpenMP switches, in one place.
 *
 * PARALLEL_FOR_IF(cond) before a for loop: split its iterations over the
 * threads when cond holds (a work-size threshold: starting a team of threads
 * costs microseconds on an idle machine and a scheduler time slice on a busy
 * one, so small loops stay on one thread). Every user gives each iteration
 * its own outputs, so results do not depend on the thread count.
 * SIMD before an element-wise loop: the iterations are independent, so the
 * compiler may use vector instructions (at -O2 GCC only vectorises loops
 * whose trip count it knows; our rows are d_model or d_ff long).
 * Without OpenMP (make NO_OMP=1) both become plain code: no "unknown
 * pragma" warning, and the condition is still evaluated (and so "used").
 */
#ifndef PARALLEL_H
#define PARALLEL_H

#ifdef _OPENMP
#define OMP_PRAGMA(x) _Pragma(#x)
#define PARALLEL_FOR_IF(cond) OMP_PRAGMA(omp parallel for schedule(static) if (cond))
#define SIMD OMP_PRAGMA(omp simd)
#else
#define PARALLEL_FOR_IF(cond) (void)(cond);
#define SIMD
#endif

/* ---- the work-sharing pool --------------------------------------------------
 * parallel_run(n, grain, fn, ctx) calls fn(ctx, lo, hi) on chunks [lo, hi)
 * of [0, n), each at most `grain` long (the last one shorter), and returns
 * when every chunk is done. The chunks are not dealt out in advance: the
 * calling thread and the pool's workers each take the next undone chunk
 * (one atomic counter) until none is left. So
 *   - a worker that is slow to wake (its core busy with another program)
 *     simply takes no chunk: the caller does them all and never waits for
 *     a thread that has not started (an OpenMP region's closing barrier
 *     waits for every thread of the team, however late it arrives);
 *   - a faster core does more chunks, a slower one fewer;
 *   - a worker whose core another program shares takes chunks only early
 *     in each of its time slices, and leaves the rest to the caller; when
 *     the workers cost the caller more than they save, or the caller
 *     shares its own core, the caller works alone for a while (parallel.c).
 * The caller waits only for chunks already taken. Workers spin briefly for
 * the next job (steps call many small jobs back to back), then sleep.
 * Runs fn(ctx, 0, n) in the caller, in one piece, when n <= grain, when one
 * thread is asked for (OMP_NUM_THREADS=1, omp_set_num_threads(1), or a
 * build without OpenMP) and inside another parallel_run (no nesting).
 * Every caller makes fn's result independent of how [0, n) is cut, so the
 * answer does not depend on the thread count or on who took which chunk.
 * The thread count is OpenMP's (omp_get_max_threads), read at every call. */
typedef void (*ParallelFn)(void *ctx, long lo, long hi);
void parallel_run(long n, long grain, ParallelFn fn, void *ctx);

/* parallel_in_turn(n, h, fn, ctx): fn(ctx, 0, h), then fn(ctx, h, n), the
 * second only once the first has returned: for work that must run in order
 * (a sum down the rows) over rows two threads wrote. The caller does the
 * first part and a worker, if one is free, the second, so each reads the
 * rows it wrote from its own cache. Otherwise the caller does both. */
void parallel_in_turn(long n, long h, ParallelFn fn, void *ctx);

/* How many times a worker began to share its core with another program
 * (it lost the core twice within 20 ms): from then on it takes chunks
 * only early in each of its time slices (parallel.c, "a worker that
 * shares its core"). For the tests: the path they mean to test ran. */
long parallel_times_shared(void);

/* threads parallel_run would use now (1 inside a parallel_run) */
int parallel_threads(void);

/* asks for n threads from now on (omp_set_num_threads; a no-op without OpenMP) */
void parallel_set_threads(int n);

/* Caps OpenMP's thread count at PARALLEL_MAX_THREADS_PER_CPU threads per
 * processor before the first parallel region: OMP_NUM_THREADS=100000 would
 * otherwise make libgomp try to start 100000 threads (and crash when their
 * stacks do not fit). Says so on stderr, naming prog, when it lowers the
 * count; returns the count in use (1 without OpenMP). cli_parse calls it. */
#define PARALLEL_MAX_THREADS_PER_CPU 4
int parallel_cap_threads(const char *prog);

#endif
