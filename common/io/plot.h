/* plot.h - plots as files: gnuplot data + script, rendered to PNG.
 *
 * A program writes a data file plus a small gnuplot script into its output
 * folder (plot_heatmap, plot_heads_grid, plot_lines), then tries to render
 * the PNG. Heatmap PNGs follow the terminal's rule (show.h): weights on a
 * fixed 0..1 colour range, anything else min..max, the colour bar says
 * which. Without gnuplot it prints one hint line once and carries on;
 * `make plots` renders every script later.
 *
 * Heatmaps are laid out in pixels from the map itself: cells large enough
 * that every key and query gets its label (turned upright when it is wider
 * than its cell), a value written in a cell only where "0.56" fits, one
 * colour bar with room for its label. Labels are drawn as a reader writes
 * them: BPE's end-of-word "</w>" dropped, a piece that continues its word
 * marked with a trailing '·' ("laugh·" "s"); the .dat keeps them as given.
 * Line plots give each series its own colour, dash and marker, and keep
 * the data off the frame.
 */
#ifndef PLOT_H
#define PLOT_H

#include <stdio.h>

#include "core/fileio.h"

/* Creates dir (and parents). Returns 0 or prints why and returns -1. */
int plot_mkdir(const char *dir);

/* dir/name.ext through an atomic writer (core/fileio.h), and its commit:
 * NULL or -1 with the reason printed and counted (the program exits 1). The
 * line views (lineview.c) write their files through these too. */
FILE *plot_open(FioWriter *w, const char *dir, const char *name, const char *ext);
int plot_close(FioWriter *w);

/* Labels as every picture draws them: when any of the n labels ends in
 * BPE's "</w>" (plot_bpe_labels is 1), that marker is dropped and a piece
 * that continues its word gets a trailing U+00B7 '·' ("laugh·" "s");
 * <s>, </s>, <pad> stay. NULL labels are numbered from 0. Label i into buf
 * (cap bytes), cut at a UTF-8 character boundary. */
int plot_bpe_labels(const char *const *labels, int n);
const char *plot_label(const char *const *labels, int i, int bpe, char *buf, size_t cap);

/* Writes dir/name.dat (matrix, with labels) and dir/name.gp, then renders
 * dir/name.png if gnuplot is present. Each file is written atomically
 * (fileio.h): complete or not there. Every plot_* returns 0, or -1 after
 * printing why; a failure is also counted, so the program exits 1 at the end
 * (a full disk or a read-only --out never ends in exit 0). */
int plot_heatmap(const char *dir, const char *name, const char *title,
                  const float *x, int rows, int cols,
                  const char *const *row_labels, const char *const *col_labels,
                  const char *xlabel, const char *ylabel);

/* Line plot: nseries series sharing x. Writes dir/name.dat (columns: x then
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

/* Every head of one layer in one PNG, a grid of panels (gnuplot multiplot;
 * 2 columns for 4 heads, 4 for 8; the canvas grows with heads and tokens):
 * w is [heads, rows, cols]; name is e.g. "heads_layer1". Weights get the
 * fixed 0..1 colour range, anything else the min..max of all heads; one
 * colour bar serves every panel, so heads compare. */
int plot_heads_grid(const char *dir, const char *name, const char *title,
                     const float *w, int heads, int rows, int cols,
                     const char *const *row_labels, const char *const *col_labels,
                     const char *xlabel, const char *ylabel);

/* Runs gnuplot on dir/name.gp if gnuplot is on PATH; otherwise prints the
 * install hint once. Returns 1 if a PNG was rendered. */
int plot_render(const char *dir, const char *name);

#endif
