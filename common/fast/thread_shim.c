/* thread_shim.c - the thread pool's platform calls (thread_shim.h): Linux's
 * version of each beside the portable fallback. The only file of the
 * library that asks for _GNU_SOURCE or names a CPU. */
#if defined(__linux__) && !defined(AIYN_PORTABLE_THREADS)
#define SHIM_AFFINITY 1
#define _GNU_SOURCE   /* sched_getcpu, sched_setaffinity, cpu_set_t */
#else
#define SHIM_AFFINITY 0
#endif
#include "fast/thread_shim.h"

#include <sched.h>    /* sched_yield (POSIX); the affinity calls (Linux) */
#include <unistd.h>   /* sysconf */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

int thread_shim_has_affinity(void) { return SHIM_AFFINITY; }

/* ---- spinning ------------------------------------------------------------ */
void thread_shim_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();                          /* a spinning core lets its twin run */
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void thread_shim_yield(void) { sched_yield(); }

/* ---- how many CPUs -------------------------------------------------------- */
/* the CPUs online: glibc, macOS and the BSDs all answer _SC_NPROCESSORS_ONLN */
static int cpus_online(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1 << 20 ? (int)n : -1;
}

#if SHIM_AFFINITY
int thread_shim_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return cpus_online();
}
#else
int thread_shim_cpu_count(void) { return cpus_online(); }
#endif

/* ---- which CPU (Linux) --------------------------------------------------- */
#if SHIM_AFFINITY
/* written by thread_shim_save_cpus before the threads that read it start */
static cpu_set_t saved_cpus;
static int saved_ok;

int thread_shim_cpu(void) { return sched_getcpu(); }

void thread_shim_save_cpus(void) {
    saved_ok = sched_getaffinity(0, sizeof saved_cpus, &saved_cpus) == 0;
}

void thread_shim_step_off(int cpu) {
    if (cpu < 0 || !saved_ok || sched_getcpu() != cpu || !CPU_ISSET(cpu, &saved_cpus) ||
        CPU_COUNT(&saved_cpus) < 2)
        return;
    cpu_set_t others = saved_cpus;
    CPU_CLR(cpu, &others);
    if (sched_setaffinity(0, sizeof others, &others) == 0)    /* moves it now */
        sched_setaffinity(0, sizeof saved_cpus, &saved_cpus);
}
#else
int thread_shim_cpu(void) { return -1; }

void thread_shim_save_cpus(void) {}

void thread_shim_step_off(int cpu) { (void)cpu; }
#endif
