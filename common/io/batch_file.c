/* batch_file.c - parse and pad a batch file (format in batch_file.h). */
#include "io/batch_file.h"
#include "core/fail.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BATCH_MAX_FILE_BYTES (64u << 20)


void batch_file_free(BatchFile *bf) {
    free(bf->src_len), free(bf->tgt_len), free(bf->src_off), free(bf->tgt_off), free(bf->ids);
    memset(bf, 0, sizeof *bf);
}

void batch_free(Batch *b) {
    free(b->src), free(b->tgt_in), free(b->tgt_out);
    memset(b, 0, sizeof *b);
}

/* ---- syntax ------------------------------------------------------------------
 * One pass over the text, line by line; each line is blank, a comment, or
 * "ids | ids". The arrays are sized for the worst case up front (no more
 * examples than lines, no more ids than half the bytes), so nothing grows. */
static int is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

static int parse_len(const char *text, size_t len, const char *name, BatchFile *bf, char *err, size_t errlen) {
    memset(bf, 0, sizeof *bf);
    snprintf(bf->path, sizeof bf->path, "%s", name);
    size_t lines = 1, max_ids = len / 2 + 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    size_t max_ex = lines < BATCH_MAX_EXAMPLES ? lines : BATCH_MAX_EXAMPLES;
    if (max_ids > BATCH_MAX_TOKENS) max_ids = BATCH_MAX_TOKENS;
    bf->src_len = malloc(max_ex * sizeof(int)), bf->tgt_len = malloc(max_ex * sizeof(int));
    bf->src_off = malloc(max_ex * sizeof(int)), bf->tgt_off = malloc(max_ex * sizeof(int));
    bf->ids = malloc(max_ids * sizeof(int));
    if (!bf->src_len || !bf->tgt_len || !bf->src_off || !bf->tgt_off || !bf->ids) {
        batch_file_free(bf);
        return fail_rc(1, err, errlen, "%s: out of memory", name);
    }
    size_t n_ids = 0;
    int line = 0, rc = 0;
    const char *p = text, *end = text + len;
    while (p < end && !rc) {
        line++;
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const char *q = p;
        while (q < eol && is_space(*q)) q++;
        if (q == eol || *q == '#') {            /* blank or comment */
            p = eol + 1;
            continue;
        }
        if (bf->n == BATCH_MAX_EXAMPLES) {
            rc = fail_rc(2, err, errlen, "%s:%d: more than %d examples", name, line, BATCH_MAX_EXAMPLES);
            break;
        }
        int side = 0, count[2] = {0, 0};
        bf->src_off[bf->n] = (int)n_ids;
        while (q < eol && !rc) {
            if (is_space(*q)) { q++; continue; }
            if (*q == '|') {
                if (side == 1) rc = fail_rc(2, err, errlen, "%s:%d: a second '|' (one per line: source | target)", name, line);
                side = 1;
                bf->tgt_off[bf->n] = (int)n_ids;
                q++;
                continue;
            }
            if (*q == '-' && q + 1 < eol && q[1] >= '0' && q[1] <= '9') {
                rc = fail_rc(2, err, errlen, "%s:%d: token %d of the %s is negative; ids are 0 or more", name, line,
                          count[side] + 1, side ? "target" : "source");
                break;
            }
            if (*q < '0' || *q > '9') {
                rc = fail_rc(2, err, errlen, "%s:%d: '%c' is not a token id (expected integers and one '|')", name,
                          line, *q >= 0x20 && *q < 0x7f ? *q : '?');
                break;
            }
            long long v = 0;
            while (q < eol && *q >= '0' && *q <= '9') {
                v = v * 10 + (*q++ - '0');
                if (v > INT_MAX) break;
            }
            if (v > INT_MAX) {
                rc = fail_rc(2, err, errlen, "%s:%d: token %d of the %s is too large", name, line, count[side] + 1,
                          side ? "target" : "source");
                break;
            }
            if (q < eol && !is_space(*q) && *q != '|') {
                rc = fail_rc(2, err, errlen, "%s:%d: '%c' inside a number", name, line, *q >= 0x20 && *q < 0x7f ? *q : '?');
                break;
            }
            if (n_ids == max_ids) {
                rc = fail_rc(2, err, errlen, "%s:%d: more than %d ids in the file", name, line, BATCH_MAX_TOKENS);
                break;
            }
            bf->ids[n_ids++] = (int)v;
            count[side]++;
        }
        if (rc) break;
        if (!side) rc = fail_rc(2, err, errlen, "%s:%d: no '|' between the source and the target ids", name, line);
        else if (count[0] < 1) rc = fail_rc(2, err, errlen, "%s:%d: the source is empty", name, line);
        else if (count[1] < 2)
            rc = fail_rc(2, err, errlen, "%s:%d: the target needs at least 2 ids (what the decoder reads starts with "
                      "the start symbol; it predicts from the second on), got %d", name, line, count[1]);
        if (rc) break;
        bf->src_len[bf->n] = count[0];
        bf->tgt_len[bf->n] = count[1];
        if (count[0] > bf->max_src) bf->max_src = count[0];
        if (count[1] > bf->max_tgt) bf->max_tgt = count[1];
        bf->n++;
        p = eol + 1;
    }
    if (!rc && bf->n == 0) rc = fail_rc(2, err, errlen, "%s: no examples (lines of 'source ids | target ids')", name);
    if (rc) batch_file_free(bf);
    return rc;
}

int batch_file_parse(const char *text, const char *name, BatchFile *bf, char *err, size_t errlen) {
    return parse_len(text, strlen(text), name, bf, err, errlen);
}

int batch_file_read(const char *path, BatchFile *bf, char *err, size_t errlen) {
    memset(bf, 0, sizeof *bf);
    /* stat first: opening a FIFO would wait for a writer forever */
    struct stat st;
    if (stat(path, &st) != 0) return fail_rc(2, err, errlen, "cannot open '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return fail_rc(2, err, errlen, "'%s' is not a regular file", path);
    if ((unsigned long long)st.st_size > BATCH_MAX_FILE_BYTES)
        return fail_rc(2, err, errlen, "'%s' is larger than %u MiB; a batch file is a few lines", path,
                    BATCH_MAX_FILE_BYTES >> 20);
    FILE *f = fopen(path, "rb");
    if (!f) return fail_rc(2, err, errlen, "cannot open '%s': %s", path, strerror(errno));
    size_t size = (size_t)st.st_size;
    char *text = malloc(size + 1);
    if (!text) {
        fclose(f);
        return fail_rc(1, err, errlen, "'%s': out of memory", path);
    }
    size_t got = fread(text, 1, size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != size) {
        free(text);
        return fail_rc(1, err, errlen, "reading '%s' failed", path);
    }
    text[got] = 0;
    if (memchr(text, 0, got)) {
        free(text);
        return fail_rc(2, err, errlen, "'%s' holds a NUL byte; a batch file is text", path);
    }
    int rc = parse_len(text, got, path, bf, err, errlen);
    free(text);
    return rc;
}

/* ---- meaning: check against the model, then pad ------------------------------ */
int batch_pad(const BatchFile *bf, const Config *c, Batch *b, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    const char *name = bf->path;
    for (int e = 0; e < bf->n; e++)
        for (int side = 0; side < 2; side++) {
            const int *ids = bf->ids + (side ? bf->tgt_off[e] : bf->src_off[e]);
            int len = side ? bf->tgt_len[e] : bf->src_len[e];
            const char *what = side ? "target" : "source";
            if (ids[0] == c->pad_id)
                return fail_rc(2, err, errlen, "%s: example %d: the %s starts with the pad id %d (nothing to attend "
                            "to)", name, e + 1, what, c->pad_id);
            for (int i = 0; i < len; i++) {
                if (ids[i] >= c->vocab)
                    return fail_rc(2, err, errlen, "%s: example %d, %s token %d: id %d is outside the vocabulary "
                                "[0, %d)", name, e + 1, what, i + 1, ids[i], c->vocab);
                /* a pad id may end a sequence (already padded by hand), never
                 * sit before a real token: that hole would be masked out */
                if (ids[i] == c->pad_id && i + 1 < len && ids[i + 1] != c->pad_id)
                    return fail_rc(2, err, errlen, "%s: example %d, %s token %d is the pad id %d but a real token "
                                "follows it; padding may only end a sequence", name, e + 1, what, i + 1, c->pad_id);
            }
            int limit = side ? c->max_len + 1 : c->max_len;   /* the decoder reads n-1 of the n target ids */
            if (len > limit)
                return fail_rc(2, err, errlen, "%s: example %d: the %s has %d ids, more than the model's max_len %d%s",
                            name, e + 1, what, len, c->max_len, side ? " (+1: the decoder reads all but the last)" : "");
            if (c->pad_id < 0 && len != (side ? bf->tgt_len[0] : bf->src_len[0]))
                return fail_rc(2, err, errlen, "%s: example %d: its %s has %d ids, example 1's has %d; the model has no "
                            "pad id (pad_id -1), so every %s must have the same length", name, e + 1, what, len,
                            side ? bf->tgt_len[0] : bf->src_len[0], what);
        }
    int B = bf->n, Ts = bf->max_src, Tt = bf->max_tgt - 1;
    int pad = c->pad_id;
    b->B = B, b->Ts = Ts, b->Tt = Tt;
    b->src = malloc((size_t)B * Ts * sizeof(int));
    b->tgt_in = malloc((size_t)B * Tt * sizeof(int));
    b->tgt_out = malloc((size_t)B * Tt * sizeof(int));
    if (!b->src || !b->tgt_in || !b->tgt_out) {
        batch_free(b);
        return fail_rc(1, err, errlen, "%s: out of memory", name);
    }
    for (int e = 0; e < B; e++) {
        const int *s = bf->ids + bf->src_off[e], *t = bf->ids + bf->tgt_off[e];
        int ns = bf->src_len[e], nt = bf->tgt_len[e];
        /* pad < 0 only when every length is equal, so the fill is never used */
        for (int i = 0; i < Ts; i++) b->src[e * Ts + i] = i < ns ? s[i] : pad;
        for (int i = 0; i < Tt; i++) {
            b->tgt_in[e * Tt + i] = i < nt - 1 ? t[i] : pad;
            b->tgt_out[e * Tt + i] = i < nt - 1 ? t[i + 1] : pad;
            b->n_tokens += i < nt - 1 && t[i + 1] != pad;
        }
    }
    if (b->n_tokens == 0) {
        batch_free(b);
        return fail_rc(2, err, errlen, "%s: every target token to predict is padding; the loss would be empty", name);
    }
    return 0;
}
