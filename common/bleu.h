/* bleu.h - corpus BLEU-4 with the brevity penalty (Papineni et al. 2002),
 * the score of the paper's Table 2 (Sec. 6.1).
 *
 *   p_n  = sum over sentences of clipped n-gram matches
 *          / sum over sentences of hypothesis n-grams         (n = 1..4)
 *   BP   = 1 if c > r, else exp(1 - r/c)   (c, r: total hypothesis and
 *                                          reference lengths in tokens)
 *   BLEU = 100 * BP * exp(mean over n of log p_n)
 *
 * "Clipped": a hypothesis n-gram counts at most as often as it occurs in
 * the reference. Sums run over the whole corpus before the division, so a
 * corpus score is not the mean of sentence scores.
 *
 * This matches sacrebleu's defaults with tokenize='none' (our text is
 * already tokenised: split on spaces), one reference, no lowercasing, and
 * its default smoothing 'exp': a p_n with zero matches becomes
 * 1 / (2^k * total_n) for the k-th such n, instead of sending BLEU to 0.
 * tests/check_bleu.c compares against sacrebleu itself (tests/bleu_ref.py).
 */
#ifndef BLEU_H
#define BLEU_H

#include <stdint.h>

#define BLEU_N 4

typedef struct {
    int64_t correct[BLEU_N];   /* clipped matches of each order          */
    int64_t total[BLEU_N];     /* hypothesis n-grams of each order       */
    int64_t sys_len, ref_len;  /* tokens                                 */
} BleuStats;

typedef struct {
    double score;              /* 0..100                                 */
    double prec[BLEU_N];       /* p_n in percent (after smoothing)       */
    double bp;                 /* brevity penalty                        */
    double ratio;              /* sys_len / ref_len                      */
} Bleu;

/* Adds one hypothesis / reference pair (space-separated tokens). */
void bleu_add(BleuStats *s, const char *hyp, const char *ref);
/* The corpus score of everything added. */
Bleu bleu_compute(const BleuStats *s);
/* "BLEU = 87.12 93.4/88.0/84.9/81.7 (BP = 1.000 ratio = 1.002 hyp_len = ... ref_len = ...)",
 * the way sacrebleu prints it. */
void bleu_format(const BleuStats *s, const Bleu *b, char *buf, int len);

#endif
