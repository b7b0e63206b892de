/* table.c - chapter 12's rows of Table 3, ours beside the paper's, and
 * section 3: the table of this run's rows, table.md and variations.dat
 * (written together or neither), variations.gp/.png (variations.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "io/cli.h"
#include "io/plot.h"
#include "io/show.h"
#include "variations.h"
#include "verdict.h"

/* The rows of Table 3 (variations.h's Row says what each column is). */
const Row VAR_ROWS[N_ROWS] = {
    {"base", "base", E_BASE, 0, "base", 4.92, 25.8, 65},
    {"A", "h=1", E_HEADS, 1, "h=1 d_k=512", 5.29, 24.9, 0},
    {"A", "h=4", E_HEADS, 4, "h=4 d_k=128", 5.00, 25.5, 0},
    {"A", "h=16", E_HEADS, 16, "h=16 d_k=32", 4.91, 25.8, 0},
    {"B", "d_k/2", E_DK_HALF, 0.5f, "d_k=32", 5.01, 25.4, 60},
    {"C", "N/2", E_N, 0.5f, "N=4", 5.19, 25.3, 50},
    {"C", "2N", E_N, 2, "N=8", 4.88, 25.5, 80},
    {"C", "d_model/2", E_DMODEL, 0.5f, "d_model=256", 5.75, 24.5, 28},
    {"C", "2d_model", E_DMODEL, 2, "d_model=1024", 4.66, 26.0, 168},
    {"C", "d_ff/2", E_DFF, 0.5f, "d_ff=1024", 5.12, 25.4, 53},
    {"C", "2d_ff", E_DFF, 2, "d_ff=4096", 4.75, 26.2, 90},
    {"D", "P_drop=0", E_DROP, 0.0f, "P_drop=0.0", 5.77, 24.6, 0},
    {"D", "P_drop=0.2", E_DROP, 0.2f, "P_drop=0.2", 4.95, 25.5, 0},
    {"D", "eps_ls=0", E_LS, 0.0f, "eps_ls=0.0", 4.67, 25.3, 0},
    {"D", "eps_ls=0.2", E_LS, 0.2f, "eps_ls=0.2", 5.47, 25.7, 0},
    {"E", "learned PE", E_POS, 1, "pos. embedding", 4.92, 25.7, 0},
};
_Static_assert(sizeof VAR_ROWS / sizeof VAR_ROWS[0] == N_ROWS, "N_ROWS counts VAR_ROWS");

/* ---- section 3: the table ---------------------------------------------------------------- */
static void write_or_die(FioWriter *w) {
    char err[512];
    if (fio_commit(w, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        exit(1);
    }
}

/* table.md and variations.dat are one table in two forms: both are
 * written or neither. Both temporaries are flushed and synced first (a
 * full disk shows here, while neither file is replaced); on a failure
 * both temporaries go, the files of the run before stay, and the run
 * exits 1. Only then are they renamed, one after the other. */
static void write_both_or_die(FioWriter *a, FioWriter *b) {
    FioWriter *w[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        errno = 0;
        int failed = fflush(w[i]->f) != 0 || ferror(w[i]->f), e = errno;
        if (!failed && fsync(fileno(w[i]->f)) != 0 && errno != EINVAL && errno != EROFS) failed = 1, e = errno;
        if (!failed) continue;
        char pa[600], pb[600];
        fio_escape(pa, sizeof pa, a->path, (size_t)-1), fio_escape(pb, sizeof pb, b->path, (size_t)-1);
        fprintf(stderr, "%s: writing '%s' failed: %s; '%s' and '%s' were left as they were\n", PROG,
                i ? pb : pa, strerror(e ? e : EIO), pa, pb);
        fio_abort(a), fio_abort(b);
        exit(1);
    }
    char err[512];
    if (fio_commit(a, err, sizeof err)) fio_abort(b);
    else if (!fio_commit(b, err, sizeof err)) return;
    fprintf(stderr, "%s: %s\n", PROG, err);
    exit(1);
}

/* variations.gp: each row's difference from its base, ours beside the
 * paper's on ONE axis per column (PPL, BLEU), so a step of 0.1 is as long
 * for both; a bar per row, nothing joins rows (they are categories, not a
 * series). Behind ours: the base seeds' band (a row inside it is "=") and
 * twice the band (a direction there is weak); the base seeds' own
 * differences from their mean are the dots on the base row. Reads
 * variations.dat: block 0 one line per row, block 1 one per base seed. */
static void write_plot(const Opts *o, const VBase *b, int n_rows, int short_run) {
    char path[1100], err[512], what[160];
    FioWriter w;
    snprintf(path, sizeof path, "%s/variations.gp", o->out);
    if (fio_create(&w, path, err, sizeof err)) cli_fail(PROG, "%s", err);
    FILE *f = w.f;
    if (short_run)
        snprintf(what, sizeof what, "too short to compare: the base's dev BLEU %.2f is under %g", b->bleu,
                 V_SHORT_BLEU);
    else if (b->n < 2)
        snprintf(what, sizeof what, "one base seed: no spread to judge by, every direction is weak");
    else
        snprintf(what, sizeof what, "dark band: the %d base seeds' spread (a row inside it is the same as base), "
                 "light band: twice it (weak)", b->n);
    int height = 190 + 34 * n_rows;
    fprintf(f, "# variations.gp - written by 12_variations: each row minus its base, ours beside the paper's\n"
               "set terminal pngcairo size 1400,%d noenhanced font 'Sans,11'\nset output 'variations.png'\n"
               "set multiplot layout 1,2 title \"Table 3 in miniature: each row minus its base, ours beside the "
               "paper's, on one scale\\nblue: ours, %d steps, one seed a row (grey: not converged); orange: the "
               "paper's, 100K steps; dots: our base seeds\\n%s\" font 'Sans,12'\n",
               height < 440 ? 440 : height, o->steps, what);
    /* rows top to bottom; the legend is the title's second line */
    fprintf(f, "set yrange [%d.5:-0.5]\nset ytics scale 0\nset grid xtics lc rgb '#bbbbbb'\n"
               "set yzeroaxis lt -1 lw 1.5\nset style fill solid 0.9 noborder\nunset key\n"
               "set offsets graph 0.14, graph 0.14, 0, 0\nset lmargin 14\nset tmargin 3\n", n_rows - 1);
    static const char *const col[2][4] = {
        /* title, x label, ours' column, the paper's column */
        {"dev PPL, row - base (lower is better)", "ours per subword, the paper per wordpiece", "6", "8"},
        {"dev BLEU, row - base (higher is better)", "ours greedy, the paper beam search", "7", "9"}};
    for (int c = 0; c < 2; c++) {
        double band = c ? b->band_bleu : b->band_ppl;
        const char *fmt = c ? "%+.2f" : "%+.3f", *ou = col[c][2], *pa = col[c][3];
        fprintf(f, "unset object\n");
        if (b->n > 1)
            fprintf(f, "set object 1 rect from -%.4f, graph 0 to %.4f, graph 1 fc rgb '#ececec' fs solid "
                       "noborder behind\nset object 2 rect from -%.4f, graph 0 to %.4f, graph 1 fc rgb '#c8c8c8' "
                       "fs solid noborder behind\n", V_WEAK_X * band, V_WEAK_X * band, band, band);
        fprintf(f, "set title '%s'\nset xlabel '%s'\n", col[c][0], col[c][1]);
        /* a bar from 0 to the difference: centre d/2, half-width |d|/2; ours
         * above the row's line, the paper's below; rows that had not
         * converged in grey; each bar's value at its end */
        fprintf(f, "plot 'variations.dat' index 0 using ($%s/2):($0-0.19):(abs($%s)/2):(0.17):($10 > 0 ? 0x1f77b4 : "
                   "0xaaaaaa):ytic(1) with boxxyerror lc rgb variable, \\\n"
                   "     '' index 0 using ($%s/2):($0+0.19):(abs($%s)/2):(0.17) with boxxyerror lc rgb '#ff7f0e', "
                   "\\\n", ou, ou, pa, pa);
        for (int k = 0; k < 2; k++) {   /* value labels, ours then the paper's (none on the base row) */
            const char *v = k ? pa : ou, *dy = k ? "+0.19" : "-0.19";
            fprintf(f, "     '' index 0 using ($0 > 0 && $%s >= 0 ? $%s : 1/0):($0%s):(sprintf('%s', $%s)) with "
                       "labels left offset 0.4,0 font 'Sans,9' notitle, \\\n"
                       "     '' index 0 using ($0 > 0 && $%s < 0 ? $%s : 1/0):($0%s):(sprintf('%s', $%s)) with "
                       "labels right offset -0.4,0 font 'Sans,9' notitle, \\\n", v, v, dy, fmt, v, v, v, dy, fmt, v);
        }
        fprintf(f, "     '' index 1 using %d:(0) with points pt 7 ps 0.8 lc rgb 'black'\n",
                c ? 3 : 2);
    }
    fprintf(f, "unset multiplot\n");
    write_or_die(&w);
    if (plot_render(o->out, "variations")) printf("  [plot] %s/variations.png (+ .dat, .gp)\n", o->out);
}

/* "- -? yes": the paper's direction, ours ('?' when weak), whether they
 * agree; "slow" for a row not converged (shown, not counted) */
static void dir_cell(char *s, size_t n, VDir v, int converged) {
    snprintf(s, n, "%c %c%c %s", v_dir_char(v.paper), v_dir_char(v.ours), v.weak ? '?' : ' ',
             !converged ? "slow" : v.agree ? "yes" : "no");
}

/* Is key one of this run's jobs? */
static int job_of(const Job *jobs, int n, const char *key) {
    for (int k = 0; k < n; k++)
        if (!strcmp(jobs[k].key, key)) return 1;
    return 0;
}

/* The table of this run's rows (--rows, --seeds): rows of other runs kept
 * in the same results file are not in it. */
void var_section_table(const Opts *o, const Results *res, const Job *jobs, int n_jobs) {
    show_section("3. Ours beside the paper's Table 3");
    double sp[MAX_SEEDS], sb[MAX_SEEDS];
    int nb = 0;
    for (int s = 0; s < MAX_SEEDS; s++) {
        char key[32];
        snprintf(key, sizeof key, "base#%d", s + 1);
        const Result *r = job_of(jobs, n_jobs, key) ? var_results_find(res, key) : NULL;
        if (r) sp[nb] = r->ppl, sb[nb] = r->bleu, nb++;
    }
    if (!nb) {
        printf("no base row finished with this budget yet: run --rows base for the comparison\n");
        return;
    }
    VBase b;
    vbase_init(&b, sp, sb, nb);
    int short_run = vbase_too_short(&b);
    printf("base, %d seed%s: dev PPL %.3f (range %.3f..%.3f), dev BLEU %.2f (range %.2f..%.2f)\n", nb,
           nb == 1 ? "" : "s", b.ppl, b.lo_ppl, b.hi_ppl, b.bleu, b.lo_bleu, b.hi_bleu);
    if (short_run)
        printf("too short to compare with the paper: the base's dev BLEU %.2f is under %g, so it has not\n"
               "learned the task yet, and rows would differ in how fast they start, not where they end;\n"
               "train longer (more --steps) for a table worth comparing\n", b.bleu, V_SHORT_BLEU);
    else
        printf("direction against base: + better, - worse, = same; paper: = within PPL +-%.3f, BLEU +-%.2f\n",
               V_PAPER_SAME_PPL, V_PAPER_SAME_BLEU);
    if (!short_run && nb > 1)
        printf("ours: = within the farthest base seed's distance from the mean (PPL +-%.3f, BLEU +-%.2f),\n"
               "? = weak, within twice that (each row has one seed)\n", b.band_ppl, b.band_bleu);
    else if (!short_run)
        printf("ours: one base seed, so no spread to judge by: every difference is a direction, a weak one (?)\n");
    char path[1100], dat[1100], err[512];
    FioWriter w, dw;
    snprintf(path, sizeof path, "%s/table.md", o->out);
    snprintf(dat, sizeof dat, "%s/variations.dat", o->out);
    if (fio_create(&w, path, err, sizeof err)) cli_fail(PROG, "%s", err);
    if (fio_create(&dw, dat, err, sizeof err)) fio_abort(&w), cli_fail(PROG, "%s", err);
    fprintf(w.f, "| row | PPL | BLEU | params | time | paper row | PPL | BLEU | params (M) | PPL dir. paper / ours "
                 "| BLEU dir. paper / ours |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    fprintf(dw.f, "# row ours_ppl ours_bleu paper_ppl paper_bleu, then each minus its base: ours_dppl ours_dbleu "
                  "paper_dppl paper_dbleu, converged (1: dev PPL at most %g x the base's)\n", V_CONVERGED_X);
    printf("  %-12s %7s %6s %7s %5s | %-14s %4s %4s %3s%s\n", "ours", "PPL", "BLEU", "params", "time", "paper",
           "PPL", "BLEU", "M", short_run ? "" : " | PPL p/o   BLEU p/o");
    VTally tally = {0};
    char far[512] = "";
    size_t far_line = 0;   /* where far's current output line starts */
    int n_plotted = 0;
    for (int i = 0; i < N_ROWS; i++) {
        const Row *rw = &VAR_ROWS[i];
        int base = rw->edit == E_BASE, conv = 1;
        char key[32], pm[16] = "-", lab[40], dp[16] = "", db[16] = "";
        if (base) snprintf(key, sizeof key, "base#1");
        else snprintf(key, sizeof key, "%s:%s", rw->group, rw->label);
        const Result *r = job_of(jobs, n_jobs, key) ? var_results_find(res, key) : NULL;
        if (!r) continue;
        double ppl = base ? b.ppl : r->ppl, bleu = base ? b.bleu : r->bleu;
        if (rw->p_params) snprintf(pm, sizeof pm, "%d", rw->p_params);
        snprintf(lab, sizeof lab, "%s%s%s", base ? "" : rw->group, base ? "" : " ", rw->label);
        if (!base) {
            VDir vp = v_judge(ppl - b.ppl, b.band_ppl, nb, rw->p_ppl - VAR_ROWS[0].p_ppl, V_PAPER_SAME_PPL, 1);
            VDir vb = v_judge(bleu - b.bleu, b.band_bleu, nb, rw->p_bleu - VAR_ROWS[0].p_bleu, V_PAPER_SAME_BLEU, 0);
            conv = v_converged(ppl, &b);
            vtally_add(&tally, conv, vp, vb);
            if (!conv) {   /* a row this far off is named below */
                size_t l = strlen(far);
                int wrap = l - far_line + strlen(lab) > 90;   /* keep lines under 100 columns */
                snprintf(far + l, sizeof far - l, "%s%s%s", tally.rows - tally.converged > 1 ? "," : "",
                         wrap ? "\n  " : tally.rows - tally.converged > 1 ? " " : "", lab);
                if (wrap) far_line = l + 2;
            }
            dir_cell(dp, sizeof dp, vp, conv), dir_cell(db, sizeof db, vb, conv);
        }
        printf("  %-12s %7.3f %6.2f %7zu %4.0fs | %-14s %4.2f %4.1f %3s", lab, ppl, bleu, r->params,
               r->train_s + r->eval_s, rw->paper, rw->p_ppl, rw->p_bleu, pm);
        if (!short_run) printf(base ? " |" : " | %-9s %s", dp, db);
        printf("\n");
        fprintf(w.f, "| %s | %.3f | %.2f | %zu | %.0f s | %s | %.2f | %.1f | %s | %s | %s |\n", lab, ppl, bleu,
                r->params, r->train_s + r->eval_s, rw->paper, rw->p_ppl, rw->p_bleu, pm,
                short_run ? "too short" : dp, short_run ? "too short" : db);
        fprintf(dw.f, "\"%s\" %.4f %.2f %.2f %.1f %.4f %.2f %.3f %.2f %d\n", lab, ppl, bleu, rw->p_ppl, rw->p_bleu,
                ppl - b.ppl, bleu - b.bleu, rw->p_ppl - VAR_ROWS[0].p_ppl, rw->p_bleu - VAR_ROWS[0].p_bleu, conv);
        n_plotted++;
    }
    fprintf(dw.f, "\n\n# the base seeds, each minus the base mean: dppl dbleu\n");
    for (int s = 0; s < nb; s++) fprintf(dw.f, "\"seed %d\" %.4f %.2f\n", s + 1, sp[s] - b.ppl, sb[s] - b.bleu);
    write_both_or_die(&w, &dw);
    printf("(base: mean of %d seed%s%s)\n", nb, nb == 1 ? "" : "s",
           short_run ? "" : "; p/o = the paper's direction, ours, and whether they agree");
    if (!short_run) {
        int left = tally.rows - tally.converged;
        printf("converged: %d of %d row%s (dev PPL at most twice the base's %.3f)%s\n", tally.converged, tally.rows,
               tally.rows == 1 ? "" : "s", b.ppl, left ? "; left out of the count:" : "");
        if (left) printf("  %s (still learning at this budget: see their loss lines in section 2)\n", far);
        printf("the paper's direction holds in %d of %d converged rows for PPL, %d of %d for BLEU;\n",
               tally.hold_ppl, tally.converged, tally.hold_bleu, tally.converged);
        if (nb > 1)
            printf("of these, %d (PPL) and %d (BLEU) differ from base by more than twice the seeds' spread%s\n",
                   tally.clear_ppl, tally.clear_bleu, tally.clear_ppl + tally.clear_bleu < tally.hold_ppl +
                   tally.hold_bleu ? ";\nthe others are weak (?) or the same as the base (=)" : "");
        else
            printf("with one base seed no difference is strong: there is no spread to measure it against\n"
                   "(--seeds 2 or more)\n");
    }
    printf("table: %s\n", path);
    write_plot(o, &b, n_plotted, short_run);
}

