/* show.h - output that teaches: shapes, matrices, terminal heatmaps, and
 * lecture mode (--pause, --section N).
 *
 * Terminal output is in colour when stdout is a terminal, and plain
 * characters when NO_COLOR is set, --no-color was given, or stdout is a
 * pipe/file. Heatmaps fit in 80 columns.
 *
 * The same maps as PNG files, through gnuplot: plot.h.
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
 * without section N exits 2 saying which sections it has: at once when it
 * declared them (show_lecture_sections), else at the end.
 * show_lecture_begin(prog) starts it (cli_parse calls it). */
void show_set_pause(int on);
void show_set_only_section(int n);
void show_lecture_begin(const char *prog);
/* The program has sections 1..n: called right after cli_parse, it refuses
 * --section N > n at once (exit 2, "has sections 1..n"), before any work,
 * rather than after the whole run. */
void show_lecture_sections(int n);
/* Progress of the hidden work under --section N (show.c says how it looks):
 * a loop that takes seconds calls show_progress("step", step, steps) each
 * iteration; it writes one line on stderr (redrawn in place on a terminal,
 * a plain line at each quarter of the loop otherwise) while stdout is
 * hidden, and does nothing at all otherwise - a plain run and section N's
 * own stdout are unchanged. unit NULL: no loop, just "still working".
 * show_progress_clear wipes the line off the terminal (before an error
 * message; show_section does it before section N prints). */
void show_progress(const char *unit, long done, long total);
void show_progress_clear(void);
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

/* ---- helpers plot.c shares ------------------------------------------------ */

/* Display width of a UTF-8 string: one column per code point. */
int show_text_width(const char *s);
/* The label of row/column i: labels[i], or i written into buf (cap bytes)
 * when labels or labels[i] is NULL. */
const char *show_label(const char *const *labels, int i, char *buf, size_t cap);
/* The scale a map of n values is drawn on: --minmax (show_set_scale) wins;
 * AUTO picks SHOW_SCALE_PROB when every finite entry lies in [0, 1]. */
ShowScale show_scale_of(ShowScale asked, const float *x, long n);

#endif
