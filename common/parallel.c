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
