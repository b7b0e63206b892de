/* qkv_file.c - the parser behind chapter 03's --input (format in qkv_file.h).
 *
 * A failure here is a failure of the world (somebody's file), so nothing
 * asserts: every problem becomes "FILE:LINE: what was expected" in err and
 * a return value of 2, and every allocation made so far is freed. What the
 * file says is printed escaped (fio_escape): a token or a bad number
 * holding ESC or other control bytes cannot drive the reader's terminal.
 */
#include "qkv_file.h"
#include "core/fileio.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parser state ----------------------------------------------------------- */

typedef struct {
    char label;            /* 'Q', 'K' or 'V'                              */
    float *data;           /* (rows,cols), grown as rows arrive            */
    int *line;             /* (rows) the file line of each row             */
    int rows, cols, cap;   /* cap: rows that fit in data                   */
    int header_line;       /* 0 while the section has not been seen        */
    int first_row_line;
} Section;

typedef struct {
    char **words;
    int n, cap;
    int line;              /* first line that gave words, 0 if none        */
} Words;

typedef struct {
    const char *name;      /* file name for messages                       */
    char *err;
    size_t errlen;
    Section sec[3];        /* Q, K, V                                      */
    Words tokens, q_tokens, k_tokens;
} Parser;

static int fail(Parser *p, int line, const char *fmt, ...) {
    int n = snprintf(p->err, p->errlen, "%s:%d: ", p->name, line);
    if (n >= 0 && (size_t)n < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return 2;
}

static void words_free(Words *w) {
    for (int i = 0; i < w->n; i++) free(w->words[i]);
    free(w->words);
    memset(w, 0, sizeof *w);
}

static void parser_free(Parser *p) {
    for (int s = 0; s < 3; s++) free(p->sec[s].data), free(p->sec[s].line);
    words_free(&p->tokens);
    words_free(&p->q_tokens);
    words_free(&p->k_tokens);
}

/* Next whitespace-separated word of the line [*s, end): returns its start,
 * sets *len, advances *s; NULL when the line is used up. */
static const char *next_word(const char **s, const char *end, size_t *len) {
    const char *a = *s;
    while (a < end && isspace((unsigned char)*a)) a++;
    if (a == end) { *s = end; return NULL; }
    const char *b = a;
    while (b < end && !isspace((unsigned char)*b)) b++;
    *len = (size_t)(b - a);
    *s = b;
    return a;
}

/* ---- one line of each kind -------------------------------------------------- */

/* "tokens: the cat sat": appends every word after the colon to w. */
static int parse_tokens(Parser *p, Words *w, const char *key, const char *s, const char *end, int line) {
    if (!w->line) w->line = line;
    size_t len;
    const char *word;
    int added = 0;
    while ((word = next_word(&s, end, &len))) {
        if (w->n >= QKV_MAX_ROWS)
            return fail(p, line, "more than %d words in '%s' lines (the most rows this reads)", QKV_MAX_ROWS, key);
        if (w->n == w->cap) {
            int cap = w->cap ? 2 * w->cap : 16;
            char **nw = realloc(w->words, (size_t)cap * sizeof *nw);
            if (!nw) return fail(p, line, "out of memory");
            w->words = nw;
            w->cap = cap;
        }
        /* kept escaped: labels end up on the terminal and in plot files */
        size_t cap = 4 * len + 1;
        char *copy = malloc(cap);
        if (!copy) return fail(p, line, "out of memory");
        fio_escape(copy, cap, word, len);
        w->words[w->n++] = copy;
        added++;
    }
    if (!added) return fail(p, line, "'%s' is followed by no words: expected one label per row", key);
    return 0;
}

/* "1 0.5 -2": one row of numbers for section sec. */
static int parse_row(Parser *p, Section *sec, const char *s, const char *end, int line) {
    float row[QKV_MAX_COLS];
    int n = 0;
    size_t len;
    const char *word;
    while ((word = next_word(&s, end, &len))) {
        if (n == QKV_MAX_COLS)
            return fail(p, line, "row of %c has more than %d numbers (the most this reads)", sec->label, QKV_MAX_COLS);
        char buf[64], shown[100];
        if (len >= sizeof buf)
            return fail(p, line, "'%s...' is not a number: expected %s numbers in a row of %c",
                        fio_escape(shown, sizeof shown, word, 20), sec->cols ? "only" : "", sec->label);
        memcpy(buf, word, len);
        buf[len] = '\0';
        char *stop;
        errno = 0;
        float v = strtof(buf, &stop);
        if (stop == buf || *stop)
            return fail(p, line, "'%s' is not a number (column %d of a row of %c)",
                        fio_escape(shown, sizeof shown, buf, len), n + 1, sec->label);
        if (!isfinite(v))
            return fail(p, line, "'%s' is not a finite float32 number (column %d of a row of %c)",
                        fio_escape(shown, sizeof shown, buf, len), n + 1, sec->label);
        row[n++] = v;
    }
    if (sec->rows == 0) {
        sec->cols = n;
        sec->first_row_line = line;
    } else if (n != sec->cols) {
        return fail(p, line, "row has %d numbers, expected %d like the first row of %c (line %d)",
                    n, sec->cols, sec->label, sec->first_row_line);
    }
    if (sec->rows == QKV_MAX_ROWS)
        return fail(p, line, "%c has more than %d rows (the most this reads)", sec->label, QKV_MAX_ROWS);
    if (sec->rows == sec->cap) {
        int cap = sec->cap ? 2 * sec->cap : 8;
        float *nd = realloc(sec->data, (size_t)cap * (size_t)sec->cols * sizeof *nd + 1);
        if (!nd) return fail(p, line, "out of memory");
        sec->data = nd;
        int *nl = realloc(sec->line, (size_t)cap * sizeof *nl);
        if (!nl) return fail(p, line, "out of memory");
        sec->line = nl;
        sec->cap = cap;
    }
    memcpy(sec->data + (size_t)sec->rows * sec->cols, row, (size_t)n * sizeof *row);
    sec->line[sec->rows] = line;
    sec->rows++;
    return 0;
}

/* ---- the whole file --------------------------------------------------------- */

/* Checks that belong to the file as a whole, once every line is read. */
static int check_whole(Parser *p, int last_line, int saw_content) {
    Section *Q = &p->sec[0], *K = &p->sec[1], *V = &p->sec[2];
    if (!saw_content)
        return fail(p, last_line, "the file has no content: expected sections Q, K and V, "
                                  "each a header line followed by rows of numbers");
    for (int s = 0; s < 3; s++) {
        if (!p->sec[s].header_line)
            return fail(p, last_line, "end of file, but section %c is missing (expected Q, K and V)",
                        p->sec[s].label);
        if (p->sec[s].rows == 0)
            return fail(p, p->sec[s].header_line, "section %c has no rows: expected at least one row of numbers",
                        p->sec[s].label);
    }
    if (K->cols != Q->cols)
        return fail(p, K->first_row_line,
                    "rows of K have %d numbers but rows of Q (line %d) have %d: queries and keys "
                    "must have the same width d_k, since scores are dot products q.k",
                    K->cols, Q->first_row_line, Q->cols);
    if (V->rows != K->rows)
        return fail(p, V->header_line, "V has %d rows but K (line %d) has %d: expected one value row per key",
                    V->rows, K->header_line, K->rows);
    /* Every score q.k must be a float32 number, or the softmax of a row
     * holding inf is NaN. sum_c |q_c| |k_c| (in double) bounds q.k and every
     * partial sum of it in any order; values are mixed with weights that sum
     * to 1, so |out| <= max |v|. Both must stay below QKV_MAX_MAGNITUDE. */
    for (int i = 0; i < Q->rows; i++)
        for (int j = 0; j < K->rows; j++) {
            const float *q = Q->data + (size_t)i * Q->cols, *k = K->data + (size_t)j * K->cols;
            double bound = 0;
            for (int c = 0; c < Q->cols; c++) bound += fabs((double)q[c]) * fabs((double)k[c]);
            if (bound > QKV_MAX_MAGNITUDE)
                return fail(p, Q->line[i], "the score of this query (row %d of Q) with key row %d of K "
                            "(line %d) can reach %.3g, beyond the %.3g these float32 computations allow: "
                            "q.k would overflow to inf and the weights become NaN; scale Q or K down",
                            i + 1, j + 1, K->line[j], bound, QKV_MAX_MAGNITUDE);
        }
    for (int i = 0; i < V->rows; i++)
        for (int c = 0; c < V->cols; c++)
            if (fabs((double)V->data[(size_t)i * V->cols + c]) > QKV_MAX_MAGNITUDE)
                return fail(p, V->line[i], "value %.3g (row %d of V, column %d) is beyond the %.3g these "
                            "float32 computations allow (mixing values could overflow); scale V down",
                            (double)V->data[(size_t)i * V->cols + c], i + 1, c + 1, QKV_MAX_MAGNITUDE);
    if (p->tokens.n && p->tokens.n != Q->rows)
        return fail(p, p->tokens.line, "'tokens:' gives %d labels but Q has %d rows (expected one label per row)",
                    p->tokens.n, Q->rows);
    if (p->tokens.n && p->tokens.n != K->rows)
        return fail(p, p->tokens.line, "'tokens:' gives %d labels but K has %d rows; label queries and keys "
                    "separately with 'q_tokens:' and 'k_tokens:'", p->tokens.n, K->rows);
    if (p->q_tokens.n && p->q_tokens.n != Q->rows)
        return fail(p, p->q_tokens.line, "'q_tokens:' gives %d labels but Q has %d rows (expected one per row)",
                    p->q_tokens.n, Q->rows);
    if (p->k_tokens.n && p->k_tokens.n != K->rows)
        return fail(p, p->k_tokens.line, "'k_tokens:' gives %d labels but K has %d rows (expected one per row)",
                    p->k_tokens.n, K->rows);
    return 0;
}

/* Hands w's array of words to the caller and leaves w empty. */
static char **words_take(Words *w) {
    char **out = w->words;
    w->words = NULL;
    w->n = w->cap = 0;
    return out;
}

/* A fresh copy of w's words (every string duplicated), so that a 'tokens:'
 * list can label both Q and K and each be freed on its own; NULL if out of
 * memory. */
static char **words_copy(const Words *w) {
    char **out = calloc((size_t)w->n, sizeof *out);
    if (!out) return NULL;
    for (int i = 0; i < w->n; i++) {
        out[i] = strdup(w->words[i]);
        if (!out[i]) {
            for (int j = 0; j < i; j++) free(out[j]);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* 1 if the line starts with the bare word tokens, q_tokens or k_tokens: a
 * forgotten colon, worth its own message */
static int is_tokens_word(const char *s, const char *end) {
    size_t len;
    const char *w = next_word(&s, end, &len);
    return w && ((len == 6 && !strncmp(w, "tokens", 6)) ||
                 (len == 8 && (!strncmp(w, "q_tokens", 8) || !strncmp(w, "k_tokens", 8))));
}

int qkv_parse(QkvFile *f, const char *text, const char *name, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    Parser p = {.name = name, .err = err, .errlen = errlen};
    p.sec[0].label = 'Q';
    p.sec[1].label = 'K';
    p.sec[2].label = 'V';
    Section *cur = NULL;
    int line = 0, saw_content = 0, rc = 0;

    for (const char *s = text; *s && !rc;) {
        line++;
        const char *nl = strchr(s, '\n');
        const char *end = nl ? nl : s + strlen(s);
        const char *next = nl ? nl + 1 : end;
        /* cut the comment, then surrounding space (\r of Windows files too) */
        const char *hash = memchr(s, '#', (size_t)(end - s));
        if (hash) end = hash;
        while (s < end && isspace((unsigned char)*s)) s++;
        while (end > s && isspace((unsigned char)end[-1])) end--;
        size_t len = (size_t)(end - s);

        if (len == 0) {
            /* blank or comment-only line */
        } else if ((len == 1 || (len == 2 && s[1] == ':')) && strchr("QKV", s[0])) {
            saw_content = 1;
            Section *sec = &p.sec[s[0] == 'Q' ? 0 : s[0] == 'K' ? 1 : 2];
            if (sec->header_line)
                rc = fail(&p, line, "section %c appears a second time (first at line %d)", s[0], sec->header_line);
            sec->header_line = line;
            cur = sec;
        } else if (len >= 7 && !strncmp(s, "tokens:", 7)) {
            saw_content = 1;
            if (p.q_tokens.n || p.k_tokens.n)
                rc = fail(&p, line, "'tokens:' labels Q and K together; this file already uses "
                                    "'q_tokens:'/'k_tokens:' - use one style");
            else
                rc = parse_tokens(&p, &p.tokens, "tokens:", s + 7, end, line);
        } else if (len >= 9 && (!strncmp(s, "q_tokens:", 9) || !strncmp(s, "k_tokens:", 9))) {
            saw_content = 1;
            if (p.tokens.n)
                rc = fail(&p, line, "'%.9s' after 'tokens:' (line %d): use one style", s, p.tokens.line);
            else
                rc = parse_tokens(&p, s[0] == 'q' ? &p.q_tokens : &p.k_tokens, s[0] == 'q' ? "q_tokens:" : "k_tokens:",
                                  s + 9, end, line);
        } else if (is_tokens_word(s, end)) {
            char shown[200];
            rc = fail(&p, line, "'%s': expected a colon and labels after the key word, "
                                "e.g. 'tokens: the cat sat'", fio_escape(shown, sizeof shown, s, len > 40 ? 40 : len));
        } else if (!cur) {
            char shown[200];
            rc = fail(&p, line, "expected a section header (Q, K or V alone on a line) or 'tokens:' "
                                "before any numbers, got '%s'", fio_escape(shown, sizeof shown, s, len > 40 ? 40 : len));
        } else {
            saw_content = 1;
            rc = parse_row(&p, cur, s, end, line);
        }
        s = next;
    }
    if (!rc) rc = check_whole(&p, line > 0 ? line : 1, saw_content);
    if (rc) {
        parser_free(&p);
        return rc;
    }

    f->Tq = p.sec[0].rows;
    f->Tk = p.sec[1].rows;
    f->d_k = p.sec[0].cols;
    f->d_v = p.sec[2].cols;
    f->Q = p.sec[0].data;
    f->K = p.sec[1].data;
    f->V = p.sec[2].data;
    p.sec[0].data = p.sec[1].data = p.sec[2].data = NULL;
    if (p.tokens.n) {
        f->k_tokens = words_copy(&p.tokens);
        f->q_tokens = words_take(&p.tokens);
        if (!f->k_tokens) rc = fail(&p, p.tokens.line, "out of memory");
    } else {
        if (p.q_tokens.n) f->q_tokens = words_take(&p.q_tokens);
        if (p.k_tokens.n) f->k_tokens = words_take(&p.k_tokens);
    }
    parser_free(&p);
    if (rc) qkv_free(f);
    return rc;
}

int qkv_load(QkvFile *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    char why[600];
    /* a regular file only: a FIFO would block fread forever */
    FILE *fp = fio_open_read(path, NULL, why, sizeof why);
    if (!fp) {
        snprintf(err, errlen, "%s", why);
        return 2;
    }
    /* read at most QKV_MAX_BYTES + 1 so an oversized file is caught without
     * reading all of it */
    char *text = malloc((size_t)QKV_MAX_BYTES + 2);
    if (!text) {
        fclose(fp);
        snprintf(err, errlen, "%s: out of memory", path);
        return 2;
    }
    size_t n = fread(text, 1, (size_t)QKV_MAX_BYTES + 1, fp);
    int read_error = ferror(fp);
    fclose(fp);
    if (read_error) {
        free(text);
        snprintf(err, errlen, "%s: read error (is it a directory?)", path);
        return 2;
    }
    if (n > (size_t)QKV_MAX_BYTES) {
        free(text);
        snprintf(err, errlen, "%s: larger than %ld MiB; expected a small text file of Q, K and V",
                 path, QKV_MAX_BYTES >> 20);
        return 2;
    }
    text[n] = '\0';
    if (memchr(text, '\0', n)) {
        int line = 1;
        for (const char *c = text; *c; c++) line += *c == '\n';
        free(text);
        snprintf(err, errlen, "%s:%d: a NUL byte: expected a plain text file", path, line);
        return 2;
    }
    int rc = qkv_parse(f, text, path, err, errlen);
    free(text);
    return rc;
}

void qkv_free(QkvFile *f) {
    if (!f) return;
    for (int i = 0; f->q_tokens && i < f->Tq; i++) free(f->q_tokens[i]);
    for (int i = 0; f->k_tokens && i < f->Tk; i++) free(f->k_tokens[i]);
    free(f->q_tokens);
    free(f->k_tokens);
    free(f->Q);
    free(f->K);
    free(f->V);
    memset(f, 0, sizeof *f);
}
