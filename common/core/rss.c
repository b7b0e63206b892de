/* rss.c - resident memory of this process (rss.h). */
#include "core/rss.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

double rss_now(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    int ok = f && fscanf(f, "%ld %ld", &pages, &resident) == 2;
    if (f) fclose(f);
    if (ok) return (double)resident * sysconf(_SC_PAGE_SIZE);
    return rss_peak();
}

double rss_peak(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss * 1024.0;   /* Linux counts it in KiB */
}
