/* plot.c - gnuplot data files and scripts, and rendering them to PNG.
 *
 * Plot files are written so that `cd DIR && gnuplot NAME.gp` renders
 * NAME.png with nothing else present: the .gp script carries its own
 * terminal, palette and labels, and names its data file relative to DIR.
 * Labels and the colour scale follow the terminal heatmaps of show.c
 * (show_label, show_scale_of).
 */
#include "io/plot.h"
#include "io/show.h"
#include "core/fileio.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- plot files ------------------------------------------------------------ */

int plot_mkdir(const char *dir) {
    char path[4096];
    if (!dir || !*dir) return 0;
    if (strlen(dir) >= sizeof path) {
        fprintf(stderr, "error: folder name too long: %.60s...\n", dir);
        return -1;
    }
    strcpy(path, dir);
    /* mkdir -p: create each prefix in turn, ignoring the ones that exist */
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                fprintf(stderr, "error: cannot create folder '%s': %s\n", path, strerror(errno));
                return -1;
            }
            *p = c;
            if (c == '\0') break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "error: '%s' exists and is not a folder\n", dir);
        return -1;
    }
    return 0;
}

/* Starts dir/name.ext through an atomic writer (fileio.h: a temporary,
 * renamed into place only once complete). NULL, with the reason printed and
 * counted (the program will exit 1), on failure. */
static FILE *open_in(FioWriter *w, const char *dir, const char *name, const char *ext) {
    char path[4096], err[4600];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
    if (fio_create(w, path, err, sizeof err) == 0) return w->f;
    fprintf(stderr, "error: %s\n", err);
    fio_note_failure();
    return NULL;
}

/* Finishes what open_in started: 0, or -1 with the reason printed and
 * counted. A failed file is never left half-written. */
static int close_in(FioWriter *w) {
    char err[9000];
    if (fio_commit(w, err, sizeof err) == 0) return 0;
    fprintf(stderr, "error: %s\n", err);
    fio_note_failure();
    return -1;
}

/* Writes s between two quote characters q, the quote inside written as
 * q_inside; control characters become spaces (a newline would end the
 * line of the script or the data file). */
static void quoted(FILE *f, const char *s, char q, const char *q_inside) {
    fputc(q, f);
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == q) fputs(q_inside, f);
        else if ((unsigned char)*p < 0x20) fputc(' ', f);
        else fputc(*p, f);
    }
    fputc(q, f);
}

/* s as a gnuplot single-quoted string: inside '...' only the quote itself
 * is special, written twice. */
static void gp_string(FILE *f, const char *s) { quoted(f, s, '\'', "''"); }

/* s as a double-quoted field of a gnuplot data file. Gnuplot has no escape
 * for '"' inside a data field, so it becomes '. */
static void dat_string(FILE *f, const char *s) { quoted(f, s, '"', "'"); }

/* One line of text for a '#' comment. */
static void comment_text(FILE *f, const char *s) {
    for (const char *p = s ? s : ""; *p; p++) fputc((unsigned char)*p < 0x20 ? ' ' : *p, f);
}

/* A number for a data file; non-finite values (masked -inf scores, NaN)
 * become NaN, which gnuplot leaves blank. */
static void dat_num(FILE *f, float v) {
    if (isfinite(v)) fprintf(f, " %.9g", (double)v);
    else fputs(" NaN", f);
}

/* The lines every script starts with: a PNG terminal (pngcairo when this
 * gnuplot has it, the libgd png terminal otherwise), no "enhanced" text so
 * that labels like d_k or x^2 print as written, and the viridis palette
 * (plots/style.gp holds the same lines). */
static void gp_preamble(FILE *f, const char *name, const char *title, int w, int h) {
    fprintf(f, "# %s.gp - written by attention-in-c; render with: gnuplot %s.gp\n", name, name);
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "    set terminal pngcairo size %d,%d noenhanced font 'Sans,10'\n"
               "} else {\n"
               "    set terminal png size %d,%d noenhanced\n"
               "}\n", w, h, w, h);
    fprintf(f, "set output ");
    char png[1024];
    snprintf(png, sizeof png, "%s.png", name);
    gp_string(f, png);
    fprintf(f, "\nset title ");
    gp_string(f, title);
    fprintf(f, "\nset palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', 4 '#fde725')\n");
}

/* How many labels fit along an axis of px pixels when each needs need px:
 * the step between labelled tics, rounded up to 1, 2, 5, 10, 20, 50, ... so
 * that the labelled indices are easy to count. */
static int tic_step(int n, double px, double need) {
    int fit = (int)(px / need);
    if (fit < 2) fit = 2;
    if (n <= fit) return 1;
    int raw = (n + fit - 1) / fit;
    for (int base = 1;; base *= 10) {
        if (raw <= base) return base;
        if (raw <= 2 * base) return 2 * base;
        if (raw <= 5 * base) return 5 * base;
    }
}

/* "set xtics ('the' 0, 'cat' 1, ...)": every label when they fit, else
 * every step-th (the index then says where one is). */
static void gp_tics(FILE *f, const char *which, const char *const *labels, int n, int step) {
    char lb[32];
    fprintf(f, "set %s (", which);
    for (int i = 0; i < n; i += step) {
        if (i) fprintf(f, ", ");
        gp_string(f, show_label(labels, i, lb, sizeof lb));
        fprintf(f, " %d", i);
    }
    fprintf(f, ")\n");
}

/* "set xlabel '...'" and "set ylabel '...'" (NULL: no label). */
static void gp_axis_labels(FILE *f, const char *xlabel, const char *ylabel) {
    fprintf(f, "set xlabel ");
    gp_string(f, xlabel ? xlabel : "");
    fprintf(f, "\nset ylabel ");
    gp_string(f, ylabel ? ylabel : "");
    fprintf(f, "\n");
}

static void say_written(const char *dir, const char *name, int rendered) {
    if (rendered) printf("  [plot] %s/%s.png (+ .dat, .gp)\n", dir, name);
    else printf("  [plot] %s/%s.dat + .gp (no PNG)\n", dir, name);
}

/* Widest label (in characters) of n labels. */
static int widest_label(const char *const *labels, int n) {
    char lb[32];
    int w = 1;
    for (int i = 0; i < n; i++) {
        int k = show_text_width(show_label(labels, i, lb, sizeof lb));
        if (k > w) w = k;
    }
    return w;
}

/* One heatmap panel's axes: ranges with row 0 at the top (like the matrix
 * on paper), tic labels that stay readable on a panel of pw x ph pixels
 * (short labels across, long ones turned upright, thinned when crowded),
 * and the colour range: the fixed 0..1 of probabilities, or the map's own
 * min..max, named on the colour bar. */
static void gp_heat_axes(FILE *f, int rows, int cols, const char *const *row_labels,
                         const char *const *col_labels, double pw, double ph, ShowScale sc) {
    fprintf(f, "set xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\nset tics scale 0\n", cols - 1, rows - 1);
    int xw = widest_label(col_labels, cols), yw = widest_label(row_labels, rows);
    (void)yw;
    /* 7 px a character at 10 pt; an upright label needs only its height */
    int across = xw <= 3;
    if (across) fprintf(f, "set xtics norotate\n");
    else fprintf(f, "set xtics rotate by 90 right\n");
    gp_tics(f, "xtics", col_labels, cols, tic_step(cols, pw, across ? 7.0 * xw + 8 : 16));
    gp_tics(f, "ytics", row_labels, rows, tic_step(rows, ph, 16));
    if (sc == SHOW_SCALE_PROB) fprintf(f, "set cbrange [0:1]\nset cblabel 'weight (fixed scale 0..1)'\n");
    else fprintf(f, "set autoscale cb\nset cblabel 'value (scale: min..max of this map)'\n");
}

/* The numbers of a small map of n values, written on its cells: the plot
 * clause that follows the data file's name. Dark text on the light (upper)
 * half of the colour range, white below. */
static void gp_cell_numbers(FILE *f, const float *x, long n, ShowScale sc) {
    double lo = INFINITY, hi = -INFINITY;
    for (long i = 0; i < n; i++)
        if (isfinite(x[i])) { lo = fmin(lo, x[i]); hi = fmax(hi, x[i]); }
    double mid = sc == SHOW_SCALE_PROB ? 0.5 : lo <= hi ? 0.5 * (lo + hi) : 0;
    fprintf(f, " matrix using 1:2:(sprintf('%%.2f', $3)):($3 > %.9g ? 0 : 0xffffff) "
               "with labels textcolor rgb variable notitle", mid);
}

/* The '#' header and the matrix of one map, as gnuplot reads it. */
static void dat_matrix(FILE *f, const char *title, const float *x, int rows, int cols,
                       const char *const *row_labels, const char *const *col_labels) {
    char lb[32];
    fprintf(f, "# ");
    comment_text(f, title);
    fprintf(f, "\n# %d rows x %d columns (NaN: -inf or nan)\n# row labels:", rows, cols);
    for (int i = 0; i < rows; i++) { fputc(' ', f); dat_string(f, show_label(row_labels, i, lb, sizeof lb)); }
    fprintf(f, "\n# column labels:");
    for (int j = 0; j < cols; j++) { fputc(' ', f); dat_string(f, show_label(col_labels, j, lb, sizeof lb)); }
    fputc('\n', f);
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) dat_num(f, x[(long)i * cols + j]);
        fputc('\n', f);
    }
}

/* Pixels for a heatmap of rows x cols cells: about 30 px a cell, between
 * 480 and 1200 wide, 400 and 1000 tall. */
static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

int plot_heatmap(const char *dir, const char *name, const char *title,
                  const float *x, int rows, int cols,
                  const char *const *row_labels, const char *const *col_labels,
                  const char *xlabel, const char *ylabel) {
    char path[4096];
    FioWriter fw;
    if (plot_mkdir(dir) != 0) {
        fio_note_failure();
        return -1;
    }
    ShowScale sc = show_scale_of(SHOW_SCALE_AUTO, x, (long)rows * cols);

    /* The .dat is a plain gnuplot "matrix" (one line per row, values
     * separated by spaces); the labels sit in '#' lines above it so that
     * the file explains itself. The tic labels themselves go into the .gp
     * script, where any characters can be quoted and long lists thinned
     * (gnuplot's "matrix rowheaders columnheaders" would label every cell
     * and cannot be told otherwise). */
    FILE *f = open_in(&fw, dir, name, "dat");
    if (!f) return -1;
    dat_matrix(f, title, x, rows, cols, row_labels, col_labels);
    if (close_in(&fw)) return -1;

    f = open_in(&fw, dir, name, "gp");
    if (!f) return -1;
    /* square cells when the map is roughly square; a long thin map (128
     * positions x 32 dimensions) fills the canvas instead of a sliver */
    int w = clampi(260 + 30 * cols, 480, 1200), h = clampi(180 + 30 * rows, 400, 1000);
    int square = rows <= 2 * cols && cols <= 2 * rows;
    if (square) w = h = clampi(200 + 30 * (cols > rows ? cols : rows), 480, 1000), w += 160;
    gp_preamble(f, name, title, w, h);
    gp_axis_labels(f, xlabel, ylabel);
    fprintf(f, "%s", square ? "set size ratio -1\n" : "");
    double pw = square ? h - 160 : w - 260, ph = h - 160;
    gp_heat_axes(f, rows, cols, row_labels, col_labels, pw, ph, sc);
    fprintf(f, "plot ");
    snprintf(path, sizeof path, "%s.dat", name);
    gp_string(f, path);
    fprintf(f, " matrix using 1:2:3 with image notitle");
    /* small maps carry their numbers, as in the terminal */
    if (rows <= 10 && cols <= 10) {
        fprintf(f, ", \\\n     ''");
        gp_cell_numbers(f, x, (long)rows * cols, sc);
    }
    fprintf(f, "\n");
    if (close_in(&fw)) return -1;

    say_written(dir, name, plot_render(dir, name));
    return 0;
}

int plot_heads_grid(const char *dir, const char *name, const char *title,
                     const float *w, int heads, int rows, int cols,
                     const char *const *row_labels, const char *const *col_labels,
                     const char *xlabel, const char *ylabel) {
    char path[4096];
    FioWriter fw;
    if (heads < 1 || rows < 1 || cols < 1) return -1;
    if (plot_mkdir(dir) != 0) {
        fio_note_failure();
        return -1;
    }
    long per = (long)rows * cols;
    ShowScale sc = show_scale_of(SHOW_SCALE_AUTO, w, per * heads);

    /* one gnuplot data block per head (blocks are separated by two blank
     * lines and picked with "index h-1") */
    FILE *f = open_in(&fw, dir, name, "dat");
    if (!f) return -1;
    for (int hh = 0; hh < heads; hh++) {
        char t[512];
        snprintf(t, sizeof t, "%s - head %d of %d", title ? title : "", hh + 1, heads);
        if (hh) fprintf(f, "\n\n");
        dat_matrix(f, t, w + per * hh, rows, cols, row_labels, col_labels);
    }
    if (close_in(&fw)) return -1;

    f = open_in(&fw, dir, name, "gp");
    if (!f) return -1;
    int gc = 1;
    while (gc * gc < heads) gc++;
    int gr = (heads + gc - 1) / gc;
    int pw = clampi(120 + 24 * cols, 320, 560), ph = clampi(120 + 24 * rows, 300, 560);
    gp_preamble(f, name, "", gc * pw, gr * ph + 40);
    fprintf(f, "unset title\nset size ratio -1\n");
    gp_heat_axes(f, rows, cols, row_labels, col_labels, pw - 140, ph - 130, sc);
    gp_axis_labels(f, xlabel, ylabel);
    fprintf(f, "set multiplot layout %d,%d title ", gr, gc);
    gp_string(f, title);
    fprintf(f, "\n");
    snprintf(path, sizeof path, "%s.dat", name);
    for (int hh = 0; hh < heads; hh++) {
        fprintf(f, "set title 'head %d of %d'\nplot ", hh + 1, heads);
        gp_string(f, path);
        fprintf(f, " index %d matrix using 1:2:3 with image notitle", hh);
        if (rows <= 8 && cols <= 8) {
            fprintf(f, ", \\\n     ");
            gp_string(f, path);
            fprintf(f, " index %d", hh);   /* this head's block only ('' would read every block) */
            gp_cell_numbers(f, w + per * hh, per, sc);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "unset multiplot\n");
    if (close_in(&fw)) return -1;

    say_written(dir, name, plot_render(dir, name));
    return 0;
}

int plot_lines(const char *dir, const char *name, const char *title,
                const char *xlabel, const char *ylabel,
                const float *x, int n, const float *const *series,
                const char *const *series_names, int nseries, int logx, int logy) {
    return plot_lines_marked(dir, name, title, xlabel, ylabel, x, n, series, series_names, nseries,
                      logx, logy, NAN, NULL);
}

int plot_lines_marked(const char *dir, const char *name, const char *title,
                       const char *xlabel, const char *ylabel,
                       const float *x, int n, const float *const *series,
                       const char *const *series_names, int nseries, int logx, int logy,
                       double xmark, const char *mark_label) {
    char path[4096], lb[32];
    FioWriter fw;
    if (plot_mkdir(dir) != 0) {
        fio_note_failure();
        return -1;
    }

    FILE *f = open_in(&fw, dir, name, "dat");
    if (!f) return -1;
    fprintf(f, "# ");
    comment_text(f, title);
    fprintf(f, "\n# ");
    comment_text(f, xlabel ? xlabel : "x");
    for (int s = 0; s < nseries; s++) {
        fprintf(f, " | ");
        comment_text(f, show_label(series_names, s, lb, sizeof lb));
    }
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        dat_num(f, x[i]);
        for (int s = 0; s < nseries; s++) dat_num(f, series[s][i]);
        fputc('\n', f);
    }
    if (close_in(&fw)) return -1;

    f = open_in(&fw, dir, name, "gp");
    if (!f) return -1;
    gp_preamble(f, name, title, 800, 560);
    gp_axis_labels(f, xlabel, ylabel);
    fprintf(f, "set key below\nset grid\n");  /* a legend never covers the data */
    /* base 2 when x spans a few octaves (d_k = 1, 2, 4, ...), else base 10 */
    if (logx) {
        double x0 = n > 0 ? x[0] : 1, x1 = n > 0 ? x[n - 1] : 1;
        int base2 = x0 > 0 && x1 > 0 && fmax(x0, x1) / fmin(x0, x1) <= 4096;
        fprintf(f, "set logscale x %d\n", base2 ? 2 : 10);
    }
    if (logy) fprintf(f, "set logscale y 10\nset format y '%%g'\n");
    /* a dashed vertical line at xmark, labelled at the top */
    if (isfinite(xmark)) {
        fprintf(f, "set arrow from %.9g, graph 0 to %.9g, graph 1 nohead dashtype 2 lw 2 lc rgb '#444444'\n",
                xmark, xmark);
        fprintf(f, "set label ");
        gp_string(f, mark_label ? mark_label : "");
        fprintf(f, " at %.9g, graph 1.02 center\n", xmark);
    }
    fprintf(f, "plot ");
    for (int s = 0; s < nseries; s++) {
        if (s) fprintf(f, ", \\\n     ''");
        else { snprintf(path, sizeof path, "%s.dat", name); gp_string(f, path); }
        fprintf(f, " using 1:%d with linespoints lw 2 pt 7 ps 0.7 title ", s + 2);
        gp_string(f, show_label(series_names, s, lb, sizeof lb));
    }
    if (nseries == 0) fprintf(f, "'%s.dat' using 1:1 notitle", name);
    fprintf(f, "\n");
    if (close_in(&fw)) return -1;

    say_written(dir, name, plot_render(dir, name));
    return 0;
}

/* ---- rendering -------------------------------------------------------------- */

/* Is gnuplot on PATH? Decided once per process: a program may render many
 * plots and the answer will not change. */
static int have_gnuplot(void) {
    static int have = -1;
    if (have >= 0) return have;
    have = 0;
    const char *path = getenv("PATH");
    if (!path) return have;
    char buf[4096];
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && len + 9 < sizeof buf) {
            memcpy(buf, path, len);
            strcpy(buf + len, "/gnuplot");
            if (access(buf, X_OK) == 0) { have = 1; break; }
        }
        if (!end) break;
        path = end + 1;
    }
    return have;
}

/* Appends s to cmd in single quotes, safe for sh ('  ->  '\''). */
static int sh_quote(char *cmd, size_t cap, const char *s) {
    size_t o = strlen(cmd);
    if (o + 3 > cap) return -1;
    cmd[o++] = '\'';
    for (; *s; s++) {
        if (*s == '\'') {
            if (o + 5 > cap) return -1;
            memcpy(cmd + o, "'\\''", 4);
            o += 4;
        } else {
            if (o + 2 > cap) return -1;
            cmd[o++] = *s;
        }
    }
    if (o + 2 > cap) return -1;
    cmd[o++] = '\'';
    cmd[o] = '\0';
    return 0;
}

/* 1 if the file at path ends with a PNG's IEND chunk (length 0, "IEND",
 * its CRC): the last thing a PNG writer emits, so a PNG cut short by a full
 * disk does not have it. */
static int png_complete(const char *path) {
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    unsigned char tail[12];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int ok = fseek(f, -12, SEEK_END) == 0 && fread(tail, 1, 12, f) == 12 && !memcmp(tail, iend, 12);
    fclose(f);
    return ok;
}

int plot_render(const char *dir, const char *name) {
    static int hinted = 0;
    if (!have_gnuplot()) {
        if (!hinted)
            printf("gnuplot not found: PNGs skipped (sudo apt-get install -y gnuplot-nox); "
                   "data and scripts are in %s\n", dir);
        hinted = 1;
        return 0;
    }
    /* gnuplot writes its PNG in place, and a full disk leaves half of one
     * (with exit status 0). So it renders into a fresh temporary of ours:
     * the script is fed to gnuplot with its "set output" line pointed there,
     * and the PNG is renamed over name.png only once it is complete. */
    char gp[4096], png[4096], tmp[4096], cmd[8192] = "cd ";
    snprintf(gp, sizeof gp, "%s/%s.gp", dir, name);
    snprintf(png, sizeof png, "%s/%s.png", dir, name);
    if (snprintf(tmp, sizeof tmp, "%s/.%s.png.XXXXXX", dir, name) >= (int)sizeof tmp) return 0;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "error: cannot create '%s': %s\n", png, strerror(errno));
        fio_note_failure();
        return 0;
    }
    mode_t um = umask(0);   /* mkstemp made it 0600; give it a plain file's mode */
    umask(um);
    fchmod(fd, 0666 & ~um);
    close(fd);
    FILE *script = fopen(gp, "r");
    if (sh_quote(cmd, sizeof cmd, dir) || strlen(cmd) + 40 > sizeof cmd || !script) {
        if (script) fclose(script);
        unlink(tmp);
        return 0;
    }
    /* gnuplot's warnings (e.g. about NaN cells) are noise for a reader */
    strcat(cmd, " && gnuplot >/dev/null 2>&1");
    fflush(stdout);
    FILE *g = popen(cmd, "w");
    if (!g) {
        fclose(script);
        unlink(tmp);
        return 0;
    }
    char line[4096];
    const char *slash = strrchr(tmp, '/');
    while (fgets(line, sizeof line, script)) {
        if (!strncmp(line, "set output ", 11)) {
            fputs("set output ", g);
            gp_string(g, slash ? slash + 1 : tmp);
            fputc('\n', g);
        } else {
            fputs(line, g);
        }
    }
    fclose(script);
    int rc = pclose(g);
    if (rc != 0) {
        unlink(tmp);
        fprintf(stderr, "warning: gnuplot could not render %s/%s.gp (try: cd %s && gnuplot %s.gp)\n",
                dir, name, dir, name);
        return 0;
    }
    if (!png_complete(tmp) || rename(tmp, png) != 0) {
        unlink(tmp);
        fprintf(stderr, "error: writing '%s' failed (the disk may be full); '%s' was left as it was\n", png, png);
        fio_note_failure();
        return 0;
    }
    return 1;
}
