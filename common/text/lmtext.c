/* lmtext.c - reading a language model's text, its character tokens, the
 * fixed split and the batches (what each promises is in lmtext.h). */
#include "text/lmtext.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/fail.h"
#include "core/fileio.h"

#define MAX_CP 0x110000u   /* code points run from U+0000 to U+10FFFF */

/* BPE pieces (their section is below the character tokens') */
static const char *bpe_piece(const LmText *t, int id);
static int bpe_encode_text(const LmText *t, const char *s, int *ids, size_t cap, size_t *n, char *err,
                           size_t errlen);

/* ---- UTF-8 ------------------------------------------------------------------- */

int lmtext_utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    int len;
    uint32_t c;
    if (n == 0) return 0;
    if (s[0] < 0x80) return *cp = s[0], 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) len = 2, c = s[0] & 0x1F;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) len = 3, c = s[0] & 0x0F;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) len = 4, c = s[0] & 0x07;
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    /* overlong forms, UTF-16 surrogates and past U+10FFFF are not UTF-8 */
    if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c >= MAX_CP))) return 0;
    if (c >= 0xD800 && c <= 0xDFFF) return 0;
    *cp = c;
    return len;
}

int lmtext_utf8_put(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) return o[0] = (unsigned char)cp, 1;
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6), o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12), o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18), o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* 0 when b[0..n) is text: no NUL, valid UTF-8. Otherwise 2 with a message
 * naming the first bad byte's offset. */
static int check_text(const char *what, const char *b, size_t n, char *err, size_t errlen) {
    const unsigned char *s = (const unsigned char *)b;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        if (s[i] == 0)
            return fail(err, errlen, "%s holds a NUL byte at byte %zu: it is not a text file", what, i);
        int len = lmtext_utf8_next(s + i, n - i, &cp);
        if (!len)
            return fail(err, errlen, "%s is not UTF-8 text: byte %zu (0x%02X) starts no valid character", what, i,
                        s[i]);
        i += (size_t)len;
    }
    return 0;
}

/* ---- reading the file --------------------------------------------------------- */

/* "'path'" escaped, for messages about a file */
static const char *quoted(char *buf, size_t cap, const char *path) {
    char esc[600];
    fio_escape(esc, sizeof esc, path, (size_t)-1);
    snprintf(buf, cap, "'%s'", esc);
    return buf;
}

static const char *package_of(LmSource s) {
    return s == LMTEXT_DEVIL ? "dict-devil" : s == LMTEXT_TANG300 ? "fortunes-zh" : NULL;
}

/* Reads the whole file (through zlib when gz: gzip and plain bytes alike)
 * into a malloc'd buffer with a NUL after it. Size checked before reading;
 * the bytes after decompression checked as they come. */
static int read_all(const char *path, LmSource source, int gz, char **out, size_t *n_out, char *err,
                    size_t errlen) {
    char q[640], msg[700];
    quoted(q, sizeof q, path);
    long long size = 0;
    FILE *f = fio_open_read(path, &size, msg, sizeof msg);
    if (!f) {
        const char *pkg = package_of(source);
        if (pkg && access(path, F_OK) != 0)
            return fail(err, errlen, "%s; it comes with the Debian package %s: sudo apt-get install %s", msg, pkg,
                        pkg);
        return fail(err, errlen, "%s", msg);
    }
    if (size > LMTEXT_MAX_BYTES) {
        fclose(f);
        return fail(err, errlen, "%s is %.1f MiB; texts up to %lld MiB are read (LMTEXT_MAX_BYTES)", q,
                    size / 1048576.0, LMTEXT_MAX_BYTES >> 20);
    }
    if (size == 0) {
        fclose(f);
        return fail(err, errlen, "%s is empty: a language model needs text to read", q);
    }
    /* gzip: a first guess of 4x, grown as needed; never past the cap + 1 */
    size_t cap = gz ? (size_t)size * 4 + 1024 : (size_t)size + 1, n = 0;
    if (gz && (long long)cap > LMTEXT_MAX_BYTES) cap = (size_t)LMTEXT_MAX_BYTES + 1;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return fail_rc(1, err, errlen, "out of memory reading %s (%zu bytes)", q, cap);
    }
    int rc = 0;
    if (!gz) {
        n = fread(buf, 1, cap, f);
        if (ferror(f)) rc = fail_rc(1, err, errlen, "reading %s failed: %s", q, strerror(errno));
        else if (n != (size_t)size) rc = fail_rc(1, err, errlen, "%s changed while it was read", q);
        fclose(f);
    } else {
        int fd = dup(fileno(f));
        fclose(f);
        gzFile z = fd >= 0 ? gzdopen(fd, "rb") : NULL;
        if (!z) {
            if (fd >= 0) close(fd);
            free(buf);
            return fail_rc(1, err, errlen, "cannot read %s: %s", q, strerror(errno));
        }
        for (;;) {
            if (n == cap) {
                /* never more than LMTEXT_MAX_BYTES + 1 bytes: one past the cap says it is too big */
                if ((long long)n > LMTEXT_MAX_BYTES) break;
                size_t grow = (long long)cap * 2 > LMTEXT_MAX_BYTES ? (size_t)LMTEXT_MAX_BYTES + 1 : cap * 2;
                char *nb = realloc(buf, grow + 1);
                if (!nb) {
                    rc = fail_rc(1, err, errlen, "out of memory reading %s", q);
                    break;
                }
                buf = nb, cap = grow;
            }
            size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
            int got = gzread(z, buf + n, (unsigned)want);
            if (got < 0) {
                int zerr;
                const char *zmsg = gzerror(z, &zerr);
                rc = fail(err, errlen, "%s is damaged: %s", q, zmsg ? zmsg : "gzip data error");
                break;
            }
            if (got == 0) break;
            n += (size_t)got;
        }
        gzclose(z);
        if (!rc && (long long)n > LMTEXT_MAX_BYTES)
            rc = fail(err, errlen, "%s holds more than %lld MiB of text once decompressed (LMTEXT_MAX_BYTES)", q,
                      LMTEXT_MAX_BYTES >> 20);
    }
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf, *n_out = n;
    return 0;
}

/* ---- the dictionary's entries: where its text starts, and what lmformat.h counts -- */

static int is_upper(char c) { return c >= 'A' && c <= 'Z'; }

/* Bierce's parts of speech, and the few his book happens not to use */
static const char *const parts_of_speech[] = {
    "n.", "n.pl.", "v.", "v.t.", "v.i.", "adj.", "adv.", "pro.", "pron.", "pp.", "p.p.", "x.",
    "prep.", "conj.", "interj.",
};

int lmtext_entry_head(const char *s, size_t n) {
    size_t i = 0;
    /* the headword: WORD or WORD WORD ..., each [A-Z][A-Z'-]* */
    for (;;) {
        if (i >= n) return -1;
        if (!is_upper(s[i])) return 0;
        while (i < n && (is_upper(s[i]) || s[i] == '-' || s[i] == '\'')) i++;
        if (i >= n) return -1;
        if (s[i] != ' ') break;
        i++;   /* one space: another word of the headword must follow */
    }
    /* ", " */
    if (s[i] != ',') return 0;
    if (++i >= n) return -1;
    if (s[i] != ' ') return 0;
    if (++i >= n) return -1;
    /* the part of speech: the longest run of [a-z.], one of the list,
     * then a space or a newline */
    size_t p = i;
    while (i < n && ((s[i] >= 'a' && s[i] <= 'z') || s[i] == '.')) i++;
    if (i >= n) return -1;
    if (s[i] != ' ' && s[i] != '\n') return 0;
    for (size_t k = 0; k < sizeof parts_of_speech / sizeof *parts_of_speech; k++)
        if (strlen(parts_of_speech[k]) == i - p && !memcmp(s + p, parts_of_speech[k], i - p)) return 1;
    return 0;
}

/* ---- what each source keeps ------------------------------------------------------ */

/* The dictionary's entries: from the first paragraph that opens an entry to
 * the end, without dictd's alphabet line after the last entry. In place. */
static int keep_devil_entries(char *b, size_t *n, const char *q, char *err, size_t errlen) {
    size_t start = (size_t)-1;
    for (size_t i = 0; i < *n; i++) {
        int para = i == 0 || (b[i - 1] == '\n' && i >= 2 && b[i - 2] == '\n');
        if (para && lmtext_entry_head(b + i, *n - i) == 1) {
            start = i;
            break;
        }
    }
    if (start == (size_t)-1)
        return fail(err, errlen, "%s holds no dictionary entry (a paragraph opening like 'ABASEMENT, n.  A "
                    "decent ...'): is it The Devil's Dictionary?", q);
    static const char alphabet[] = " abcdefghijklmnopqrstuvwxyz\n";
    size_t end = *n, la = sizeof alphabet - 1;
    if (end - start > la && !memcmp(b + end - la, alphabet, la) && b[end - la - 1] == '\n') end -= la;
    memmove(b, b + start, end - start);
    *n = end - start;
    b[*n] = '\0';
    return 0;
}

/* The poems: ANSI colour codes (ESC [ digits/; letter) removed, each "%"
 * line that separates two poems made blank, the one after the last poem
 * dropped. In place. */
static void keep_tang_poems(char *b, size_t *n) {
    size_t o = 0;
    for (size_t i = 0; i < *n;) {
        if (b[i] == '\x1b' && i + 1 < *n && b[i + 1] == '[') {
            size_t j = i + 2;
            while (j < *n && ((b[j] >= '0' && b[j] <= '9') || b[j] == ';')) j++;
            if (j < *n && b[j] >= '@' && b[j] <= '~') {
                i = j + 1;
                continue;
            }
        }
        b[o++] = b[i++];
    }
    size_t m = 0;
    for (size_t i = 0; i < o;) {
        size_t e = i;
        while (e < o && b[e] != '\n') e++;
        int sep = e == i + 1 && b[i] == '%';
        if (sep && e + 1 >= o) break;      /* the last poem's "%": dropped */
        if (!sep) memmove(b + m, b + i, e - i), m += e - i;
        if (e < o) b[m++] = '\n';
        i = e + 1;
    }
    *n = m;
    b[m] = '\0';
}

/* A character as a label: see lmtext_label */
static const char *label_cp(uint32_t cp, char *buf, size_t cap) {
    char c[8] = {0};
    if (cp == '\n') snprintf(buf, cap, "⏎");
    else if (cp == ' ') snprintf(buf, cap, "␣");
    else if (cp == '\t') snprintf(buf, cap, "⇥");
    else fio_escape(buf, cap, c, (size_t)lmtext_utf8_put(cp, c));
    return buf;
}

/* ---- tokens ------------------------------------------------------------------------ */

/* The vocabulary (distinct code points, ascending), the text as ids and the
 * split, from t->text. Returns 0, 2 (one distinct character) or 1 (memory). */
static int build_tokens(LmText *t, const char *what, char *err, size_t errlen) {
    const unsigned char *s = (const unsigned char *)t->text;
    int32_t *id_of = malloc(MAX_CP * sizeof *id_of);
    t->tokens = malloc((t->n_bytes ? t->n_bytes : 1) * sizeof *t->tokens);
    if (!id_of || !t->tokens) {
        free(id_of);
        return fail_rc(1, err, errlen, "out of memory for the tokens of %s", what);
    }
    memset(id_of, 0xFF, MAX_CP * sizeof *id_of);   /* -1: not seen */
    size_t n = 0;
    int V = 0;
    for (size_t i = 0; i < t->n_bytes; n++) {
        uint32_t cp;
        i += (size_t)lmtext_utf8_next(s + i, t->n_bytes - i, &cp);   /* checked: valid */
        if (id_of[cp] < 0) id_of[cp] = 0, V++;
        t->tokens[n] = (int)cp;
    }
    t->n = n;
    if (V < 2) {
        free(id_of);
        char c[16];
        return fail(err, errlen, "%s holds one distinct character ('%s', %zu times): there is nothing to predict",
                    what, label_cp((uint32_t)t->tokens[0], c, sizeof c), n);
    }
    t->vocab = malloc((size_t)V * sizeof *t->vocab);
    if (!t->vocab) {
        free(id_of);
        return fail_rc(1, err, errlen, "out of memory for the vocabulary of %s", what);
    }
    /* ids in code point order: rank among the characters seen */
    int k = 0;
    for (uint32_t cp = 0; cp < MAX_CP; cp++)
        if (id_of[cp] >= 0) id_of[cp] = k, t->vocab[k++] = cp;
    t->V = t->n_cp = V;
    for (size_t i = 0; i < n; i++) t->tokens[i] = id_of[t->tokens[i]];
    free(id_of);
    t->n_train = n - (n + 9) / 10;   /* the last ceil(n/10) validate */
    t->n_chars = n, t->n_train_chars = t->n_train;
    return 0;
}

static int finish(LmText *t, char *buf, size_t n, const char *what, char *err, size_t errlen) {
    if (n == 0) {
        free(buf);
        return fail(err, errlen, "%s is empty: a language model needs text to read", what);
    }
    t->text = buf, t->n_bytes = n;
    int rc = build_tokens(t, what, err, errlen);
    if (rc) lmtext_free(t);
    return rc;
}

int lmtext_load_as(LmText *t, LmSource source, const char *path, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->source = source;
    char q[640];
    quoted(q, sizeof q, path);
    char *buf = NULL;
    size_t n = 0;
    int rc = read_all(path, source, source == LMTEXT_DEVIL, &buf, &n, err, errlen);
    if (rc) return rc;
    t->n_read = n;
    if (n == 0) rc = fail(err, errlen, "%s is empty: a language model needs text to read", q);
    else rc = check_text(q, buf, n, err, errlen);
    if (rc) {
        free(buf);
        return rc;
    }
    if (source == LMTEXT_DEVIL && (rc = keep_devil_entries(buf, &n, q, err, errlen)) != 0) {
        free(buf);
        return rc;
    }
    if (source == LMTEXT_TANG300) keep_tang_poems(buf, &n);
    return finish(t, buf, n, q, err, errlen);
}

int lmtext_load(LmText *t, const char *name, char *err, size_t errlen) {
    if (!strcmp(name, "devil")) return lmtext_load_as(t, LMTEXT_DEVIL, LMTEXT_DEVIL_PATH, err, errlen);
    if (!strcmp(name, "tang300")) return lmtext_load_as(t, LMTEXT_TANG300, LMTEXT_TANG300_PATH, err, errlen);
    return lmtext_load_as(t, LMTEXT_FILE, name, err, errlen);
}

int lmtext_from_bytes(LmText *t, const char *bytes, size_t n, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    if (n == 0) return fail(err, errlen, "the text is empty: a language model needs text to read");
    if ((long long)n > LMTEXT_MAX_BYTES)
        return fail(err, errlen, "the text is over %lld MiB (LMTEXT_MAX_BYTES)", LMTEXT_MAX_BYTES >> 20);
    int rc = check_text("the text", bytes, n, err, errlen);
    if (rc) return rc;
    char *buf = malloc(n + 1);
    if (!buf) return fail_rc(1, err, errlen, "out of memory (%zu bytes)", n);
    memcpy(buf, bytes, n);
    buf[n] = '\0';
    t->n_read = n;
    return finish(t, buf, n, "the text", err, errlen);
}

void lmtext_free(LmText *t) {
    if (!t) return;
    free(t->text);
    free(t->tokens);
    free(t->vocab);
    if (t->bpe) bpe_free(t->bpe);
    free(t->bpe);
    memset(t, 0, sizeof *t);
}

const char *lmtext_source_name(LmSource s) {
    return s == LMTEXT_DEVIL ? "devil" : s == LMTEXT_TANG300 ? "tang300" : "FILE";
}

int lmtext_id(const LmText *t, uint32_t cp) {
    if (t->bpe) return -1;
    int lo = 0, hi = t->n_cp - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (t->vocab[mid] == cp) return mid;
        if (t->vocab[mid] < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int lmtext_encode(const LmText *t, const char *s, int *ids, size_t cap, size_t *n, char *err, size_t errlen) {
    if (t->bpe) return bpe_encode_text(t, s, ids, cap, n, err, errlen);
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s), k = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int l = lmtext_utf8_next(p + i, len - i, &cp);
        if (!l) return fail(err, errlen, "byte %zu (0x%02X) starts no valid UTF-8 character", i, p[i]);
        int id = lmtext_id(t, cp);
        if (id < 0) {
            char c[8] = {0}, esc[40];
            lmtext_utf8_put(cp, c);
            return fail(err, errlen, "the character '%s' (U+%04X) at byte %zu never occurs in the text, so the "
                        "model has no token for it", fio_escape(esc, sizeof esc, c, (size_t)-1), cp, i);
        }
        if (k < cap) ids[k] = id;
        k++;
        i += (size_t)l;
    }
    *n = k;
    return 0;
}

size_t lmtext_decode(const LmText *t, const int *ids, size_t n, char *out, size_t cap) {
    size_t need = 0, o = 0;
    int full = cap == 0;
    for (size_t i = 0; i < n; i++) {
        assert(ids[i] >= 0 && ids[i] < t->V && "lmtext_decode: an id outside the vocabulary");
        char c[4];
        const char *piece = c;
        int l;
        if (!t->bpe) l = lmtext_utf8_put(t->vocab[ids[i]], c);
        else piece = bpe_piece(t, ids[i]), l = (int)strlen(piece);
        if (!full && o + (size_t)l < cap) memcpy(out + o, piece, (size_t)l), o += (size_t)l;
        else full = 1;   /* cut at this character: never half of one */
        need += (size_t)l;
    }
    if (cap) out[o] = '\0';
    return need;
}

const char *lmtext_label(const LmText *t, int id, char *buf, size_t cap) {
    if (!t->bpe) return label_cp(t->vocab[id], buf, cap);
    const Bpe *b = t->bpe;
    if (id == b->vocab) return label_cp(' ', buf, cap);
    if (id == b->vocab + 1) return label_cp('\n', buf, cap);
    if (id < BPE_N_SPECIAL) {
        bpe_symbol_str(b, id, buf, cap);
        return buf;
    }
    char esc[256];
    fio_escape(esc, sizeof esc, b->sym[id].text, (size_t)-1);
    snprintf(buf, cap, "%s%s", esc, b->sym[id].eow ? "" : "·");
    return buf;
}

/* ---- BPE pieces ----------------------------------------------------------------------- */

int lmtext_bpe_space(const LmText *t) { return t->bpe ? t->bpe->vocab : -1; }
int lmtext_bpe_newline(const LmText *t) { return t->bpe ? t->bpe->vocab + 1 : -1; }

/* The text of id as decoding writes it: a piece's characters, ' ', '\n',
 * "<unk>", and nothing for <pad>, <s>, </s> */
static const char *bpe_piece(const LmText *t, int id) {
    const Bpe *b = t->bpe;
    if (id == b->vocab) return " ";
    if (id == b->vocab + 1) return "\n";
    if (id == BPE_UNK) return "<unk>";
    if (id < BPE_N_SPECIAL) return "";
    return b->sym[id].text;
}

/* Calls fn on each word of s[0..n) (runs of characters other than ' ' and
 * '\n', cut every LMTEXT_BPE_MAX_WORD characters) and on each ' ' and
 * '\n' (as a word of that one byte, ws = 1); stops when fn returns non-zero
 * and returns that. s is valid UTF-8. */
typedef int (*WordFn)(void *ctx, const char *w, size_t len, size_t at, int ws);
static int each_bpe_word(const char *s, size_t n, WordFn fn, void *ctx) {
    size_t i = 0;
    while (i < n) {
        if (s[i] == ' ' || s[i] == '\n') {
            int rc = fn(ctx, s + i, 1, i, 1);
            if (rc) return rc;
            i++;
            continue;
        }
        size_t j = i;
        int chars = 0;
        while (j < n && s[j] != ' ' && s[j] != '\n' && chars < LMTEXT_BPE_MAX_WORD) {
            uint32_t cp;
            int l = lmtext_utf8_next((const unsigned char *)s + j, n - j, &cp);
            j += (size_t)(l ? l : 1);
            chars++;
        }
        int rc = fn(ctx, s + i, j - i, i, 0);
        if (rc) return rc;
        i = j;
    }
    return 0;
}

/* the words, each followed by one space: what bpe_learn reads */
typedef struct { char *buf; size_t n; } Joined;
static int join_word(void *ctx, const char *w, size_t len, size_t at, int ws) {
    Joined *j = ctx;
    if (ws) return 0;
    memcpy(j->buf + j->n, w, len);
    j->n += len;
    j->buf[j->n++] = ' ';
    return 0;
}

/* encodes words into ids (up to cap, counting all in n); err set when a
 * word holds a character that is <unk> and strict is 1 */
typedef struct {
    const LmText *t;
    int *ids;
    size_t cap, n;
    int strict;
    char *err;
    size_t errlen;
} Encoder;
static int encode_one(void *ctx, const char *w, size_t len, size_t at, int ws) {
    Encoder *e = ctx;
    const Bpe *b = e->t->bpe;
    int piece[4 * LMTEXT_BPE_MAX_WORD + 1];
    int k;
    if (ws) piece[0] = w[0] == ' ' ? b->vocab : b->vocab + 1, k = 1;
    else {
        char word[4 * LMTEXT_BPE_MAX_WORD + 1];
        memcpy(word, w, len);
        word[len] = '\0';
        k = bpe_encode(b, word, piece, (int)(sizeof piece / sizeof *piece));
        for (int q = 0; e->strict && q < k; q++)
            if (piece[q] == BPE_UNK) {
                char esc[300];
                fio_escape(esc, sizeof esc, word, len);
                return fail(e->err, e->errlen, "the word '%s' at byte %zu holds a character the training text "
                            "never had in that place of a word, so the model has no token for it", esc, at);
            }
    }
    for (int q = 0; q < k; q++, e->n++)
        if (e->n < e->cap) e->ids[e->n] = piece[q];
    return 0;
}

static int bpe_encode_text(const LmText *t, const char *s, int *ids, size_t cap, size_t *n, char *err,
                           size_t errlen) {
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int l = lmtext_utf8_next((const unsigned char *)s + i, len - i, &cp);
        if (!l) return fail(err, errlen, "byte %zu (0x%02X) starts no valid UTF-8 character", i, (unsigned char)s[i]);
        i += (size_t)l;
    }
    Encoder e = {t, ids, cap, 0, 1, err, errlen};
    int rc = each_bpe_word(s, len, encode_one, &e);
    *n = e.n;
    return rc;
}

int lmtext_use_bpe(LmText *t, int vocab, char *err, size_t errlen) {
    if (t->bpe) return fail(err, errlen, "the text already uses BPE");
    /* the byte where the validation split starts */
    size_t cut = 0;
    for (size_t c = 0; c < t->n_train_chars; c++) {
        uint32_t cp;
        cut += (size_t)lmtext_utf8_next((const unsigned char *)t->text + cut, t->n_bytes - cut, &cp);
    }
    Joined j = {malloc(2 * cut + 1), 0};
    Bpe *b = calloc(1, sizeof *b);
    if (!j.buf || !b) {
        free(j.buf), free(b);
        return fail_rc(1, err, errlen, "out of memory for BPE");
    }
    each_bpe_word(t->text, cut, join_word, &j);
    j.buf[j.n] = '\0';
    char *sentence = j.buf;
    int rc = bpe_learn(b, &sentence, 1, NULL, 0, vocab, err, errlen);
    free(j.buf);
    if (rc) {
        free(b);
        return rc;
    }
    /* each split on its own: a word across the cut is two words */
    size_t need = 0;
    for (int pass = 0; pass < 2; pass++) {
        int *ids = pass ? malloc((need ? need : 1) * sizeof *ids) : NULL;
        if (pass && !ids) {
            bpe_free(b), free(b);
            return fail_rc(1, err, errlen, "out of memory for BPE tokens");
        }
        LmText with = *t;
        with.bpe = b;
        Encoder e = {&with, ids, pass ? need : 0, 0, 0, NULL, 0};
        each_bpe_word(t->text, cut, encode_one, &e);
        size_t n_train = e.n;
        each_bpe_word(t->text + cut, t->n_bytes - cut, encode_one, &e);
        if (!pass) {
            need = e.n;
            continue;
        }
        free(t->tokens);
        t->tokens = ids, t->n = e.n, t->n_train = n_train;
    }
    t->bpe = b;
    t->V = b->vocab + 2;
    return 0;
}

/* ---- batches ------------------------------------------------------------------------- */

int lmtext_batch(const LmText *t, Rng *r, int B, int T, int *x, int *y, char *err, size_t errlen) {
    if (B < 1 || T < 1) return fail(err, errlen, "a batch needs B >= 1 windows of T >= 1 tokens (got B %d, T %d)", B, T);
    if ((size_t)T + 1 > t->n_train)
        return fail(err, errlen, "a window of T+1 = %d characters is longer than the train split (%zu characters):"
                    " give a shorter context or a longer text", T + 1, t->n_train);
    /* a start s in [0, n_train - T - 1]: window [s, s + T] lies in train */
    int starts = (int)(t->n_train - (size_t)T);
    for (int b = 0; b < B; b++) {
        const int *w = t->tokens + rng_int(r, starts);
        memcpy(x + (size_t)b * T, w, (size_t)T * sizeof *x);
        memcpy(y + (size_t)b * T, w + 1, (size_t)T * sizeof *y);
    }
    return 0;
}

size_t lmtext_eval_windows(const LmText *t, int T) {
    size_t n_val = t->n - t->n_train;
    return T < 1 || n_val < (size_t)T + 1 ? 0 : (n_val - 1) / (size_t)T;
}

int lmtext_eval_batch(const LmText *t, int T, size_t first, int B, int *x, int *y) {
    size_t W = lmtext_eval_windows(t, T);
    int filled = 0;
    for (size_t k = first; k < W && filled < B; k++, filled++) {
        const int *w = t->tokens + t->n_train + k * (size_t)T;
        memcpy(x + (size_t)filled * T, w, (size_t)T * sizeof *x);
        memcpy(y + (size_t)filled * T, w + 1, (size_t)T * sizeof *y);
    }
    return filled;
}

void lmtext_random_ids(const LmText *t, Rng *r, int *ids, size_t n) {
    for (size_t i = 0; i < n; i++) ids[i] = t->tokens[rng_int(r, (int)t->n_train)];
}
