/* check_plot.c - the gnuplot scripts of plot.h draw pictures a reader can
 * read: every key and query labelled, BPE's end-of-word marks off the
 * labels, numbers in a cell only where they fit, panels sized from the
 * map (not squeezed into a fixed canvas), the colour bar's label inside
 * the picture, and line plots whose series stay apart and off the axes.
 *
 * The checks read the .gp script that plot.c writes: its canvas size and
 * each panel's margins (set lmargin at screen ...) give every cell's size
 * in pixels, so "fits" is measured, not guessed from the PNG. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/plot.h"
#include "testutil.h"

/* ---- reading a script ------------------------------------------------------- */

/* dir/name (malloc'd; the caller frees), or a failed test. */
static char *script(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *s = read_file(p, NULL);
    ck_assert_msg(s != NULL, "%s not written", p);
    return s;
}

/* The canvas of "set terminal pngcairo size W,H". */
static void canvas(const char *gp, int *w, int *h) {
    const char *p = strstr(gp, " size ");
    ck_assert_msg(p && sscanf(p, " size %d,%d", w, h) == 2, "no terminal size:\n%s", gp);
}

/* How many entries "set <which> (...)" lists, and whether any label holds
 * `bad`. Entries are 'label' index, separated by commas outside quotes. */
static int tic_count(const char *gp, const char *which, const char *bad, int *has_bad) {
    char key[64];
    snprintf(key, sizeof key, "set %s (", which);
    const char *p = strstr(gp, key);
    ck_assert_msg(p != NULL, "no '%s' in:\n%s", key, gp);
    p += strlen(key);
    int n = 1, inq = 0;
    const char *lab = NULL;
    for (; *p && (inq || *p != ')'); p++) {
        if (*p == '\'') {
            if (inq && p[1] == '\'') { p++; continue; }
            inq = !inq;
            if (inq) lab = p + 1;
            else if (bad && has_bad && lab) {
                size_t len = (size_t)(p - lab), bl = strlen(bad);
                for (size_t i = 0; i + bl <= len; i++)
                    if (!strncmp(lab + i, bad, bl)) *has_bad = 1;
            }
        } else if (!inq && *p == ',') {
            n++;
        }
    }
    return n;
}

/* The value after the k-th (0-based) "set <m>margin at screen ". */
static double margin(const char *gp, const char *m, int k) {
    char key[64];
    snprintf(key, sizeof key, "set %smargin at screen ", m);
    const char *p = gp;
    for (int i = 0; i <= k; i++) {
        p = strstr(p, key);
        ck_assert_msg(p != NULL, "panel %d has no '%s' (panels must be placed to the pixel):\n%s", k, key, gp);
        p += strlen(key);
    }
    return atof(p);
}

/* Cell size in pixels of panel k of a rows x cols map. */
static void cell_px(const char *gp, int k, int rows, int cols, double *cw, double *ch) {
    int W, H;
    canvas(gp, &W, &H);
    *cw = (margin(gp, "r", k) - margin(gp, "l", k)) * W / cols;
    *ch = (margin(gp, "t", k) - margin(gp, "b", k)) * H / rows;
}

/* n weights of a softmax-like map: every row sums to 1. */
static float *weights(int heads, int rows, int cols) {
    float *w = malloc(sizeof(float) * heads * rows * cols);
    for (int i = 0; i < heads * rows; i++) {
        float s = 0;
        for (int j = 0; j < cols; j++) s += (w[i * cols + j] = 1.0f + (float)((i * 7 + j * 3) % 5));
        for (int j = 0; j < cols; j++) w[i * cols + j] /= s;
    }
    return w;
}

/* one line of the 10 pt font, px (a panel's own title needs it) */
#define LINE_PX_TEST 16

/* ---- grids of heads ------------------------------------------------------------ */

/* Chapter 08's picture: 10 keys, 4 heads. Every key and every query gets a
 * label (the old grid labelled every other key: "<s> 3 2 2 9"). */
START_TEST(test_grid_labels_every_key) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_plot");
    const char *lab[10] = {"<s>", "6", "3", "8", "2", "9", "2", "10", "9", "2"};
    float *w = weights(4, 10, 10);
    capture_begin();
    ck_assert_int_eq(plot_heads_grid(dir, "g", "grid", w, 4, 10, 10, lab, lab, "source key", "source query"), 0);
    free(capture_end());
    char *gp = script(dir, "g.gp");
    ck_assert_int_eq(tic_count(gp, "xtics", NULL, NULL), 10);
    ck_assert_int_eq(tic_count(gp, "ytics", NULL, NULL), 10);
    remove_dir(dir);
    free(gp), free(w);
}
END_TEST

/* A BPE sentence: "The</w> laugh s</w> </s>". The pictures drop </w> (a
 * piece that continues its word gets a trailing '·'), the data file keeps
 * the pieces exactly. Both the grid and the single heatmap. */
START_TEST(test_bpe_end_of_word_stripped) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_plot");
    const char *lab[4] = {"The</w>", "laugh", "s</w>", "</s>"};
    float *w = weights(2, 4, 4);
    capture_begin();
    plot_heads_grid(dir, "g", "grid", w, 2, 4, 4, lab, lab, "key", "query");
    plot_heatmap(dir, "h", "one", w, 4, 4, lab, lab, "key", "query");
    free(capture_end());
    const char *names[2] = {"g.gp", "h.gp"};
    for (int i = 0; i < 2; i++) {
        char *gp = script(dir, names[i]);
        int bad = 0;
        ck_assert_int_eq(tic_count(gp, "xtics", "</w>", &bad), 4);
        ck_assert_int_eq(tic_count(gp, "ytics", "</w>", &bad), 4);
        ck_assert_msg(!bad, "%s: a tic label still carries </w>:\n%s", names[i], gp);
        ck_assert_msg(strstr(gp, "'The' 0") && strstr(gp, "'laugh\xc2\xb7' 1") && strstr(gp, "'s' 2") &&
                      strstr(gp, "'</s>' 3"), "%s: labels not as a reader writes them:\n%s", names[i], gp);
        free(gp);
    }
    char *dat = script(dir, "h.dat");
    ck_assert_msg(strstr(dat, "\"The</w>\" \"laugh\" \"s</w>\" \"</s>\""), "the data file lost the pieces:\n%s", dat);
    free(dat);
    remove_dir(dir);
    free(w);
}
END_TEST

/* Numbers go into cells only where "0.56" fits: 4 digits of a 9 pt font
 * (about 6.5 px each) across, one line (16 px) down. A 5-token grid gets
 * them, in cells at least that big; a 30-token grid gets none. */
START_TEST(test_grid_numbers_only_where_they_fit) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_plot");
    float *small = weights(4, 5, 5), *big = weights(4, 30, 30);
    capture_begin();
    plot_heads_grid(dir, "small", "small", small, 4, 5, 5, NULL, NULL, "key", "query");
    plot_heads_grid(dir, "big", "big", big, 4, 30, 30, NULL, NULL, "key", "query");
    free(capture_end());
    char *gs = script(dir, "small.gp"), *gb = script(dir, "big.gp");
    ck_assert_msg(strstr(gs, "sprintf('%.2f'") != NULL, "5 x 5 panels carry no numbers:\n%s", gs);
    for (int k = 0; k < 4; k++) {
        double cw, ch;
        cell_px(gs, k, 5, 5, &cw, &ch);
        ck_assert_msg(cw >= 4 * 6.5 + 4 && ch >= 16, "panel %d: numbers in %.1f x %.1f px cells", k, cw, ch);
    }
    ck_assert_msg(strstr(gb, "sprintf(") == NULL, "30 x 30 panels carry numbers that cannot fit:\n%s", gb);
    remove_dir(dir);
    free(gs), free(gb), free(small), free(big);
}
END_TEST

/* The canvas is sized from heads and tokens: 8 heads draw each panel as
 * large as 2 heads do, the layout leaves no row of blank panels, the cells
 * fill a fair share of the picture (the old grids left half of it white),
 * and the colour bar has room for its label on the right. */
START_TEST(test_grid_canvas_grows_with_heads) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_plot");
    float *w = weights(8, 10, 10);
    capture_begin();
    plot_heads_grid(dir, "h2", "two", w, 2, 10, 10, NULL, NULL, "key", "query");
    plot_heads_grid(dir, "h8", "eight", w, 8, 10, 10, NULL, NULL, "key", "query");
    free(capture_end());
    char *g2 = script(dir, "h2.gp"), *g8 = script(dir, "h8.gp");
    int W2, H2, W8, H8;
    canvas(g2, &W2, &H2);
    canvas(g8, &W8, &H8);
    ck_assert_msg((double)W8 * H8 >= 3.0 * W2 * H2, "8 heads on %dx%d, 2 heads on %dx%d", W8, H8, W2, H2);
    double cw2, ch2, cw8, ch8, cells = 0;
    cell_px(g2, 0, 10, 10, &cw2, &ch2);
    for (int k = 0; k < 8; k++) {
        cell_px(g8, k, 10, 10, &cw8, &ch8);
        ck_assert_msg(fabs(cw8 - cw2) < 1 && fabs(ch8 - ch2) < 1, "panel %d: cells %.1f px, 2 heads: %.1f", k, cw8,
                      cw2);
        ck_assert_msg(cw8 >= 20, "cells of %.1f px for 10 tokens", cw8);
        cells += cw8 * ch8 * 100;
    }
    ck_assert_msg(cells >= 0.3 * W8 * H8, "cells fill %.0f%% of the picture", 100 * cells / ((double)W8 * H8));
    int rows, cols;
    const char *m = strstr(g8, "set multiplot layout ");
    ck_assert_msg(m && sscanf(m, "set multiplot layout %d,%d", &rows, &cols) == 2, "no layout:\n%s", g8);
    ck_assert_msg(rows * cols - 8 < cols, "layout %d x %d for 8 heads leaves a blank row", rows, cols);
    /* one colour bar, right of the panels, with 70 px beside it for tics and label */
    const char *cb = strstr(g8, "set colorbox user origin screen ");
    double x, y, bw;
    ck_assert_msg(cb && sscanf(cb, "set colorbox user origin screen %lf, screen %lf size screen %lf", &x, &y, &bw) == 3,
                  "colour bar not placed:\n%s", g8);
    ck_assert_msg((1 - x - bw) * W8 >= 70, "%.0f px right of the colour bar: its label is clipped", (1 - x - bw) * W8);
    ck_assert_msg(x > margin(g8, "r", 3), "colour bar over a panel");
    remove_dir(dir);
    free(g2), free(g8), free(w);
}
END_TEST

/* One head still makes a grid: the figure's title keeps its own band, the
 * panel (with its "head 1 of 1") starts below it. */
START_TEST(test_grid_one_head_under_title) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_plot");
    float *w = weights(1, 6, 6);
    capture_begin();
    plot_heads_grid(dir, "one", "a figure title", w, 1, 6, 6, NULL, NULL, "key", "query");
    free(capture_end());
    char *gp = script(dir, "one.gp");
    int W, H;
    canvas(gp, &W, &H);
    double top_px = (1 - margin(gp, "t", 0)) * H;
    ck_assert_msg(top_px >= 36 + LINE_PX_TEST, "panel starts %.0f px from the top, under a title band", top_px);
    remove_dir(dir);
    free(gp), free(w);
}
END_TEST

/* plot_heatmap follows the same rules: numbers only in cells they fit,
 * every label of a 16-token map, the colour bar's label inside. */
START_TEST(test_heatmap_fits) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_plot");
    float *w = weights(1, 16, 16);
    capture_begin();
    plot_heatmap(dir, "m", "sixteen", w, 16, 16, NULL, NULL, "key", "query");
    plot_heatmap(dir, "s", "five", w, 5, 5, NULL, NULL, "key", "query");
    free(capture_end());
    char *gm = script(dir, "m.gp"), *gs = script(dir, "s.gp");
    ck_assert_int_eq(tic_count(gm, "xtics", NULL, NULL), 16);
    ck_assert_int_eq(tic_count(gm, "ytics", NULL, NULL), 16);
    double cw, ch;
    cell_px(gs, 0, 5, 5, &cw, &ch);
    ck_assert_msg(strstr(gs, "sprintf('%.2f'") && cw >= 30 && ch >= 16, "5 x 5: numbers in %.1f px cells", cw);
    int W, H;
    canvas(gs, &W, &H);
    const char *cb = strstr(gs, "set colorbox user origin screen ");
    double x, y, bw;
    ck_assert_msg(cb && sscanf(cb, "set colorbox user origin screen %lf, screen %lf size screen %lf", &x, &y, &bw) == 3,
                  "colour bar not placed:\n%s", gs);
    ck_assert_msg((1 - x - bw) * W >= 70, "%.0f px right of the colour bar", (1 - x - bw) * W);
    remove_dir(dir);
    free(gm), free(gs), free(w);
}
END_TEST

/* ---- line plots ------------------------------------------------------------------ */

/* Chapter 10's path lengths: "recurrent" (n) and "conv contig" (n - 1)
 * nearly coincide, "self-attn" is 1 everywhere on a log axis. Each series
 * gets its own dash type and point type (one drawn over another still
 * shows), and the y range reaches past the data so that a line at 1 is
 * not drawn on the axis. */
START_TEST(test_lines_apart_and_off_the_axis) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_plot");
    const float n[3] = {16, 32, 64}, att[3] = {1, 1, 1}, rnn[3] = {16, 32, 64}, conv[3] = {15, 31, 63};
    const float *series[3] = {att, rnn, conv};
    const char *names[3] = {"self-attn", "recurrent", "conv contig"};
    capture_begin();
    plot_lines(dir, "p", "path", "n", "layers", n, 3, series, names, 3, 1, 1);
    free(capture_end());
    char *gp = script(dir, "p.gp");
    int dt[3], pt[3];
    const char *p = gp;
    for (int s = 0; s < 3; s++) {
        p = strstr(p, " using 1:");
        ck_assert_msg(p != NULL, "series %d missing:\n%s", s, gp);
        const char *d = strstr(p, " dt "), *q = strstr(p, " pt ");
        ck_assert_msg(d && q && sscanf(d, " dt %d", &dt[s]) == 1 && sscanf(q, " pt %d", &pt[s]) == 1,
                      "series %d has no dash/point type:\n%s", s, gp);
        p++;
    }
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            ck_assert_msg(dt[a] != dt[b] && pt[a] != pt[b], "series %d and %d drawn alike:\n%s", a, b, gp);
    const char *yr = strstr(gp, "set yrange [");
    double lo, hi;
    ck_assert_msg(yr && sscanf(yr, "set yrange [%lf:%lf]", &lo, &hi) == 2, "no y range:\n%s", gp);
    ck_assert_msg(lo < 0.9 && hi > 64 * 1.1, "y range [%g:%g] puts a line on the border", lo, hi);
    remove_dir(dir);
    free(gp);
}
END_TEST

/* Chapter 05's pe_extrapolation: a mark labelled above the plot must not
 * share its line with the title: the title moves up a line, and the top
 * margin makes room for both. */
START_TEST(test_marked_label_clears_title) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_plot");
    const float x[4] = {0, 1, 2, 3}, y[4] = {7, 7, 7, 7};
    const float *series[1] = {y};
    const char *names[1] = {"flat"};
    capture_begin();
    plot_lines_marked(dir, "m", "a title", "pos", "dot", x, 4, series, names, 1, 0, 0, 2, "training length");
    free(capture_end());
    char *gp = script(dir, "m.gp");
    const char *t = strstr(gp, "set title 'a title' offset 0,");
    double up = 0;
    ck_assert_msg(t && sscanf(t, "set title 'a title' offset 0,%lf", &up) == 1 && up >= 1,
                  "title not moved above the mark's label:\n%s", gp);
    ck_assert_msg(strstr(gp, "set tmargin ") != NULL, "no room made at the top:\n%s", gp);
    remove_dir(dir);
    free(gp);
}
END_TEST

Suite *plot_suite(void) {
    Suite *s = suite_create("plot");
    TCase *grid = suite_case(s, "Grid", test_grid_labels_every_key, test_bpe_end_of_word_stripped,
                             test_grid_numbers_only_where_they_fit, test_grid_canvas_grows_with_heads,
                             test_grid_one_head_under_title, test_heatmap_fits);
    tcase_set_timeout(grid, 30);
    TCase *lines = suite_case(s, "Lines", test_lines_apart_and_off_the_axis, test_marked_label_clears_title);
    tcase_set_timeout(lines, 30);
    return s;
}
