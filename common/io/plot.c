/* plot.c - gnuplot data files and scripts, and rendering them to PNG.
 *
 * Plot files are written so that `cd DIR && gnuplot NAME.gp` renders
 * NAME.png with nothing else present: the .gp script carries its own
 * terminal, palette and labels, and names its data file relative to DIR.
 * Labels and the colour scale follow the terminal heatmaps of show.c
 * (show_label, show_scale_of). A heatmap's every size (cells, margins,
 * canvas) is decided here in pixels (heat_layout) and written into the
 * script as screen positions, so what fits is known before gnuplot runs.
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
FILE *plot_open(FioWriter *w, const char *dir, const char *name, const char *ext) {
    char path[4096], err[4600];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
    if (fio_create(w, path, err, sizeof err) == 0) return w->f;
    fprintf(stderr, "error: %s\n", err);
    fio_note_failure();
    return NULL;
}

/* Finishes what plot_open started: 0, or -1 with the reason printed and
 * counted. A failed file is never left half-written. */
int plot_close(FioWriter *w) {
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

/* ---- heatmap labels, as a reader reads them ------------------------------------ */

/* BPE pieces (text/bpe.h) mark the end of a word with "</w>": "Hund</w>",
 * or "groß" "en</w>" for a word cut in two. On a picture every label ending
 * in the marker is noise, so when a list of labels holds any "</w>" the
 * plots drop it from the pieces that end a word and put a '·' after those
 * that continue into the next ("laugh·" "s" is laughs); <s>, </s>, <pad>
 * stay as they are. The .dat keeps the pieces exactly as they were. */
static const char EOW[] = "</w>";

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

int plot_bpe_labels(const char *const *labels, int n) {
    for (int i = 0; labels && i < n; i++)
        if (labels[i] && ends_with(labels[i], EOW)) return 1;
    return 0;
}

/* Label i of a heatmap axis into buf (cap bytes), </w> handled as above
 * when bpe is 1. A long label is cut at a character boundary. */
const char *plot_label(const char *const *labels, int i, int bpe, char *buf, size_t cap) {
    char num[32];
    const char *s = show_label(labels, i, num, sizeof num);
    size_t n = strlen(s), e = strlen(EOW);
    int special = n >= 2 && s[0] == '<' && s[n - 1] == '>' && !ends_with(s, EOW);
    const char *tail = "";
    if (bpe && !special) {
        if (ends_with(s, EOW)) n -= e;
        else tail = "\xc2\xb7";   /* U+00B7 MIDDLE DOT: the word goes on */
    }
    if (bpe && n == 0) n = strlen(s);   /* a bare "</w>" stays visible */
    size_t room = cap - 1 - strlen(tail);
    if (n > room) {
        n = room;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;   /* not inside a UTF-8 character */
    }
    memcpy(buf, s, n);
    strcpy(buf + n, tail);
    return buf;
}

/* Widest label (in characters) of n labels, as drawn. */
static int widest_label(const char *const *labels, int n, int bpe) {
    char lb[96];
    int w = 1;
    for (int i = 0; i < n; i++) {
        int k = show_text_width(plot_label(labels, i, bpe, lb, sizeof lb));
        if (k > w) w = k;
    }
    return w;
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
    char lb[96];
    int bpe = plot_bpe_labels(labels, n);
    fprintf(f, "set %s (", which);
    for (int i = 0; i < n; i += step) {
        if (i) fprintf(f, ", ");
        gp_string(f, plot_label(labels, i, bpe, lb, sizeof lb));
        fprintf(f, " %d", i);
    }
    fprintf(f, ")\n");
}

/* ---- heatmap layout, in pixels -------------------------------------------------- */

/* Sizes of the 10 pt tic font of pngcairo (about: Sans's average letter)
 * and of the 9 pt font the cell values are written in. */
#define CHAR_PX 7.0    /* one character of a tic label */
#define LINE_PX 16.0   /* one line of text */
#define DIGIT_PX 6.5   /* one character of a cell value */
#define CBAR_PX 140    /* the colour bar's band on the right: gap, bar, tics, label */

/* Where everything of a heatmap picture goes. Each panel (one per head) is
 * its cells plus margins for the labels; panels sit in a grid of gc x gr,
 * the one colour bar right of them all. Every size is decided here, from
 * the map and its labels, and written into the script as screen positions
 * (set lmargin at screen ...), so a cell is as large as planned: gnuplot's
 * own layout shrank 5 x 5 maps to 120 px with half the canvas left white. */
typedef struct {
    int gc, gr;                 /* panels across, down */
    double cw, ch;              /* one cell, px */
    double left, top, bottom;   /* around one panel's cells: labels, title */
    double pw, ph;              /* one panel with its margins and the gap after it, px */
    double x0, head;            /* left edge of the first panel; band above the panels */
    int W, H;                   /* the canvas */
    int xstep, ystep, xrot;     /* every step-th label; x labels upright */
    int numbers;                /* 1: each cell carries its value */
    int bpe_note;               /* 1: a line under the panels says what '·' means */
} HeatLayout;

/* Pixels for one cell along an axis of n cells: area / n, at most most;
 * at least one text line when that keeps the axis under 1200 px (so every
 * label gets its line) and at least enough for a 300 px side. */
static double cell_px(int n, double area, double most, double side) {
    double c = area / n;
    if (c > most) c = most;
    if (c < LINE_PX && n * LINE_PX <= 1200) c = LINE_PX;
    if (n * c < side) c = fmin(side / n, 64);
    return c;
}

/* Characters of the widest cell value as "%.2f" writes it (NaN: 3). */
static int widest_value(const float *x, long n) {
    int w = 1;
    char b[64];
    for (long i = 0; i < n; i++) {
        int k = isfinite(x[i]) ? snprintf(b, sizeof b, "%.2f", (double)x[i]) : 3;
        if (k > w) w = k;
    }
    return w;
}

/* The layout of `panels` maps of rows x cols (x holds all their values),
 * titled title: over the whole figure for a grid (grid = 1, each panel
 * then has a title of its own), over the one panel otherwise. */
static HeatLayout heat_layout(int grid, int panels, int rows, int cols, const float *x,
                              const char *const *row_labels, const char *const *col_labels,
                              const char *xlabel, const char *ylabel, const char *title) {
    HeatLayout L = {0};
    /* 2 columns for 4 heads, 4 for the paper's 8: wide rather than tall */
    L.gc = panels <= 3 ? panels : panels == 4 ? 2 : panels <= 6 ? 3 : 4;
    L.gr = (panels + L.gc - 1) / L.gc;
    /* a single map gets more room than each panel of a grid */
    double area = grid ? 560 : 640, most = grid ? 44 : 56, side = grid ? 200 : 300;
    L.cw = cell_px(cols, area, most, side);
    L.ch = cell_px(rows, area, most, side);
    if (rows <= 2 * cols && cols <= 2 * rows) L.cw = L.ch = fmin(L.cw, L.ch);   /* square cells */

    int xw = widest_label(col_labels, cols, plot_bpe_labels(col_labels, cols));
    int yw = widest_label(row_labels, rows, plot_bpe_labels(row_labels, rows));
    /* x labels across when each fits its cell, else turned upright */
    L.xrot = xw * CHAR_PX + 6 > L.cw;
    double xneed = L.xrot ? LINE_PX - 2 : xw * CHAR_PX + 6;
    L.xstep = L.cw >= xneed ? 1 : tic_step(cols, cols * L.cw, xneed);
    L.ystep = L.ch >= LINE_PX - 2 ? 1 : tic_step(rows, rows * L.ch, LINE_PX - 2);
    /* "0.56" in 9 pt needs 4 x 6.5 px and a line; a map wider than 12 keys
     * is read by its colours (the terminal prints numbers for small maps
     * only, too) */
    int vw = widest_value(x, (long)panels * rows * cols);
    L.numbers = cols <= 12 && L.cw >= vw * DIGIT_PX + 6 && L.ch >= LINE_PX;

    int has_x = xlabel && *xlabel, has_y = ylabel && *ylabel;
    L.left = 10 + (has_y ? LINE_PX + 6 : 0) + yw * CHAR_PX + 8;
    L.bottom = 8 + (L.xrot ? xw * CHAR_PX : LINE_PX) + 8 + (has_x ? LINE_PX + 6 : 0) + 18;
    L.top = LINE_PX + 16;
    L.pw = L.left + cols * L.cw + 24;
    L.ph = L.top + rows * L.ch + L.bottom;
    L.head = grid ? 36 : 0;
    double w = L.gc * L.pw + CBAR_PX, need = show_text_width(title ? title : "") * CHAR_PX + 60;
    L.x0 = need > w ? (need - w) / 2 : 0;   /* a long title: centre the panels under it */
    L.W = (int)ceil(fmax(w, need));
    L.bpe_note = plot_bpe_labels(row_labels, rows) || plot_bpe_labels(col_labels, cols);
    L.H = (int)ceil(L.head + L.gr * L.ph + 8);
    if (L.H < L.head + L.top + 160 + 30) L.H = (int)(L.head + L.top + 160 + 30);   /* the colour bar's room */
    if (L.bpe_note) L.H += (int)LINE_PX + 4;
    return L;
}

/* Panel p's margins as screen fractions: its cells and nothing else fill
 * the plot area. */
static void gp_panel_margins(FILE *f, const HeatLayout *L, int p, int rows, int cols) {
    double x = L->x0 + (p % L->gc) * L->pw + L->left, y = L->head + (p / L->gc) * L->ph + L->top;
    fprintf(f, "set lmargin at screen %.5f\nset rmargin at screen %.5f\n", x / L->W, (x + cols * L->cw) / L->W);
    fprintf(f, "set tmargin at screen %.5f\nset bmargin at screen %.5f\n", 1 - y / L->H,
            1 - (y + rows * L->ch) / L->H);
}

/* The one colour bar, right of every panel, as tall as the cells (at
 * least 160 px); its tics and label get the CBAR_PX band, so the label is
 * never cut at the canvas edge. */
static void gp_colorbox(FILE *f, const HeatLayout *L, int rows) {
    double x = L->x0 + L->gc * L->pw + 10, top = L->head + L->top;
    double bot = L->head + (L->gr - 1) * L->ph + L->top + rows * L->ch;
    if (bot - top < 160) bot = top + 160;
    fprintf(f, "set colorbox user origin screen %.5f, screen %.5f size screen %.5f, screen %.5f\n", x / L->W,
            1 - bot / L->H, 18.0 / L->W, (bot - top) / L->H);
}

/* Under BPE labels, one line in the bottom left corner: what the '·' of
 * label_text means. */
static void gp_bpe_note(FILE *f, const HeatLayout *L) {
    if (!L->bpe_note) return;
    fprintf(f, "set label 'labels are BPE pieces: \xc2\xb7 = the word goes on in the next piece' "
               "at screen %.5f, screen %.5f left font ',9'\n", 10.0 / L->W, 8.0 / L->H);
}

/* A heatmap's axes: ranges with row 0 at the top (like the matrix on
 * paper), tic labels as the layout placed them, and the colour range: the
 * fixed 0..1 of probabilities, the min..max of all the panels together
 * (one bar serves them all), or, for one map, its own min..max. x holds
 * the n values the colours cover. */
static void gp_heat_axes(FILE *f, const HeatLayout *L, int rows, int cols, const char *const *row_labels,
                         const char *const *col_labels, ShowScale sc, int panels, const float *x, long n) {
    fprintf(f, "set xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\nset tics scale 0\n", cols - 1, rows - 1);
    fprintf(f, "%s", L->xrot ? "set xtics rotate by 90 right\n" : "set xtics norotate\n");
    gp_tics(f, "xtics", col_labels, cols, L->xstep);
    gp_tics(f, "ytics", row_labels, rows, L->ystep);
    double lo = INFINITY, hi = -INFINITY;
    for (long i = 0; i < n; i++)
        if (isfinite(x[i])) { lo = fmin(lo, x[i]); hi = fmax(hi, x[i]); }
    /* gnuplot sets the label of a placed colour bar as if its tic labels
     * were one character wide ("-3" ran into it): moved right by 2
     * characters, more for longer numbers */
    char b[2][64];
    int tw = sc == SHOW_SCALE_PROB || !(lo <= hi) ? 3 : (int)fmax(snprintf(b[0], sizeof b[0], "%.3g", lo),
                                                            snprintf(b[1], sizeof b[1], "%.3g", hi));
    int off = 2 + (tw > 4 ? (tw - 4 < 4 ? tw - 4 : 4) : 0);
    if (sc == SHOW_SCALE_PROB) fprintf(f, "set cbrange [0:1]\nset cblabel 'weight (fixed scale 0..1)'");
    else if (panels > 1 && lo < hi)
        fprintf(f, "set cbrange [%.9g:%.9g]\nset cblabel 'value (scale: min..max of these maps)'", lo, hi);
    else fprintf(f, "set autoscale cb\nset cblabel 'value (scale: min..max of this map)'");
    fprintf(f, " offset %d,0\n", off);
}

/* The values of a map written on its cells: the plot clause that follows
 * the data file's name. Dark text on the light (upper) half of the colour
 * range, white below; x holds the n values the colours are scaled over. */
static void gp_cell_numbers(FILE *f, const float *x, long n, ShowScale sc) {
    double lo = INFINITY, hi = -INFINITY;
    for (long i = 0; i < n; i++)
        if (isfinite(x[i])) { lo = fmin(lo, x[i]); hi = fmax(hi, x[i]); }
    double mid = sc == SHOW_SCALE_PROB ? 0.5 : lo <= hi ? 0.5 * (lo + hi) : 0;
    fprintf(f, " matrix using 1:2:(sprintf('%%.2f', $3)):($3 > %.9g ? 0 : 0xffffff) "
               "with labels font 'Sans,9' textcolor rgb variable notitle", mid);
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
    FILE *f = plot_open(&fw, dir, name, "dat");
    if (!f) return -1;
    dat_matrix(f, title, x, rows, cols, row_labels, col_labels);
    if (plot_close(&fw)) return -1;

    f = plot_open(&fw, dir, name, "gp");
    if (!f) return -1;
    HeatLayout L = heat_layout(0, 1, rows, cols, x, row_labels, col_labels, xlabel, ylabel, title);
    gp_preamble(f, name, title, L.W, L.H);
    gp_axis_labels(f, xlabel, ylabel);
    gp_heat_axes(f, &L, rows, cols, row_labels, col_labels, sc, 1, x, (long)rows * cols);
    gp_panel_margins(f, &L, 0, rows, cols);
    gp_colorbox(f, &L, rows);
    gp_bpe_note(f, &L);
    fprintf(f, "plot ");
    snprintf(path, sizeof path, "%s.dat", name);
    gp_string(f, path);
    fprintf(f, " matrix using 1:2:3 with image notitle");
    if (L.numbers) {   /* values where they fit, as in the terminal */
        fprintf(f, ", \\\n     ''");
        gp_cell_numbers(f, x, (long)rows * cols, sc);
    }
    fprintf(f, "\n");
    if (plot_close(&fw)) return -1;

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
    FILE *f = plot_open(&fw, dir, name, "dat");
    if (!f) return -1;
    for (int hh = 0; hh < heads; hh++) {
        char t[512];
        snprintf(t, sizeof t, "%s - head %d of %d", title ? title : "", hh + 1, heads);
        if (hh) fprintf(f, "\n\n");
        dat_matrix(f, t, w + per * hh, rows, cols, row_labels, col_labels);
    }
    if (plot_close(&fw)) return -1;

    f = plot_open(&fw, dir, name, "gp");
    if (!f) return -1;
    HeatLayout L = heat_layout(1, heads, rows, cols, w, row_labels, col_labels, xlabel, ylabel, title);
    gp_preamble(f, name, "", L.W, L.H);
    fprintf(f, "unset title\n");
    gp_heat_axes(f, &L, rows, cols, row_labels, col_labels, sc, heads, w, per * heads);
    gp_axis_labels(f, xlabel, ylabel);
    /* the layout's rows and columns; each panel's margins then place it */
    fprintf(f, "set multiplot layout %d,%d title ", L.gr, L.gc);
    gp_string(f, title);
    fprintf(f, "\nunset colorbox\n");
    snprintf(path, sizeof path, "%s.dat", name);
    for (int hh = 0; hh < heads; hh++) {
        gp_panel_margins(f, &L, hh, rows, cols);
        if (hh == heads - 1) {   /* drawn once, with the last panel */
            gp_colorbox(f, &L, rows);
            gp_bpe_note(f, &L);
        }
        fprintf(f, "set title 'head %d of %d'\nplot ", hh + 1, heads);
        gp_string(f, path);
        fprintf(f, " index %d matrix using 1:2:3 with image notitle", hh);
        if (L.numbers) {
            fprintf(f, ", \\\n     ");
            gp_string(f, path);
            fprintf(f, " index %d", hh);   /* this head's block only ('' would read every block) */
            gp_cell_numbers(f, w, per * heads, sc);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "unset multiplot\n");
    if (plot_close(&fw)) return -1;

    say_written(dir, name, plot_render(dir, name));
    return 0;
}

/* ---- line plots ----------------------------------------------------------------- */

/* Dash types (1 solid, 2 dashed, 3 dotted, 4 dash-dot, 5 dash-dot-dot, ...)
 * and point types (7 filled circle, 4 open square, 9 filled triangle, 6
 * open circle, 13 filled diamond, ...) of series 0, 1, 2, ...; earlier
 * series get larger markers, so one under another still peeks out. */
enum { NSTYLE = 6 };
static const int LINE_DT[NSTYLE] = {1, 2, 3, 4, 5, 6};
static const int LINE_PT[NSTYLE] = {7, 4, 9, 6, 13, 8};
/* gnuplot's own colours, its light blue and pale yellow darkened: every line shows on white */
static const char *const LINE_LC[NSTYLE] = {"#9400d3", "#009e73", "#0072b2", "#e69f00", "#b8860b", "#cc79a7"};

/* "set yrange [lo:hi]" a little past the data: a series lying at the
 * smallest or largest value (1 on a log axis, 0 on a linear one) is drawn
 * inside the frame, not on it. Log axes pad by a factor of 1.5, linear ones
 * by 6% of the span. Nothing finite (or nothing positive on a log axis):
 * gnuplot's own autoscale. */
static void gp_value_range(FILE *f, const float *const *series, int nseries, int n, int logy) {
    double lo = INFINITY, hi = -INFINITY;
    for (int s = 0; s < nseries; s++)
        for (int i = 0; i < n; i++) {
            double v = series[s][i];
            if (!isfinite(v) || (logy && v <= 0)) continue;
            lo = fmin(lo, v), hi = fmax(hi, v);
        }
    if (!(lo <= hi)) return;
    if (logy) lo /= 1.5, hi *= 1.5;
    else {
        double pad = hi > lo ? 0.06 * (hi - lo) : fmax(0.1 * fabs(hi), 0.5);
        lo -= pad, hi += pad;
    }
    fprintf(f, "set yrange [%.6g:%.6g]\n", lo, hi);
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

    FILE *f = plot_open(&fw, dir, name, "dat");
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
    if (plot_close(&fw)) return -1;

    f = plot_open(&fw, dir, name, "gp");
    if (!f) return -1;
    gp_preamble(f, name, title, 800, 560);
    gp_axis_labels(f, xlabel, ylabel);
    fprintf(f, "set key below height 1.5\nset grid\n");  /* a legend never covers the data nor the x label */
    gp_value_range(f, series, nseries, n, logy);
    /* base 2 when x spans a few octaves (d_k = 1, 2, 4, ...), else base 10 */
    if (logx) {
        double x0 = n > 0 ? x[0] : 1, x1 = n > 0 ? x[n - 1] : 1;
        int base2 = x0 > 0 && x1 > 0 && fmax(x0, x1) / fmin(x0, x1) <= 4096;
        fprintf(f, "set logscale x %d\n", base2 ? 2 : 10);
    }
    if (logy) fprintf(f, "set logscale y 10\nset format y '%%g'\n");
    /* a dashed vertical line at xmark, labelled just above the plot; the
     * title moves up a line and the top margin holds both */
    if (isfinite(xmark)) {
        fprintf(f, "set arrow from %.9g, graph 0 to %.9g, graph 1 nohead dashtype 2 lw 2 lc rgb '#444444'\n",
                xmark, xmark);
        fprintf(f, "set label ");
        gp_string(f, mark_label ? mark_label : "");
        fprintf(f, " at %.9g, graph 1 center offset 0,0.8\n", xmark);
        fprintf(f, "set title ");
        gp_string(f, title);
        fprintf(f, " offset 0,1\nset tmargin 4\n");
    }
    fprintf(f, "plot ");
    for (int s = 0; s < nseries; s++) {
        if (s) fprintf(f, ", \\\n     ''");
        else { snprintf(path, sizeof path, "%s.dat", name); gp_string(f, path); }
        /* each series its own dash and marker: one drawn over another
         * (chapter 10's n and n - 1) still shows, and the key tells them
         * apart without colour; markers every pi-th point on long series */
        fprintf(f, " using 1:%d with linespoints lw 2 lc rgb '%s' dt %d pt %d ps %.2f pi %d title ", s + 2,
                LINE_LC[s % NSTYLE], LINE_DT[s % NSTYLE], LINE_PT[s % NSTYLE], s < NSTYLE ? 1.3 - 0.15 * s : 0.7,
                n > 24 ? n / 12 : 1);
        gp_string(f, show_label(series_names, s, lb, sizeof lb));
    }
    if (nseries == 0) fprintf(f, "'%s.dat' using 1:1 notitle", name);
    fprintf(f, "\n");
    if (plot_close(&fw)) return -1;

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
