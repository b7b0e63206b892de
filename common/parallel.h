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

/* Caps OpenMP's thread count at PARALLEL_MAX_THREADS_PER_CPU threads per
 * processor before the first parallel region: OMP_NUM_THREADS=100000 would
 * otherwise make libgomp try to start 100000 threads (and crash when their
 * stacks do not fit). Says so on stderr, naming prog, when it lowers the
 * count; returns the count in use (1 without OpenMP). cli_parse calls it. */
#define PARALLEL_MAX_THREADS_PER_CPU 4
int parallel_cap_threads(const char *prog);

#endif
