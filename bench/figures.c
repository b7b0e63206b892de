/* figures.c - the bench's printed figures and the ratios made of them
 * (figures.h says the rule). No timing here: bench.c measures, this file
 * prints, and tests/check_bench.c reads what it printed back. */
#include "figures.h"

#include <stdlib.h>

double fig_shown(double x, int decimals) {
    char s[64];
    snprintf(s, sizeof s, "%.*f", decimals, x);
    return strtod(s, NULL);
}

double fig_ratio(double a, double b, int decimals) {
    double sb = fig_shown(b, decimals);
    return sb != 0 ? fig_shown(a, decimals) / sb : 0;
}

double blas_run_peak(const BlasRun *r) { return r->peak_before > r->peak_after ? r->peak_before : r->peak_after; }

/* "477.1 ( 89%)": a GFLOP/s figure and its share of the peak, as printed */
static void figure_pct(FILE *f, double x, double peak) {
    fprintf(f, "%6.1f (%3.0f%%)", x, 100 * fig_ratio(x, peak, 1));
}

/* 1 (and an ERROR line) when x, as printed, is above the peak as printed */
static int above_peak(FILE *f, const BlasRun *r, const char *shape, const char *who, double x) {
    if (fig_shown(x, 1) <= fig_shown(blas_run_peak(r), 1)) return 0;
    fprintf(f, "  ERROR: %s, %s: %s %.1f GFLOP/s is above the FMA peak of the same process, %.1f\n", r->label, shape,
            who, x, blas_run_peak(r));
    return 1;
}

int gemm_table_write(FILE *f, int threads, const char *const *names, int n, const BlasRun *runs, int have_blas) {
    int nset = have_blas ? GEMM_SETTINGS : 1;
    fprintf(f, "\ngemm C = op(A) op(B)%s, %d thread%s%s: GFLOP/s (%% of the FMA peak of the same process)\n",
            have_blas ? " vs OpenBLAS cblas_sgemm" : "", threads, threads > 1 ? "s" : "", have_blas ? " each" : "");
    if (!have_blas)
        fprintf(f, "  OpenBLAS columns left out: this bench was built without OpenBLAS (no libopenblas-dev;\n"
                   "  `make bench` installs it where it may: sudo apt-get install -y libopenblas-dev)\n");
    for (int k = 0; k < nset; k++) {
        const BlasRun *r = &runs[k];
        if (r->not_run) {
            fprintf(f, "  %s\n", r->not_run);
            continue;
        }
        if (!r->ok) {
            fprintf(f, "  %-28s child failed: no figures\n", r->label);
            continue;
        }
        fprintf(f, "  %-28s %s%s%sFMA peak %.1f GFLOP/s (%.1f before its figures, %.1f after)\n", r->label,
                have_blas ? "OpenBLAS chose the " : "", have_blas ? r->core : "", have_blas ? " kernels; " : "",
                blas_run_peak(r), r->peak_before, r->peak_after);
    }
    int last = 0;   /* the last block shown: its label is not padded */
    for (int k = 0; k < nset; k++)
        if (!runs[k].not_run) last = k;
    fprintf(f, "  %-40s", "");
    for (int k = 0; k < nset; k++)
        if (!runs[k].not_run) fprintf(f, " | %-*s", k == last ? 0 : have_blas ? 34 : 13, runs[k].label);
    fprintf(f, "\n  %-40s", "shape (M x K . K x N)");
    for (int k = 0; k < nset; k++)
        if (!runs[k].not_run) {
            if (have_blas) fprintf(f, " | %13s %13s %6s", "ours", "OpenBLAS", "ratio");
            else fprintf(f, " | %13s", "ours");
        }
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "  %-40s", names[i]);
        for (int k = 0; k < nset; k++) {
            const BlasRun *r = &runs[k];
            if (r->not_run) continue;
            fprintf(f, " | ");
            if (!r->ok) {
                if (have_blas) fprintf(f, "%13s %13s %6s", "-", "-", "-");
                else fprintf(f, "%13s", "-");
                continue;
            }
            figure_pct(f, r->ours[i], blas_run_peak(r));
            if (!have_blas) continue;
            fprintf(f, " ");
            figure_pct(f, r->blas[i], blas_run_peak(r));
            fprintf(f, " %5.2fx", fig_ratio(r->ours[i], r->blas[i], 1));
        }
        fprintf(f, "\n");
    }
    if (have_blas)
        fprintf(f, "  ratio = ours / OpenBLAS as printed in its block (> 1: ours is faster); a block's figures\n"
                   "  and its FMA peak come from one process, measured one after the other\n");
    int bad = 0;
    for (int k = 0; k < nset; k++) {
        const BlasRun *r = &runs[k];
        if (r->not_run || !r->ok) continue;
        for (int i = 0; i < n; i++) {
            bad += above_peak(f, r, names[i], "ours", r->ours[i]);
            if (have_blas) bad += above_peak(f, r, names[i], "OpenBLAS", r->blas[i]);
        }
    }
    if (bad)
        fprintf(f, "  (no multiply can beat the FMA peak: that process's peak runs were slowed, by another\n"
                   "  program on a core or by the VM's host running both vCPUs on one physical core; its\n"
                   "  %% of peak are meaningless: rerun on a quiet machine)\n");
    return bad;
}
