/* corpus.c - parallel corpora: generated, read from TSV, or from Ding.
 *
 * Read corpus.h first. This file has two parts:
 *   1. Corpora: sentence pairs in memory, a set of distinct pairs,
 *      generation from the grammar (grammar.c) with disjoint splits, the
 *      seeded split, TSV loading and saving.
 *   2. The Ding dictionary: its example sentences and phrase pairs, and the
 *      split that needs no seed.
 */
#include "text/corpus.h"
#include "text/grammar.h"
#include "core/fail.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ============================================================================
 * 1. Corpora
 * ========================================================================== */

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

void corpus_free(Corpus *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->src[i]);
        free(c->tgt[i]);
    }
    free(c->src);
    free(c->tgt);
    memset(c, 0, sizeof *c);
}

static void corpus_push(Corpus *c, int *cap, const char *src, const char *tgt) {
    if (c->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        c->src = xrealloc(c->src, (size_t)*cap * sizeof *c->src);
        c->tgt = xrealloc(c->tgt, (size_t)*cap * sizeof *c->tgt);
    }
    c->src[c->n] = xstrdup(src);
    c->tgt[c->n] = xstrdup(tgt);
    c->n++;
}

/* FNV-1a over a, a tab, then b: a tab because ("ab", "c") is not ("a", "bc") */
static uint64_t fnv1a_pair(const char *a, const char *b) {
    return fnv1a_str(fnv1a_update(fnv1a_str(FNV1A_INIT, a), "\t", 1), b);
}

/* "Is pair i of c already in c?" by index, open addressing: no key string
 * per pair (the Ding dictionary gives over 350,000 phrase pairs). Every
 * "each distinct pair once" of this file is one of these. */
typedef struct {
    int *slot;      /* [cap] an index into the corpus + 1; 0: empty          */
    size_t cap, n;
} PairSet;

static void pairset_put(int *slot, size_t cap, const Corpus *c, int i) {
    size_t p = fnv1a_pair(c->src[i], c->tgt[i]) & (cap - 1);
    while (slot[p]) p = (p + 1) & (cap - 1);
    slot[p] = i + 1;
}

/* Adds pair i of c. 1 if no earlier pair of c is the same, else 0. */
static int pairset_add(PairSet *t, const Corpus *c, int i) {
    if (2 * (t->n + 1) > t->cap) {   /* at most half full: probes stay short */
        size_t cap = t->cap ? 2 * t->cap : 1024;
        int *slot = xcalloc(cap, sizeof(int));
        for (size_t k = 0; k < t->cap; k++)
            if (t->slot[k]) pairset_put(slot, cap, c, t->slot[k] - 1);
        free(t->slot);
        t->slot = slot, t->cap = cap;
    }
    size_t p = fnv1a_pair(c->src[i], c->tgt[i]) & (t->cap - 1);
    for (; t->slot[p]; p = (p + 1) & (t->cap - 1)) {
        int j = t->slot[p] - 1;
        if (!strcmp(c->src[j], c->src[i]) && !strcmp(c->tgt[j], c->tgt[i])) return 0;
    }
    t->slot[p] = i + 1;
    t->n++;
    return 1;
}

/* Appends (src, tgt) to c unless c holds it already. */
static void push_distinct(Corpus *c, int *cap, PairSet *seen, const char *src, const char *tgt) {
    corpus_push(c, cap, src, tgt);
    if (!pairset_add(seen, c, c->n - 1)) {
        c->n--;
        free(c->src[c->n]);
        free(c->tgt[c->n]);
    }
}

/* Fisher-Yates on the pair indices */
static void shuffle_ints(int *a, int n, Rng *r) {
    for (int i = n - 1; i > 0; i--) {
        int j = rng_int(r, i + 1), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Copies pairs idx[lo..hi) of all into out. */
static void take_range(Corpus *out, const Corpus *all, const int *idx, int lo, int hi) {
    memset(out, 0, sizeof *out);
    int cap = 0;
    for (int i = lo; i < hi; i++) corpus_push(out, &cap, all->src[idx[i]], all->tgt[idx[i]]);
}

int corpus_generate(Corpus *train, Corpus *dev, Corpus *test, int n_train, int n_dev,
                    int n_test, uint64_t seed, char *err, size_t errlen) {
    memset(train, 0, sizeof *train);
    memset(dev, 0, sizeof *dev);
    memset(test, 0, sizeof *test);
    if (n_train < 1 || n_dev < 1 || n_test < 1)
        return fail(err, errlen, "every split needs at least one sentence (train %d, dev %d, test %d)",
                   n_train, n_dev, n_test);
    long total = (long)n_train + n_dev + n_test;
    if (total > 5000000) return fail(err, errlen, "%ld sentences is more than this generator makes (5000000)", total);
    Rng r;
    rng_seed(&r, seed);
    Corpus all = {0};
    int cap = 0;
    PairSet seen = {0};
    char en[512], de[512], e2[256];
    long draws = 0, limit = 20 * total + 1000;
    while (all.n < total) {
        if (++draws > limit) {
            free(seen.slot);
            corpus_free(&all);
            return fail(err, errlen, "after %ld draws only %d distinct sentences; ask for fewer", draws - 1, all.n);
        }
        Sentence s;
        corpus_random_sentence(&s, &r);
        int rc = corpus_render(&s, en, sizeof en, de, sizeof de, e2, sizeof e2);
        if (rc) {   /* the sampler only builds what the grammar allows */
            fprintf(stderr, "corpus: internal error: the sampler drew a bad sentence: %s\n", e2);
            abort();
        }
        /* English determines German (grammar.h): a new pair is a new English sentence */
        push_distinct(&all, &cap, &seen, en, de);
    }
    free(seen.slot);
    /* the sentences are drawn at random already; the cut is by position */
    int *idx = malloc((size_t)total * sizeof(int));
    if (!idx) {
        corpus_free(&all);
        return fail(err, errlen, "out of memory");
    }
    for (int i = 0; i < total; i++) idx[i] = i;
    take_range(train, &all, idx, 0, n_train);
    take_range(dev, &all, idx, n_train, n_train + n_dev);
    take_range(test, &all, idx, n_train + n_dev, (int)total);
    free(idx);
    corpus_free(&all);
    return 0;
}

int corpus_split(const Corpus *all, Corpus *train, Corpus *dev, Corpus *test, int n_dev,
                 int n_test, uint64_t seed, char *err, size_t errlen) {
    memset(train, 0, sizeof *train);
    memset(dev, 0, sizeof *dev);
    memset(test, 0, sizeof *test);
    /* keep each pair once, in file order */
    int *idx = malloc(((size_t)all->n + 1) * sizeof(int));
    if (!idx) return fail(err, errlen, "out of memory");
    PairSet seen = {0};
    int n = 0;
    for (int i = 0; i < all->n; i++)
        if (pairset_add(&seen, all, i)) idx[n++] = i;
    free(seen.slot);
    if (n < 3) {
        free(idx);
        return fail(err, errlen, "%d distinct sentence pair%s; training, dev and test need at least 3",
                   n, n == 1 ? "" : "s");
    }
    /* small corpora: dev and test take at most a tenth each, and at least 1 */
    if (n_dev > n / 10) n_dev = n / 10;
    if (n_test > n / 10) n_test = n / 10;
    if (n_dev < 1) n_dev = 1;
    if (n_test < 1) n_test = 1;
    Rng r;
    rng_seed(&r, seed);
    shuffle_ints(idx, n, &r);
    int n_train = n - n_dev - n_test;
    take_range(train, all, idx, 0, n_train);
    take_range(dev, all, idx, n_train, n_train + n_dev);
    take_range(test, all, idx, n_train + n_dev, n);
    free(idx);
    return 0;
}

long utf8_invalid_at(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned cp, min;
        if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
        else return (long)i;
        if (i + len > n) return (long)i;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return (long)i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (long)i;
        i += len;
    }
    return -1;
}

/* Collapses runs of spaces to one and trims both ends, in place. */
static void squeeze_spaces(char *s) {
    char *w = s;
    int space = 1;   /* drops leading spaces */
    for (char *p = s; *p; p++) {
        if (*p == ' ') {
            if (!space) *w++ = ' ';
            space = 1;
        } else {
            *w++ = *p;
            space = 0;
        }
    }
    if (w > s && w[-1] == ' ') w--;
    *w = 0;
}

/* ---- reading a text file line by line ------------------------------------ */

/* One text file read a line at a time, by hand: fgets cannot tell a NUL
 * byte from the end of the line. corpus_load_tsv and corpus_load_ding
 * share it, and with it their messages. */
typedef struct {
    FILE *f;
    const char *path;
    char *line;     /* [max + 2] the current line without its "\n" or "\r\n" */
    size_t max;     /* the longest line kept whole, in bytes                */
    size_t n;       /* bytes in line                                        */
    int lineno;     /* the current line's number, from 1                    */
    int too_long;   /* the current line held more than max bytes (cut)      */
    int nul;        /* the current line held a NUL byte                     */
} LineReader;

/* Opens path, a regular file, for lines of up to max bytes. 0; 1 when it
 * cannot be read: "PATH: why", or "PATH not found: MISSING" when missing is
 * given; 2 when it is not a file to read at all, as checkpoint.c's loaders
 * say it (fio_open_read: a folder, a FIFO, a device are refused before a
 * byte is read, and a FIFO without a writer cannot hang us):
 * "'PATH' is not a regular file (it is a FIFO); give GIVE". */
static int lines_open(LineReader *r, const char *path, size_t max, const char *missing, const char *give,
                      char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT && missing) return fail_rc(1, err, errlen, "%s not found: %s", path, missing);
        return fail_rc(1, err, errlen, "%s: %s", path, strerror(errno));
    }
    char why[512];
    r->f = fio_open_read(path, NULL, why, sizeof why);
    if (!r->f) {   /* what is there now decides: something not a file is bad input (2) */
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return fail_rc(2, err, errlen, "%s; give %s", why, give);
        return fail_rc(1, err, errlen, "%s", why);
    }
    r->path = path;
    r->max = max;
    r->line = xmalloc(max + 2);
    return 0;
}

/* Reads the next line into r->line. 1 for a line, 0 at the end of the
 * file, -1 after a read error (message in err). getc_unlocked: one
 * reader, and the 25 MB of the Ding dictionary go 5x faster. */
static int lines_next(LineReader *r, char *err, size_t errlen) {
    size_t n = 0;
    int ch;
    r->too_long = r->nul = 0;
    while ((ch = getc_unlocked(r->f)) != EOF && ch != '\n') {
        if (ch == 0) r->nul = 1;
        if (n < r->max + 1) r->line[n++] = (char)ch;
        else r->too_long = 1;
    }
    if (ch == EOF && ferror(r->f))
        return fail_rc(1, err, errlen, "%s: read error after line %d: %s", r->path, r->lineno, strerror(errno)), -1;
    if (ch == EOF && n == 0) return 0;   /* end of file (after a final newline, or empty) */
    r->lineno++;
    if (n > 0 && r->line[n - 1] == '\r') n--;
    r->line[n] = 0;
    if (n > r->max) r->too_long = 1;
    r->n = n;
    return 1;
}

/* 0 when the current line is text; 2 with a message naming the line when
 * it holds a NUL byte ("is this WHAT?") or invalid UTF-8 (then utf8_note). */
static int lines_check_text(const LineReader *r, const char *what, const char *utf8_note, char *err,
                            size_t errlen) {
    if (r->nul) return fail(err, errlen, "%s line %d: contains a NUL byte (is this %s?)", r->path, r->lineno, what);
    long bad = utf8_invalid_at(r->line, r->n);
    if (bad >= 0)
        return fail(err, errlen, "%s line %d: invalid UTF-8 at byte %ld (0x%02X); %s", r->path, r->lineno,
                    bad + 1, (unsigned char)r->line[bad], utf8_note);
    return 0;
}

static void lines_close(LineReader *r) {
    if (r->f) fclose(r->f);
    free(r->line);
    memset(r, 0, sizeof *r);
}

int corpus_load_tsv(Corpus *c, const char *path, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    LineReader r;
    int open_rc = lines_open(&r, path, CORPUS_MAX_LINE, NULL, "a .tsv file", err, errlen);
    if (open_rc) return open_rc;
    char *line = r.line;
    int cap = 0, rc = 0, got;
    while ((got = lines_next(&r, err, errlen)) > 0) {
        int lineno = r.lineno;
        size_t n = r.n;
        if (r.too_long) {
            rc = fail(err, errlen, "%s line %d: longer than %d bytes", path, lineno, CORPUS_MAX_LINE);
            break;
        }
        if ((rc = lines_check_text(&r, "a text file", "the file must be UTF-8", err, errlen))) break;
        char *tab = strchr(line, '\t');
        if (n == 0) {
            rc = fail(err, errlen, "%s line %d: empty; every line must be source<TAB>target", path, lineno);
            break;
        }
        if (!tab) {
            rc = fail(err, errlen, "%s line %d: no tab; every line must be source<TAB>target", path, lineno);
            break;
        }
        if (strchr(tab + 1, '\t')) {
            rc = fail(err, errlen, "%s line %d: more than one tab; every line must be source<TAB>target",
                     path, lineno);
            break;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char u = (unsigned char)line[i];
            if ((u < 0x20 && u != '\t') || u == 0x7F) {
                rc = fail(err, errlen, "%s line %d: control character 0x%02X at byte %zu", path, lineno, u, i + 1);
                break;
            }
        }
        if (rc) break;
        *tab = 0;
        char *src = line, *tgt = tab + 1;
        squeeze_spaces(src);
        squeeze_spaces(tgt);
        if (!*src || !*tgt) {
            rc = fail(err, errlen, "%s line %d: the %s side is empty", path, lineno, !*src ? "source" : "target");
            break;
        }
        corpus_push(c, &cap, src, tgt);
    }
    if (got < 0) rc = 1;
    lines_close(&r);
    if (rc) {
        corpus_free(c);
        return rc;
    }
    if (c->n == 0) return fail(err, errlen, "%s: the corpus is empty (no source<TAB>target lines)", path);
    return 0;
}

int corpus_save_tsv(const Corpus *c, const char *path, char *err, size_t errlen) {
    FioWriter w;   /* a unique temporary beside path, renamed over it when complete */
    if (fio_create(&w, path, err, errlen)) return 1;
    for (int i = 0; i < c->n; i++) fprintf(w.f, "%s\t%s\n", c->src[i], c->tgt[i]);
    return fio_commit(&w, err, errlen) ? 1 : 0;   /* fio_commit checks every write above */
}

void corpus_copy(Corpus *dst, const Corpus *src) {
    memset(dst, 0, sizeof *dst);
    int cap = 0;
    for (int i = 0; i < src->n; i++) corpus_push(dst, &cap, src->src[i], src->tgt[i]);
}

/* ============================================================================
 * 2. The Ding dictionary, and a split without a seed
 * ========================================================================== */

/* Cuts spaces off both ends of s, in place; returns where s now starts. */
static char *trim_spaces(char *s) {
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == ' ') s[--n] = 0;
    return s;
}

/* 1 when one side's trimmed part reads as an example sentence: it ends in
 * '.', '!' or '?', has three words or more, and holds no markup ({m},
 * [ugs.], (...)), no '/' (alternatives: "he/she") and no ';' (synonyms),
 * no tab or control character: plain text a model can learn from. */
static int ding_sentence_like(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || (s[n - 1] != '.' && s[n - 1] != '!' && s[n - 1] != '?')) return 0;
    int words = 0, in_word = 0;
    for (const char *p = s; *p; p++) {
        unsigned char u = (unsigned char)*p;
        if (u < 0x20 || u == 0x7F || strchr("{}[]()/;", u)) return 0;
        if (u == ' ') in_word = 0;
        else if (!in_word) in_word = 1, words++;
    }
    return words >= 3;
}

/* The phrase in one side's part, into out (room for strlen(part) + 1): the
 * first synonym (up to a ';' outside brackets), without {...}, [...] and
 * (...) (nested ones too), spaces collapsed. 1 if something clean is left:
 * not empty, no '/', no stray bracket, no control character. */
static int ding_phrase(const char *part, char *out) {
    int depth = 0;
    char *w = out;
    for (const char *p = part; *p && !(*p == ';' && depth == 0); p++) {
        if (*p == '{' || *p == '[' || *p == '(') depth++;
        else if ((*p == '}' || *p == ']' || *p == ')') && depth > 0) depth--;
        else if (depth == 0) *w++ = *p;   /* a ')' with no '(' stays, and is refused below */
    }
    *w = 0;
    if (depth > 0) return 0;   /* an unclosed bracket: markup we cannot take off */
    squeeze_spaces(out);
    if (!*out) return 0;
    for (const char *p = out; *p; p++) {
        unsigned char u = (unsigned char)*p;
        if (u < 0x20 || u == 0x7F || strchr("/{}[]()", u)) return 0;
    }
    return 1;
}

typedef struct {
    Corpus *sent, *phrases;        /* phrases may be NULL                    */
    int cap_s, cap_p;
    PairSet seen_s, seen_p;
    char *en_buf, *de_buf;         /* [DING_MAX_LINE + 2] phrase scratch     */
} DingReader;

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

/* One entry "de :: en", both sides writable: the k-th '|' parts of the two
 * sides pair up; each pair is a sentence pair, a phrase pair, or nothing. */
static void ding_entry(DingReader *d, char *de, char *en) {
    if (count_char(de, '|') != count_char(en, '|')) return;   /* cannot be aligned */
    for (;;) {
        char *de_bar = strchr(de, '|'), *en_bar = strchr(en, '|');
        if (de_bar) *de_bar = 0;
        if (en_bar) *en_bar = 0;
        char *g = trim_spaces(de), *e = trim_spaces(en);
        if (ding_sentence_like(g) && ding_sentence_like(e)) {
            squeeze_spaces(g);
            squeeze_spaces(e);
            push_distinct(d->sent, &d->cap_s, &d->seen_s, e, g);
        } else if (d->phrases && ding_phrase(e, d->en_buf) && ding_phrase(g, d->de_buf)) {
            push_distinct(d->phrases, &d->cap_p, &d->seen_p, d->en_buf, d->de_buf);
        }
        if (!de_bar) break;   /* the counts agree: en_bar is NULL too */
        de = de_bar + 1, en = en_bar + 1;
    }
}

int corpus_load_ding(Corpus *sent, Corpus *phrases, const char *path, char *err, size_t errlen) {
    memset(sent, 0, sizeof *sent);
    if (phrases) memset(phrases, 0, sizeof *phrases);
    LineReader r;
    int open_rc = lines_open(&r, path, DING_MAX_LINE,
                             "the Ding dictionary comes with Debian's package trans-de-en; "
                             "install it: apt-get install trans-de-en",
                             "the Ding dictionary (" DING_PATH ", from trans-de-en)", err, errlen);
    if (open_rc) return open_rc;
    DingReader d = {.sent = sent, .phrases = phrases};
    d.en_buf = xmalloc(DING_MAX_LINE + 2);
    d.de_buf = xmalloc(DING_MAX_LINE + 2);
    int rc = 0, got;
    while ((got = lines_next(&r, err, errlen)) > 0) {
        char *line = r.line;
        if (r.too_long) continue;   /* skipped whole (corpus.h: DING_MAX_LINE) */
        if ((rc = lines_check_text(&r, "the Ding dictionary", "the Ding dictionary is UTF-8", err, errlen))) break;
        if (line[0] == '#') continue;   /* a comment */
        char *sep = strstr(line, "::");
        if (!sep) continue;             /* not an entry */
        *sep = 0;
        ding_entry(&d, line, sep + 2);
    }
    if (got < 0) rc = 1;
    lines_close(&r);
    free(d.en_buf);
    free(d.de_buf);
    free(d.seen_s.slot);
    free(d.seen_p.slot);
    if (!rc && sent->n == 0)
        rc = fail(err, errlen, "%s: no example sentence pair found (is it the Ding dictionary? an entry with one "
                  "reads \"Er kommt heute. :: He comes today.\")", path);
    if (rc) {
        corpus_free(sent);
        if (phrases) corpus_free(phrases);
    }
    return rc;
}

/* A pair of the corpus, and where the fixed split ranks it. */
typedef struct {
    uint64_t h;            /* FNV-1a of the English side                     */
    const char *en, *de;
    int i;                 /* index in the corpus (file order)               */
} Ranked;

static int ranked_cmp(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    int c = strcmp(x->en, y->en);   /* the same hash, other English: rare, but ordered */
    if (!c) c = strcmp(x->de, y->de);
    if (!c) c = (x->i > y->i) - (x->i < y->i);   /* identical pairs: the first in the file first */
    return c;
}

/* The end of a cut that takes `want` pairs of r[0..n) from `from` on,
 * moved on past pairs with the same English as the last one taken (same
 * English, same hash: they sit side by side in r). */
static int fixed_cut(const Ranked *r, int n, int from, int want) {
    long end = (long)from + want;
    if (end >= n) return n;
    while (end < n && !strcmp(r[end].en, r[end - 1].en)) end++;
    return (int)end;
}

int corpus_split_fixed(const Corpus *all, Corpus *train, Corpus *dev, Corpus *test, int n_dev, int n_test,
                       char *err, size_t errlen) {
    memset(train, 0, sizeof *train);
    memset(dev, 0, sizeof *dev);
    memset(test, 0, sizeof *test);
    if (n_dev < 1 || n_test < 1)
        return fail(err, errlen, "dev and test need at least one pair each (asked: dev %d, test %d)", n_dev, n_test);
    Ranked *r = xmalloc(((size_t)all->n + 1) * sizeof *r);
    for (int i = 0; i < all->n; i++) r[i] = (Ranked){fnv1a_str(FNV1A_INIT, all->src[i]), all->src[i], all->tgt[i], i};
    qsort(r, (size_t)all->n, sizeof *r, ranked_cmp);
    int n = 0;   /* identical pairs are neighbours now: keep the first */
    for (int k = 0; k < all->n; k++)
        if (n == 0 || strcmp(r[k].en, r[n - 1].en) || strcmp(r[k].de, r[n - 1].de)) r[n++] = r[k];
    int dev_end = fixed_cut(r, n, 0, n_dev), test_end = fixed_cut(r, n, dev_end, n_test);
    if (n - test_end < test_end) {
        free(r);
        return fail(err, errlen, "%d distinct sentence pair%s: dev %d and test %d would leave %d to train on; "
                    "training needs at least as many as dev and test together (ask for fewer)",
                    n, n == 1 ? "" : "s", dev_end, test_end - dev_end, n - test_end);
    }
    /* each split keeps file order: mark every pair's split, then walk the corpus */
    unsigned char *split = xcalloc((size_t)all->n + 1, 1);   /* 0: a repeat, dropped */
    for (int k = 0; k < n; k++) split[r[k].i] = k < dev_end ? 2 : k < test_end ? 3 : 1;
    int cap[4] = {0};
    Corpus *out[4] = {NULL, train, dev, test};
    for (int i = 0; i < all->n; i++)
        if (split[i]) corpus_push(out[split[i]], &cap[split[i]], all->src[i], all->tgt[i]);
    free(split);
    free(r);
    return 0;
}
