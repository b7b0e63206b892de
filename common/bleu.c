/* bleu.c - corpus BLEU-4 (see bleu.h). */
#include "bleu.h"
#include "fail.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p;   /* first byte of the token */
    int n;           /* bytes                   */
} Tok;

/* Splits s on spaces into at most cap tokens; returns the count (which may
 * exceed cap: then only cap were stored). */
static int tokenize(const char *s, Tok *t, int cap) {
    int k = 0;
    while (*s) {
        while (*s == ' ') s++;
        const char *w = s;
        while (*s && *s != ' ') s++;
        if (s > w) {
            if (k < cap) t[k] = (Tok){w, (int)(s - w)};
            k++;
        }
    }
    return k;
}

static int tok_eq(const Tok *a, const Tok *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].n != b[i].n || memcmp(a[i].p, b[i].p, (size_t)a[i].n)) return 0;
    return 1;
}

/* occurrences of the n-gram g in t[0..len) */
static int64_t count_in(const Tok *g, int n, const Tok *t, int len) {
    int64_t c = 0;
    for (int i = 0; i + n <= len; i++) c += tok_eq(g, t + i, n);
    return c;
}

void bleu_add(BleuStats *s, const char *hyp, const char *ref) {
    int nh = tokenize(hyp, NULL, 0), nr = tokenize(ref, NULL, 0);
    Tok *h = xmalloc(((size_t)nh + 1) * sizeof(Tok)), *r = xmalloc(((size_t)nr + 1) * sizeof(Tok));
    tokenize(hyp, h, nh);
    tokenize(ref, r, nr);
    s->sys_len += nh;
    s->ref_len += nr;
    /* Counting by scanning is O(len^2) per order: fine for sentences of a
     * few dozen tokens, and there is no hash to get wrong. Each distinct
     * hypothesis n-gram is counted once, at its first occurrence. */
    for (int n = 1; n <= BLEU_N; n++) {
        if (nh >= n) s->total[n - 1] += nh - n + 1;
        for (int i = 0; i + n <= nh; i++) {
            int first = 1;
            for (int j = 0; j < i && first; j++) first = !tok_eq(h + j, h + i, n);
            if (!first) continue;
            int64_t ch = count_in(h + i, n, h, nh), cr = count_in(h + i, n, r, nr);
            s->correct[n - 1] += ch < cr ? ch : cr;
        }
    }
    free(h);
    free(r);
}

Bleu bleu_compute(const BleuStats *s) {
    Bleu b = {0};
    /* sacrebleu's compute_bleu with smooth_method='exp', effective_order off */
    double smooth = 1.0, logsum = 0;
    int zero = 1;
    for (int n = 0; n < BLEU_N; n++)
        if (s->correct[n]) zero = 0;   /* no match of any order: 0 */
    for (int n = 0; n < BLEU_N && !zero; n++) {
        if (s->total[n] == 0) {   /* no n-grams of this order at all: BLEU is 0 */
            zero = 1;
            break;
        }
        if (s->correct[n] == 0) {
            smooth *= 2;
            b.prec[n] = 100.0 / (smooth * (double)s->total[n]);
        } else {
            b.prec[n] = 100.0 * (double)s->correct[n] / (double)s->total[n];
        }
        logsum += log(b.prec[n]);
    }
    b.ratio = s->ref_len > 0 ? (double)s->sys_len / (double)s->ref_len : 0;
    if (s->sys_len < s->ref_len) b.bp = s->sys_len > 0 ? exp(1.0 - (double)s->ref_len / (double)s->sys_len) : 0;
    else b.bp = 1.0;
    b.score = zero ? 0.0 : b.bp * exp(logsum / BLEU_N);
    return b;
}

void bleu_format(const BleuStats *s, const Bleu *b, char *buf, int len) {
    snprintf(buf, (size_t)len, "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)",
             b->score, b->prec[0], b->prec[1], b->prec[2], b->prec[3], b->bp, b->ratio,
             (long long)s->sys_len, (long long)s->ref_len);
}
