/* thread_shim.h - the thread pool's few calls that are not POSIX threads or
 * C11 atomics, in one place, each with a portable fallback.
 *
 * parallel.c is written with <pthread.h>, <stdatomic.h> and <time.h> only.
 * What it needs beyond them is here:
 *   - a hint for a core that spins (x86's `pause`, arm64's `yield`), so a
 *     busy wait does not starve the other thread of its core, and a way to
 *     give the core up (sched_yield, POSIX);
 *   - how many CPUs there are: the pool's default thread count;
 *   - on Linux, which CPU a thread runs on and a way to move it off one
 *     (sched_getcpu, sched_setaffinity), for the one step that needs them: a
 *     worker the scheduler put on the caller's own CPU steps aside
 *     (parallel.c, "a worker beside the caller", says why).
 * Where the platform has no such call (macOS: no CPU number, no affinity
 * that moves a thread now) the fallback does nothing: thread_shim_cpu says
 * -1 and thread_shim_step_off returns at once. The pool is correct without
 * them, only slower beside a busy program.
 *
 * Build with -DAIYN_PORTABLE_THREADS to get the fallbacks on Linux too: how
 * a Linux machine tests the macOS branch, e.g.
 *     make BUILD=build/portable MPI=0 CC="gcc -DAIYN_PORTABLE_THREADS"
 * (tests/check_parallel.c's case "Portable" checks which branch it got). */
#ifndef THREAD_SHIM_H
#define THREAD_SHIM_H

/* 1 where this build moves threads between CPUs (Linux), 0 where the
 * fallbacks are in use */
int thread_shim_has_affinity(void);

/* one turn of a spin: tells the core this thread is waiting */
void thread_shim_pause(void);

/* gives the core up to another thread that is ready to run */
void thread_shim_yield(void);

/* how many CPUs this process may run on (Linux: its affinity mask, as
 * OpenMP counts them; elsewhere the CPUs online), or -1 if unknown */
int thread_shim_cpu_count(void);

/* the CPU this thread runs on now, or -1 where the platform does not say */
int thread_shim_cpu(void);

/* Remembers the CPUs this thread may run on: the set thread_shim_step_off
 * moves threads within. Call it before starting the threads that use it,
 * or while none of them is in thread_shim_step_off (parallel.c: before the
 * pool's first worker). */
void thread_shim_save_cpus(void);

/* If this thread runs on CPU `cpu` and the saved set has others, moves it
 * onto them, then allows the whole saved set again (the thread does not
 * stay pinned). Nothing when cpu < 0 or without affinity. */
void thread_shim_step_off(int cpu);

#endif
