/* bleu.c - corpus BLEU-4 (see bleu.h). */
#include "text/bleu.h"
#include "core/fail.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- whitespace, as Python's str.split() sees it ---------------------- */

/* Bytes of the whitespace character that starts at s (0 if none): the
 * characters for which Python's str.isspace() holds, which is where
 * sacrebleu's line.split() cuts. Besides ' ' and \t\n\v\f\r these are the
 * separators \x1c-\x1f and, in UTF-8, U+0085, the no-break space U+00A0
 * (common in French and German text: "3\u00a0m"), U+1680, U+2000-U+200A,
 * U+2028, U+2029, U+202F, U+205F and the ideographic space U+3000.
 * s is NUL-terminated, so the && chains stop at its end. */
static int space_len(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] == ' ' || (p[0] >= '\t' && p[0] <= '\r') || (p[0] >= 0x1c && p[0] <= 0x1f)) return 1;
    if (p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2;
    if (p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80) return 3;
    if (p[0] == 0xe2 && p[1] == 0x80 && ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf))
        return 3;
    if (p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) return 3;
    if (p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80) return 3;
    return 0;
}

/* Length of s without its trailing whitespace (Python's s.rstrip()). A
 * byte-by-byte walk is safe in UTF-8: the bytes that follow a lead byte
 * (0x80-0xbf) never start a whitespace character. */
static size_t rstrip_len(const char *s) {
    size_t keep = 0, i = 0;
    while (s[i]) {
        int k = space_len(s + i);
        if (k) i += (size_t)k;
        else keep = ++i;
    }
    return keep;
}

/* Rewrites s[0..n) (NUL at s[n]) in place as its words joined by single
 * spaces, none at either end: Python's ' '.join(s.split()). Returns the new
 * length. */
static size_t join_words(char *s, size_t n) {
    size_t w = 0, r = 0;
    while (r < n) {
        int k = space_len(s + r);
        if (k) {
            r += (size_t)k;
            continue;
        }
        if (w > 0) s[w++] = ' ';
        while (r < n && !space_len(s + r)) s[w++] = s[r++];
    }
    s[w] = 0;
    return w;
}

/* ---- 13a: the tokenizer of WMT's mteval-v13a.pl ------------------------- */

/* A mirror of sacrebleu 2.6.0's Tokenizer13a (tokenizer_13a.py) and the
 * TokenizerRegexp it ends with (tokenizer_re.py), step for step. The rules
 * are about ASCII punctuation, so they run on bytes: every byte of a UTF-8
 * character other than ASCII is >= 0x80, never a digit, never punctuation.
 * Where Python's [^0-9] takes a whole character ("ä" in "Bäume."), the
 * byte version takes its last byte (before '.') or its first (after '.'),
 * and writes the same spaces in the same places: "Bäume ." either way. */

/* In place: every non-overlapping `from` in s[0..n), left to right, becomes
 * `to` (Python's str.replace). `to` is never longer, so the writer stays
 * behind the reader. Returns the new length. */
static size_t replace_all(char *s, size_t n, const char *from, const char *to) {
    size_t lf = strlen(from), lt = strlen(to), w = 0, r = 0;
    assert(lt <= lf);
    while (r < n) {
        if (r + lf <= n && memcmp(s + r, from, lf) == 0) {
            memcpy(s + w, to, lt);
            w += lt;
            r += lf;
        } else {
            s[w++] = s[r++];
        }
    }
    return w;
}

/* Rule 1's class [\{-\~\[-\` -\&\(-\+\:-\@\/]: the ASCII punctuation that
 * always stands alone, !"#$%&()*+/:;<=>?@[\]^_`{|}~ and the space.
 * Left out, for rules 2-4 or for ever: ' , - . (so "don't" and "e-mail"
 * stay one token). */
static int is_lone(unsigned char c) {
    return (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') || c == '/' || (c >= ':' && c <= '@') ||
           (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int not_digit(unsigned char c) { return !is_digit(c); }
static int is_dot_comma(unsigned char c) { return c == '.' || c == ','; }
static int is_hyphen(unsigned char c) { return c == '-'; }

/* re.sub of a two-character pattern (a)(b) over src[0..n) into dst: the
 * scan goes left to right, a match writes " \1 \2" (space_first) or
 * "\1 \2 " and the scan goes on after it, so matches never overlap: in
 * "a.b.c" both "a." and "b." match. Returns the length written. */
static size_t sub_pair(char *dst, const char *src, size_t n, int (*a)(unsigned char), int (*b)(unsigned char),
                       int space_first) {
    size_t w = 0, r = 0;
    while (r < n) {
        if (r + 1 < n && a((unsigned char)src[r]) && b((unsigned char)src[r + 1])) {
            if (space_first) dst[w++] = ' ';
            dst[w++] = src[r];
            dst[w++] = ' ';
            dst[w++] = src[r + 1];
            if (!space_first) dst[w++] = ' ';
            r += 2;
        } else {
            dst[w++] = src[r++];
        }
    }
    dst[w] = 0;
    return w;
}

/* The 13a tokenisation of in[0..n), in a new NUL-terminated string of
 * length *len; the caller frees it. */
static char *tokenize_13a(const char *in, size_t n, size_t *len) {
    /* Room for the worst case: the two padding spaces, then rule 1 adds 2
     * bytes around each lone byte and rules 2-4 add at most 2 per '.' or ','
     * (twice: once in rule 2, once in rule 3) and 2 per '-': at most 4 more
     * bytes per input byte. */
    size_t cap = 5 * (n + 2) + 1;
    char *a = xmalloc(cap), *b = xmalloc(cap);
    memcpy(a + 1, in, n);

    /* mteval's language-independent part. "<skipped>" marks a segment the
     * system did not translate; "-\n" joins a word split over two lines;
     * then lines become one; then the four XML escapes mteval's input
     * format (SGML) needs are undone, in this order, each over the whole
     * line (so "&amp;lt;" ends as "<", "&amp;quot;" as "&quot;"). */
    size_t m = replace_all(a + 1, n, "<skipped>", "");
    m = replace_all(a + 1, m, "-\n", "");
    m = replace_all(a + 1, m, "\n", " ");
    m = replace_all(a + 1, m, "&quot;", "\"");
    m = replace_all(a + 1, m, "&amp;", "&");
    m = replace_all(a + 1, m, "&lt;", "<");
    m = replace_all(a + 1, m, "&gt;", ">");
    /* f' {line} ': a space at each end, so that a '.' or ',' at the very
     * start or end has a neighbour for rules 2 and 3 (".5" -> ". 5",
     * "5." -> "5 .") */
    a[0] = ' ';
    a[m + 1] = ' ';
    m += 2;

    /* rule 1: lone punctuation gets a space on each side,
     * "entmutigen!" -> "entmutigen ! ", "(Hallo)" -> " ( Hallo ) " */
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        unsigned char c = (unsigned char)a[i];
        if (is_lone(c)) {
            b[k++] = ' ';
            b[k++] = (char)c;
            b[k++] = ' ';
        } else {
            b[k++] = (char)c;
        }
    }
    b[k] = 0;
    /* rule 2, ([^0-9])([\.,]) -> "\1 \2 ": a '.' or ',' after a non-digit
     * is split off, "Bäume." -> "Bäume . ", "U.S.A." -> "U . S . A . ";
     * "3.5" and "1,000" keep theirs */
    m = sub_pair(a, b, k, not_digit, is_dot_comma, 0);
    /* rule 3, ([\.,])([^0-9]) -> " \1 \2": a '.' or ',' before a non-digit
     * too, "2,000." -> "2,000 . ", "1.a" -> "1 . a" */
    k = sub_pair(b, a, m, is_dot_comma, not_digit, 1);
    /* rule 4, ([0-9])(-) -> "\1 \2 ": a '-' after a digit is split off,
     * "1,000-2,000" -> "1,000 - 2,000"; "e-mail" and "a-1" stay whole */
    m = sub_pair(a, b, k, is_digit, is_hyphen, 0);
    /* ' '.join(line.split()): one space between tokens */
    *len = join_words(a, m);
    free(b);
    return a;
}

size_t bleu_tokenize_13a(const char *in, char *out, size_t outlen) {
    size_t len;
    char *t = tokenize_13a(in, strlen(in), &len);
    if (outlen > 0) {
        size_t c = len < outlen - 1 ? len : outlen - 1;
        memcpy(out, t, c);
        out[c] = 0;
    }
    free(t);
    return len;
}

int bleu_signature(char *out, size_t n, BleuTok tok) {
    assert(tok == BLEU_TOK_NONE || tok == BLEU_TOK_13A);
    /* sacrebleu's BLEUSignature: one reference, case-sensitive ("mixed"),
     * no effective order, exp smoothing; the version pins the tokenizer. */
    return snprintf(out, n, "nrefs:1|case:mixed|eff:no|tok:%s|smooth:exp|version:%s",
                    tok == BLEU_TOK_13A ? "13a" : "none", BLEU_SACREBLEU_VERSION);
}

/* ---- n-gram statistics ------------------------------------------------- */

typedef struct {
    const char *p;   /* first byte of the token */
    int n;           /* bytes                   */
} Tok;

/* Splits s on whitespace (space_len) into at most cap tokens; returns the
 * count (which may exceed cap: then only cap were stored). */
static int tokenize(const char *s, Tok *t, int cap) {
    int k = 0;
    while (*s) {
        int sp;
        while ((sp = space_len(s))) s += sp;
        const char *w = s;
        while (*s && !space_len(s)) s++;
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

void bleu_add_tok(BleuStats *s, const char *hyp, const char *ref, BleuTok tok) {
    assert(tok == BLEU_TOK_NONE || tok == BLEU_TOK_13A);
    if (tok == BLEU_TOK_NONE) {
        bleu_add(s, hyp, ref);
        return;
    }
    /* sacrebleu tokenises sent.rstrip(): it matters for a line ending in
     * "-\n", which rstrip turns into a plain '-' before 13a could join it */
    size_t nh, nr;
    char *h = tokenize_13a(hyp, rstrip_len(hyp), &nh), *r = tokenize_13a(ref, rstrip_len(ref), &nr);
    bleu_add(s, h, r);
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
