/* figures.h - how the bench prints its figures, ratios and "% of peak"
 * (bench/figures.c), kept apart from the timing so a test can check them
 * (tests/check_bench.c).
 *
 * The rule: a ratio is made of figures printed beside it. So it is computed
 * from the two figures as they are printed (rounded to the decimals shown):
 * a reader who divides the printed numbers gets the printed ratio. */
#ifndef BENCH_FIGURES_H
#define BENCH_FIGURES_H

#include <stdio.h>

/* x as printf("%.*f", decimals, x) shows it */
double fig_shown(double x, int decimals);
/* shown(a) / shown(b), each shown with `decimals`; 0 when shown(b) is 0 */
double fig_ratio(double a, double b, int decimals);

/* ---- the gemm table ----------------------------------------------------------
 * One block per OpenBLAS setting ([A] env as set, [B] CORETYPE/L2_SIZE
 * unset, [C] CORETYPE=SkylakeX), each measured in one process: our gemm,
 * OpenBLAS's, and the FMA peak of that process (best of a measurement
 * before its gemm figures and one after). */
#define GEMM_MAX_SHAPES 16
#define GEMM_SETTINGS 3

typedef struct {
    const char *label;    /* "[A] env as set"                                  */
    const char *env;      /* prefix for the child's command; NULL: this process */
    const char *not_run;  /* why this setting was not run; NULL: it was        */
    char core[64];        /* the kernels OpenBLAS said it chose                 */
    double ours[GEMM_MAX_SHAPES], blas[GEMM_MAX_SHAPES];   /* GFLOP/s          */
    double peak_before, peak_after;   /* FMA peak (GFLOP/s), this process       */
    int ok;               /* 1: the figures above were measured                 */
} BlasRun;

/* the FMA peak a block's figures are compared with: the better of before
 * and after (a run can only be slowed by other programs, never sped up) */
double blas_run_peak(const BlasRun *r);

/* Writes the table to f: `n` shapes named names[i], the GEMM_SETTINGS
 * blocks of runs[] (have_blas 0: ours only, one block). Each block prints
 * ours, OpenBLAS and their ratio from that one process, every figure also
 * as % of that process's FMA peak. A figure above its block's peak (as
 * printed) gets an ERROR line below the table. Returns how many did. */
int gemm_table_write(FILE *f, int threads, const char *const *names, int n, const BlasRun *runs, int have_blas);

#endif
