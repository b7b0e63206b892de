/* show.h - output that teaches: shapes, matrices, terminal heatmaps, plots.
 *
 * Terminal output is in colour when stdout is a terminal, and plain
 * characters when NO_COLOR is set, --no-color was given, or stdout is a
 * pipe/file. Heatmaps fit in 80 columns.
 *
 * Plots: a program writes a data file plus a small gnuplot script into its
 * output folder (plot_heatmap, plot_heads_grid, plot_lines), then tries to render
 * the PNG. Heatmap PNGs follow the terminal's rule: weights on a fixed 0..1
 * colour range, anything else min..max, the colour bar says which.
 * Without gnuplot it prints one hint line once and carries on; `make plots`
 * renders every script later.
 */
#ifndef SHOW_H
#define SHOW_H

#include <stdio.h>
#include "core/tensor.h"

/* colour on/off (show_set_color(0) is what --no-color does) */
void show_set_color(int on);
int show_color(void);

/* "== title ==" section banner. A title that starts "N. " opens numbered
 * section N: the unit of lecture mode (--pause, --section N). */
void show_section(const char *title);

/* Lecture mode, set by cli.c from --pause and --section N.
 * show_set_pause(1): show_section waits for Enter before each numbered
 * section after the first - only when stdin is a terminal; otherwise (a
 * pipe, /dev/null) it runs straight through.
 * show_set_only_section(N): stdout goes to /dev/null except inside section
 * N; the program still computes everything section N needs. A program
 * without section N exits 2 at the end saying which sections it has.
 * show_lecture_begin(prog) starts it (cli_parse calls it). */
void show_set_pause(int on);
void show_set_only_section(int n);
void show_lecture_begin(const char *prog);
/* "  Q [batch=2, seq=5, d_k=8]" plus an optional note after it */
void show_shape(const Tensor *t, const char *note);
/* A small matrix of numbers with optional labels (NULL: indices). */
void show_matrix(const char *title, const float *x, int rows, int cols,
                 const char *const *row_labels, const char *const *col_labels);
/* A vector on one line: "name = [1.000, 2.000]" */
void show_vector(const char *name, const float *x, int n);

/* Terminal heatmap of a rows x cols matrix, rows labelled on the left,
 * columns along the top, with a legend that says which scale it uses and
 * the map's own range. Labels may be NULL (indices are used). Rows or
 * columns beyond what fits are summarised ("... 12 more").
 *
 * Scale. Attention weights are probabilities, so a map whose entries all
 * lie in [0, 1] is drawn on the fixed scale 0..1 (SHOW_SCALE_PROB): a
 * near-uniform untrained map looks faint, a peaked trained one bright, and
 * blank means exactly 0. Any other map is stretched from its own min to its
 * own max (SHOW_SCALE_MINMAX) and the legend prints that range. --minmax
 * (show_set_scale) stretches every map.
 *
 * Column labels are printed whole and across; when they do not fit, the
 * columns are lettered a, b, ... and a key line names them. A map that is
 * all 0 or all -inf says "empty: ..." under the legend. */
typedef enum { SHOW_SCALE_AUTO, SHOW_SCALE_PROB, SHOW_SCALE_MINMAX } ShowScale;
void show_heatmap(const char *title, const float *x, int rows, int cols,
                  const char *const *row_labels, const char *const *col_labels);
void show_heatmap_scaled(const char *title, const float *x, int rows, int cols,
                         const char *const *row_labels, const char *const *col_labels,
                         ShowScale scale);
/* SHOW_SCALE_MINMAX: every later map min-max (what --minmax does). */
void show_set_scale(ShowScale s);

/* ---- plot files ---------------------------------------------------------- */

/* Creates dir (and parents). Returns 0 or prints why and returns -1. */
int plot_mkdir(const char *dir);

/* Writes dir/name.dat (matrix, with labels) and dir/name.gp, then renders
 * dir/name.png if gnuplot is present. Each file is written atomically
 * (fileio.h): complete or not there. Every plot_* returns 0, or -1 after
 * printing why; a failure is also counted, so the program exits 1 at the end
 * (a full disk or a read-only --out never ends in exit 0). */
int plot_heatmap(const char *dir, const char *name, const char *title,
                  const float *x, int rows, int cols,
                  const char *const *row_labels, const char *const *col_labels,
                  const char *xlabel, const char *ylabel);

/* Line plot: ncols series sharing x. Writes dir/name.dat (columns: x then
 * each series, header names them), dir/name.gp, and renders dir/name.png.
 * logx/logy: logarithmic axes. */
int plot_lines(const char *dir, const char *name, const char *title,
                const char *xlabel, const char *ylabel,
                const float *x, int n, const float *const *series,
                const char *const *series_names, int nseries, int logx, int logy);

/* plot_lines plus a dashed vertical line at x = xmark, labelled at the top
 * with mark_label (e.g. the longest position seen in training). */
int plot_lines_marked(const char *dir, const char *name, const char *title,
                       const char *xlabel, const char *ylabel,
                       const float *x, int n, const float *const *series,
                       const char *const *series_names, int nseries, int logx, int logy,
                       double xmark, const char *mark_label);

/* Every head of one layer in one PNG, a grid of panels (gnuplot multiplot):
 * w is [heads, rows, cols]; name is e.g. "heads_layer1". Weights get the
 * fixed 0..1 colour range, shared by every panel, so heads compare. */
int plot_heads_grid(const char *dir, const char *name, const char *title,
                     const float *w, int heads, int rows, int cols,
                     const char *const *row_labels, const char *const *col_labels,
                     const char *xlabel, const char *ylabel);

/* Runs gnuplot on dir/name.gp if gnuplot is on PATH; otherwise prints the
 * install hint once. Returns 1 if a PNG was rendered. */
int plot_render(const char *dir, const char *name);

#endif
