/* clock.c - the one clock (clock.h). */
#include "core/clock.h"

#include <time.h>

static double seconds(clockid_t which) {
    struct timespec ts;
    clock_gettime(which, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double clock_wall_s(void) { return seconds(CLOCK_MONOTONIC); }
double clock_cpu_s(void) { return seconds(CLOCK_PROCESS_CPUTIME_ID); }
double clock_thread_s(void) { return seconds(CLOCK_THREAD_CPUTIME_ID); }
