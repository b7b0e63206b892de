/* show.h - output that teaches: shapes, matrices, terminal heatmaps, plots.
 *
 * Terminal output is in colour when stdout is a terminal, and plain
 * characters when NO_COLOR is set, --no-color was given, or stdout is a
 * pipe/file. Heatmaps fit in 80 columns.
 *
 * Plots: a program writes a data file plus a small gnuplot script into its
 * output folder (plot_heatmap, plot_lines), then tries to render the PNG.
 * Without gnuplot it prints one hint line once and carries on; `make plots`
 * renders every script later.
 */
#ifndef SHOW_H
#define SHOW_H

#include <stdio.h>
#include "tensor.h"

/* colour on/off (show_set_color(0) is what --no-color does) */
void show_set_color(int on);
int show_color(void);

/* "== title ==" section banner */
void show_section(const char *title);
/* "  Q [batch=2, seq=5, d_k=8]" plus an optional note after it */
void show_shape(const Tensor *t, const char *note);
/* A small matrix of numbers with optional labels (NULL: indices). */
void show_matrix(const char *title, const float *x, int rows, int cols,
                 const char *const *row_labels, const char *const *col_labels);
/* A vector on one line: "name = [1.000, 2.000]" */
void show_vector(const char *name, const float *x, int n);

/* Terminal heatmap of a rows x cols matrix, rows labelled on the left,
 * columns along the top (truncated to fit 80 columns), with a legend of
 * the value range. Labels may be NULL (indices are used). Rows or columns
 * beyond what fits are summarised ("... 12 more"). */
void show_heatmap(const char *title, const float *x, int rows, int cols,
                  const char *const *row_labels, const char *const *col_labels);

/* ---- plot files ---------------------------------------------------------- */

/* Creates dir (and parents). Returns 0 or prints why and returns -1. */
int plot_mkdir(const char *dir);

/* Writes dir/name.dat (matrix, with labels) and dir/name.gp, then renders
 * dir/name.png if gnuplot is present. Each file is written atomically
 * (fileio.h): complete or not there. Returns 0, or -1 after printing why;
 * a failure is also counted, so the program exits 1 at the end (a full disk
 * or a read-only --out never ends in exit 0). */
int plot_heatmap(const char *dir, const char *name, const char *title,
                 const float *x, int rows, int cols,
                 const char *const *row_labels, const char *const *col_labels,
                 const char *xlabel, const char *ylabel);

/* Line plot: ncols series sharing x. Writes dir/name.dat (columns: x then
 * each series, header names them), dir/name.gp, and renders dir/name.png.
 * logx/logy: logarithmic axes. Returns and fails as plot_heatmap. */
int plot_lines(const char *dir, const char *name, const char *title,
               const char *xlabel, const char *ylabel,
               const float *x, int n, const float *const *series,
               const char *const *series_names, int nseries, int logx, int logy);

/* Runs gnuplot on dir/name.gp if gnuplot is on PATH; otherwise prints the
 * install hint once. Returns 1 if a PNG was rendered. */
int plot_render(const char *dir, const char *name);

#endif
