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
 * This matches sacrebleu's corpus BLEU with one reference, no lowercasing,
 * and its default smoothing 'exp': a p_n with zero matches becomes
 * 1 / (2^k * total_n) for the k-th such n, instead of sending BLEU to 0.
 * tests/check_bleu.c compares against sacrebleu itself (tests/bleu_ref.py).
 *
 * Tokens. BLEU counts matching n-grams of *tokens*, so the score depends
 * on how the text is cut into tokens: with the text split on spaces only,
 * "entmutigen!" is one token that matches neither "entmutigen" nor "!".
 * Post (2018), "A Call for Clarity in Reporting BLEU Scores", found scores
 * of the same output differing by up to 1.8 BLEU between the setups papers
 * used, mostly from how each tokenised its references, and proposed one
 * standard: sacrebleu's default tokenizer '13a' (the rules of WMT's
 * mteval-v13a.pl), applied by the scorer to hypothesis and reference
 * alike, and a signature string that says which settings gave the number.
 * Two tokenizers here:
 *   BLEU_TOK_13A   the standard: punctuation split off by mteval's rules
 *                  (bleu_tokenize_13a); report this score, with the
 *                  signature, for any corpus.
 *   BLEU_TOK_NONE  split on whitespace only (sacrebleu tokenize='none'):
 *                  right only for text tokenised already (the synthetic
 *                  corpus, written with spaces around its punctuation);
 *                  report it beside the 13a score, never instead of it.
 */
#ifndef BLEU_H
#define BLEU_H

#include <stddef.h>
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

/* The sacrebleu release whose 13a tokenizer and signature the C code
 * mirrors (sacrebleu/tokenizers/tokenizer_13a.py, tokenizer_re.py). */
#define BLEU_SACREBLEU_VERSION "2.6.0"

typedef enum {
    BLEU_TOK_NONE,   /* split on whitespace only: sacrebleu tokenize='none' */
    BLEU_TOK_13A     /* sacrebleu's default, tokenize='13a'                 */
} BleuTok;

/* Adds one hypothesis / reference pair (UTF-8), tokenising both with tok
 * first, exactly as sacrebleu's corpus BLEU does (it strips trailing
 * whitespace before it tokenises). */
void bleu_add_tok(BleuStats *s, const char *hyp, const char *ref, BleuTok tok);
/* bleu_add_tok(s, hyp, ref, BLEU_TOK_NONE): for text tokenised already.
 * Tokens are split on whitespace as Python's str.split() splits (spaces,
 * tabs, no-break spaces, ...). */
void bleu_add(BleuStats *s, const char *hyp, const char *ref);
/* Writes the 13a tokenisation of the UTF-8 line in (tokens joined by single
 * spaces, none at either end) into out: at most outlen - 1 bytes and a NUL
 * (nothing when outlen is 0; out may then be NULL). Returns the length of
 * the whole tokenisation; a value >= outlen means out was cut short. */
size_t bleu_tokenize_13a(const char *in, char *out, size_t outlen);
/* Writes sacrebleu's signature of the settings bleu_compute uses with tok,
 * "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0", into out
 * (n bytes, snprintf rules). Returns what snprintf returns. Print it beside
 * the score: a BLEU without it cannot be compared with anyone else's. */
int bleu_signature(char *out, size_t n, BleuTok tok);
/* The corpus score of everything added. */
Bleu bleu_compute(const BleuStats *s);
/* "BLEU = 87.12 93.4/88.0/84.9/81.7 (BP = 1.000 ratio = 1.002 hyp_len = ... ref_len = ...)",
 * the way sacrebleu prints it. */
void bleu_format(const BleuStats *s, const Bleu *b, char *buf, int len);

#endif
