/* lineview.h - attention drawn as the paper draws it (Figures 3-5).
 *
 * The paper's attention figures are not heatmaps: the sentence is written
 * twice, a line joins each query word to each key word, its opacity is the
 * attention weight and its colour names the head. This module draws the
 * encoder self-attention of a trained model that way, in three views chosen
 * from the run's own weights (the rules are in lineview_choose), as
 *
 *   DIR/lines_fig3.png, lines_fig4.png, lines_fig5.png  through gnuplot,
 *                      each with its .gp script and .dat data (plot.h's way;
 *                      without gnuplot the .dat and .gp are still written)
 *   DIR/attention_lines.html  one self-contained page: the three figures as
 *                      inline SVG, every layer's and head's weights embedded
 *                      (4 decimals) and a small inline script where choosing
 *                      a layer, a head (or all heads) and a query word draws
 *                      that view. It loads nothing from anywhere else. The
 *                      page honours a URL hash: #layer=2&head=3&query=5 or
 *                      #layer=1&head=all&query=all (layers, heads and token
 *                      positions count from 1).
 *
 * Every line's opacity is its weight, no gamma: stroke-opacity="w" in the
 * SVG, alpha byte 255*(1 - w) (gnuplot's transparency) in the PNG's data.
 *
 * Tokens: labels written "<...>" (<s>, </s>, <pad>, <unk>) are not words,
 * so the rules skip them as queries and as far keys (their lines are still
 * drawn). Labels are drawn as the heatmaps draw them (plot_label, plot.h):
 * BPE's end-of-word marker "</w>" dropped, a piece that continues into the
 * next token with a trailing '·': "wom·" "an" for wom + an</w>.
 */
#ifndef LINEVIEW_H
#define LINEVIEW_H

#include "model/model.h"

/* One sentence's encoder self-attention, every layer and head. */
typedef struct {
    int N, h, T;                 /* layers, heads, tokens                    */
    const float *w;              /* (N, h, T, T): row i = query i's softmax  */
    const char *const *tokens;   /* T labels as the chapter has them         */
} LineSet;

/* The three views and the numbers that chose them (0-based indices). */
typedef struct {
    int l3, q3;          /* Figure 3: layer, query word                      */
    double dist3;        /*   its head-averaged distance, in tokens          */
    double excess3;      /*   dist3 less uniform attention's: what chose it  */
    int l4[2], k4[2];    /* Figure 4: (layer, head) of the two heads         */
    double far4[2];      /*   each head's far focus                          */
    int l5[2], k5[2];    /* Figure 5: (layer, head) of the two heads         */
    double tv5, sharp5[2], score5;   /* their row difference, sharpnesses,
                                        tv5 * min(sharp5): the score         */
} LineChoice;

/* The measures the rules use. words[i] = 1 for a word position (not
 * "<...>"); when no position is a word, every position counts. */
void lineview_words(const LineSet *s, unsigned char *words);
/* sum over word keys j of mean_k a_ij |i - j|: how far query i of layer l
 * looks, averaged over the heads (Figure 3's measure). */
double lineview_distance(const LineSet *s, const unsigned char *words, int l, int i);
/* The same for uniform attention (1/T on every key): sum_j |i - j| / T over
 * word keys. A word at either end of the sentence has the farthest keys,
 * so Figure 3 ranks by the distance beyond this. */
double lineview_uniform_distance(const LineSet *s, const unsigned char *words, int i);
/* Far focus of head k of layer l: the mean over word queries i of the
 * largest a_ij over word keys j with |i - j| >= 2 (Figure 4's measure). */
double lineview_far_focus(const LineSet *s, const unsigned char *words, int l, int k);
/* Sharpness: the mean over word queries of the row's largest weight. */
double lineview_sharpness(const LineSet *s, const unsigned char *words, int l, int k);
/* How differently two heads look: the mean over word queries of half the
 * L1 distance between their rows (0: the same rows, 1: disjoint). */
double lineview_row_diff(const LineSet *s, const unsigned char *words, int la, int ka, int lb, int kb);

/* The rules (stated again in the terminal summary, the PNG titles and the
 * page):
 *   Figure 3: the layer and word query with the largest lineview_distance
 *             less lineview_uniform_distance (the word that looks farthest
 *             beyond what uniform attention would);
 *   Figure 4: the two heads of one layer with the largest sum of far focus;
 *   Figure 5: the two heads of one layer with the largest
 *             row_diff * min(sharpness of the two).
 * With one head a layer, the two heads of Figures 4 and 5 come from two
 * layers; with one head in all, that head is shown twice. Ties go to the
 * first in (layer, head, position) order. */
void lineview_choose(const LineSet *s, LineChoice *c);

/* The terminal summary (the chosen views, the numbers that chose them, the
 * strongest lines as "word -> word 0.83") and the files of the header.
 * 0, or -1 when a file could not be written (already said and counted by
 * fio_note_failure, so the program exits 1 at the end). */
int lineview_write(const char *dir, const LineSet *s, const LineChoice *c, const char *what);

/* The whole job for a model: the encoder self-attention of its last forward
 * pass (batch row 0, Ts tokens; model_read brings it from any backend), the
 * rules, the summary and the files. what names the run in titles. */
int lineview_encoder(const char *dir, const Model *m, int Ts, const char *const *tokens, const char *what);

#endif
