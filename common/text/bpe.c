/* bpe.c - learn, apply, save and load a byte-pair encoding (see bpe.h). */
#include "text/bpe.h"
#include "core/fail.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


static char *xstrndup(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* Bytes in the UTF-8 character that starts with byte c (1 for anything
 * that is not a valid lead byte, so bad input still advances). */
static int utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 1;
}

/* ---- a string -> count table (word counts) ------------------------------- */
typedef struct {
    char **key;
    long *count;
    size_t cap, n;
} WordTable;

static void wt_add(WordTable *t, const char *w, size_t n, long c);

static void wt_grow(WordTable *t) {
    WordTable u = {xcalloc(t->cap ? 2 * t->cap : 1024, sizeof(char *)),
                   xcalloc(t->cap ? 2 * t->cap : 1024, sizeof(long)), t->cap ? 2 * t->cap : 1024, 0};
    for (size_t i = 0; i < t->cap; i++)
        if (t->key[i]) {
            wt_add(&u, t->key[i], strlen(t->key[i]), t->count[i]);
            free(t->key[i]);
        }
    free(t->key);
    free(t->count);
    *t = u;
}

static void wt_add(WordTable *t, const char *w, size_t n, long c) {
    if (2 * (t->n + 1) > t->cap) wt_grow(t);
    size_t i = fnv1a_update(FNV1A_INIT, w, n) & (t->cap - 1);
    while (t->key[i]) {
        if (strlen(t->key[i]) == n && !memcmp(t->key[i], w, n)) {
            t->count[i] += c;
            return;
        }
        i = (i + 1) & (t->cap - 1);
    }
    t->key[i] = xstrndup(w, n);
    t->count[i] = c;
    t->n++;
}

static void wt_free(WordTable *t) {
    for (size_t i = 0; i < t->cap; i++) free(t->key[i]);
    free(t->key);
    free(t->count);
    memset(t, 0, sizeof *t);
}

/* The next space-separated word of *s: its start in *w, its length
 * returned (0 at the end); *s moves past it. */
static size_t next_word(const char **s, const char **w) {
    while (**s == ' ') (*s)++;
    *w = *s;
    while (**s && **s != ' ') (*s)++;
    return (size_t)(*s - *w);
}

/* Calls fn on every space-separated word of s. */
static void each_word(const char *s, void (*fn)(void *, const char *, size_t), void *ctx) {
    const char *w;
    for (size_t n; (n = next_word(&s, &w)) > 0;) fn(ctx, w, n);
}
static void count_word(void *ctx, const char *w, size_t n) { wt_add(ctx, w, n, 1); }

/* ---- the pair -> merged id table ------------------------------------------ */
static uint64_t pair_key(int l, int r) { return ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) + 1; }

static size_t hash64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k;
}

static void pairs_insert(Bpe *b, int l, int r, int id) {
    uint64_t k = pair_key(l, r);
    size_t i = hash64(k) & (b->pair_cap - 1);
    while (b->pair_key[i] && b->pair_key[i] != k) i = (i + 1) & (b->pair_cap - 1);
    b->pair_key[i] = k;
    b->pair_id[i] = id;
}

static int pairs_find(const Bpe *b, int l, int r) {
    if (!b->pair_cap) return -1;
    uint64_t k = pair_key(l, r);
    size_t i = hash64(k) & (b->pair_cap - 1);
    while (b->pair_key[i]) {
        if (b->pair_key[i] == k) return b->pair_id[i];
        i = (i + 1) & (b->pair_cap - 1);
    }
    return -1;
}

/* (Re)builds the pair table from the merges in b->sym. */
static void pairs_build(Bpe *b) {
    free(b->pair_key);
    free(b->pair_id);
    b->pair_cap = 16;
    while (b->pair_cap < 2 * (size_t)b->n_merges + 2) b->pair_cap *= 2;
    b->pair_key = xcalloc(b->pair_cap, sizeof(uint64_t));
    b->pair_id = xcalloc(b->pair_cap, sizeof(int));
    for (int id = BPE_N_SPECIAL + b->n_chars; id < b->vocab; id++)
        pairs_insert(b, b->sym[id].left, b->sym[id].right, id);
}

/* ---- merges ------------------------------------------------------------------ */

/* The symbol that merge (l, r) makes: the two texts joined, ending a word
 * when r does. */
static BpeSymbol merged_symbol(const Bpe *b, int l, int r) {
    size_t nl = strlen(b->sym[l].text), nr = strlen(b->sym[r].text);
    char *t = xmalloc(nl + nr + 1);
    memcpy(t, b->sym[l].text, nl);
    memcpy(t + nl, b->sym[r].text, nr + 1);
    return (BpeSymbol){t, b->sym[r].eow, l, r};
}

/* Applies merge (l, r) -> id to the k symbols s, in place: every
 * occurrence, left to right ("a a a" with (a, a) gives "aa a"). Returns
 * the new count. */
static int merge_pair(int *s, int k, int l, int r, int id) {
    int o = 0;
    for (int j = 0; j < k; j++) {
        if (j + 1 < k && s[j] == l && s[j + 1] == r) {
            s[o++] = id;
            j++;
        } else {
            s[o++] = s[j];
        }
    }
    return o;
}

/* ---- characters ------------------------------------------------------------ */

/* byte order of text, then inner before end-of-word */
static int sym_cmp(const BpeSymbol *a, const BpeSymbol *b) {
    int c = strcmp(a->text, b->text);
    return c ? c : a->eow - b->eow;
}
static int sym_qcmp(const void *a, const void *b) { return sym_cmp(a, b); }

/* The id of character c (n bytes) with end-of-word flag eow, by binary
 * search over the sorted characters; BPE_UNK if training never saw it. */
static int char_id(const Bpe *b, const char *c, size_t n, int eow) {
    char key[8];
    if (n >= sizeof key) return BPE_UNK;
    memcpy(key, c, n);
    key[n] = 0;
    BpeSymbol k = {key, eow, -1, -1};
    int lo = BPE_N_SPECIAL, hi = BPE_N_SPECIAL + b->n_chars - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, d = sym_cmp(&k, &b->sym[mid]);
        if (!d) return mid;
        if (d < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return BPE_UNK;
}

/* Word -> character ids (the last marked end-of-word). Returns the count. */
static int word_chars(const Bpe *b, const char *w, size_t n, int *ids) {
    int k = 0;
    for (size_t i = 0; i < n;) {
        size_t l = (size_t)utf8_len((unsigned char)w[i]);
        if (i + l > n) l = n - i;
        ids[k++] = char_id(b, w + i, l, i + l == n);
        i += l;
    }
    return k;
}

static void set_special(Bpe *b) {
    static const char *const names[BPE_N_SPECIAL] = {"<pad>", "<s>", "</s>", "<unk>"};
    for (int i = 0; i < BPE_N_SPECIAL; i++) {
        b->sym[i].text = xstrndup(names[i], strlen(names[i]));
        b->sym[i].eow = 0;
        b->sym[i].left = b->sym[i].right = -1;
    }
}

void bpe_free(Bpe *b) {
    if (!b) return;
    for (int i = 0; i < b->vocab; i++) free(b->sym ? b->sym[i].text : NULL);
    free(b->sym);
    free(b->pair_key);
    free(b->pair_id);
    for (int i = 0; i < b->n_words; i++) free(b->words[i]);
    free(b->words);
    memset(b, 0, sizeof *b);
}

/* ---- learning --------------------------------------------------------------- */

typedef struct {
    int *s;        /* symbol ids */
    int n;
    long count;
} Word;

/* pair counts for one iteration: open addressing keyed like the pair table */
typedef struct {
    uint64_t *key;
    long *count;
    size_t cap;
} PairCount;

static void pc_add(PairCount *p, int l, int r, long c) {
    uint64_t k = pair_key(l, r);
    size_t i = hash64(k) & (p->cap - 1);
    while (p->key[i] && p->key[i] != k) i = (i + 1) & (p->cap - 1);
    p->key[i] = k;
    p->count[i] += c;
}

/* 1 if pair (l1,r1) comes before (l2,r2) in the tie-break order */
static int pair_before(const Bpe *b, int l1, int r1, int l2, int r2) {
    int c = sym_cmp(&b->sym[l1], &b->sym[l2]);
    if (c) return c < 0;
    c = sym_cmp(&b->sym[r1], &b->sym[r2]);
    if (c) return c < 0;
    return l1 != l2 ? l1 < l2 : r1 < r2;
}

int bpe_learn(Bpe *b, char *const *a, int n_a, char *const *bside, int n_b, int vocab,
              char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    if (vocab < 1 || vocab > BPE_MAX_VOCAB)
        return fail_rc(2, err, errlen, "vocabulary size %d: it must be between %d and %d", vocab,
                    BPE_N_SPECIAL + 1, BPE_MAX_VOCAB);
    WordTable wt = {0};
    for (int i = 0; i < n_a; i++) each_word(a[i], count_word, &wt);
    for (int i = 0; i < n_b; i++) each_word(bside[i], count_word, &wt);
    if (wt.n == 0) {
        wt_free(&wt);
        return fail_rc(2, err, errlen, "no words to learn a vocabulary from (the training set is empty)");
    }

    /* the characters: every (character, end-of-word) that occurs */
    WordTable chars = {0};
    for (size_t i = 0; i < wt.cap; i++) {
        const char *w = wt.key[i];
        if (!w) continue;
        size_t n = strlen(w);
        for (size_t j = 0; j < n;) {
            size_t l = (size_t)utf8_len((unsigned char)w[j]);
            if (j + l > n) l = n - j;
            char key[16];
            memcpy(key, w + j, l);
            key[l] = j + l == n ? '\1' : '\2';   /* the flag rides along as a last byte */
            wt_add(&chars, key, l + 1, 1);
            j += l;
        }
    }
    int C = (int)chars.n;
    if (vocab < BPE_N_SPECIAL + C) {
        wt_free(&wt);
        wt_free(&chars);
        return fail_rc(2, err, errlen, "vocabulary size %d is too small: 4 special symbols and the %d\n"
                    "  characters of the training text (inside and at the end of a word) need %d",
                    vocab, C, BPE_N_SPECIAL + C);
    }
    b->sym = xcalloc((size_t)vocab, sizeof(BpeSymbol));
    set_special(b);
    int k = BPE_N_SPECIAL;
    for (size_t i = 0; i < chars.cap; i++) {
        if (!chars.key[i]) continue;
        size_t l = strlen(chars.key[i]);
        b->sym[k].text = xstrndup(chars.key[i], l - 1);
        b->sym[k].eow = chars.key[i][l - 1] == '\1';
        b->sym[k].left = b->sym[k].right = -1;
        k++;
    }
    wt_free(&chars);
    qsort(b->sym + BPE_N_SPECIAL, (size_t)C, sizeof(BpeSymbol), sym_qcmp);
    b->n_chars = C;
    b->vocab = BPE_N_SPECIAL + C;

    /* every distinct word as character ids, with its count */
    int nw = (int)wt.n;
    Word *words = xcalloc((size_t)nw, sizeof(Word));
    size_t max_len = 1;
    {
        int j = 0;
        for (size_t i = 0; i < wt.cap; i++) {
            if (!wt.key[i]) continue;
            size_t n = strlen(wt.key[i]);
            words[j].s = xmalloc(n * sizeof(int));
            words[j].n = word_chars(b, wt.key[i], n, words[j].s);
            words[j].count = wt.count[i];
            if ((size_t)words[j].n > max_len) max_len = (size_t)words[j].n;
            j++;
        }
    }
    wt_free(&wt);

    size_t total_pairs = 0;
    for (int i = 0; i < nw; i++) total_pairs += (size_t)words[i].n;
    PairCount pc = {0};
    pc.cap = 16;
    while (pc.cap < 2 * total_pairs + 2) pc.cap *= 2;
    pc.key = xcalloc(pc.cap, sizeof(uint64_t));
    pc.count = xcalloc(pc.cap, sizeof(long));

    while (b->vocab < vocab) {
        memset(pc.key, 0, pc.cap * sizeof(uint64_t));
        memset(pc.count, 0, pc.cap * sizeof(long));
        for (int i = 0; i < nw; i++)
            for (int j = 0; j + 1 < words[i].n; j++) pc_add(&pc, words[i].s[j], words[i].s[j + 1], words[i].count);
        long best = 0;
        int bl = -1, br = -1;
        for (size_t i = 0; i < pc.cap; i++) {
            if (!pc.key[i]) continue;
            int l = (int)((pc.key[i] - 1) >> 32), r = (int)((pc.key[i] - 1) & 0xffffffffu);
            if (pc.count[i] > best || (pc.count[i] == best && bl >= 0 && pair_before(b, l, r, bl, br))) {
                /* no symbol longer than BPE_MAX_SYMBOL_BYTES: bpe_load refuses one (bpe.h) */
                if (strlen(b->sym[l].text) + strlen(b->sym[r].text) > BPE_MAX_SYMBOL_BYTES) continue;
                best = pc.count[i];
                bl = l;
                br = r;
            }
        }
        if (best < 2) break;   /* a pair seen once is not worth a symbol */
        int id = b->vocab++;
        b->sym[id] = merged_symbol(b, bl, br);
        b->n_merges++;
        /* replace every occurrence in every word, left to right */
        for (int i = 0; i < nw; i++) words[i].n = merge_pair(words[i].s, words[i].n, bl, br, id);
    }
    free(pc.key);
    free(pc.count);
    for (int i = 0; i < nw; i++) free(words[i].s);
    free(words);
    pairs_build(b);
    (void)max_len;
    return 0;
}

/* ---- the source words (for unknown-word messages) ---------------------------- */

static void collect_word(void *ctx, const char *w, size_t n) { wt_add(ctx, w, n, 1); }

static int strp_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void bpe_set_words(Bpe *b, char *const *sent, int n) {
    for (int i = 0; i < b->n_words; i++) free(b->words[i]);
    free(b->words);
    WordTable wt = {0};
    for (int i = 0; i < n; i++) each_word(sent[i], collect_word, &wt);
    b->words = xcalloc(wt.n, sizeof(char *));
    b->n_words = 0;
    for (size_t i = 0; i < wt.cap; i++)
        if (wt.key[i]) {
            b->words[b->n_words++] = wt.key[i];
            wt.key[i] = NULL;
        }
    wt_free(&wt);
    qsort(b->words, (size_t)b->n_words, sizeof(char *), strp_cmp);   /* sorted: same bytes every run */
}

int bpe_unknown_word(const Bpe *b, const char *s, char *buf, size_t len) {
    if (b->n_words == 0) return 0;
    const char *w;
    for (size_t n; (n = next_word(&s, &w)) > 0;) {
        char key[512];
        int found = 0;
        if (n < sizeof key) {
            memcpy(key, w, n);
            key[n] = 0;
            const char *kp = key;
            found = bsearch(&kp, b->words, (size_t)b->n_words, sizeof(char *), strp_cmp) != NULL;
        }
        if (!found) {
            snprintf(buf, len, "%.*s", (int)(n < 200 ? n : 200), w);
            return 1;
        }
    }
    return 0;
}

int bpe_unknown_chars(const Bpe *b, const char *s, char *buf, size_t len) {
    int count = 0;
    size_t o = 0;
    if (len) buf[0] = 0;
    const char *w;
    for (size_t n; (n = next_word(&s, &w)) > 0;) {
        for (size_t i = 0; i < n;) {
            size_t l = (size_t)utf8_len((unsigned char)w[i]);
            if (i + l > n) l = n - i;
            if (char_id(b, w + i, l, i + l == n) == BPE_UNK) {
                count++;
                /* listed once: is it in buf already, as a whole entry? */
                int listed = 0;
                for (const char *p = buf; len && *p && !listed;) {
                    const char *e = strchr(p, ' ');
                    size_t pl = e ? (size_t)(e - p) : strlen(p);
                    listed = pl == l && !memcmp(p, w + i, l);
                    p += pl + (e != NULL);
                }
                if (!listed && len && o + l + 2 <= len) {
                    if (o) buf[o++] = ' ';
                    memcpy(buf + o, w + i, l);
                    buf[o += l] = 0;
                }
            }
            i += l;
        }
    }
    return count;
}

/* ---- encode / decode ----------------------------------------------------------- */

/* One word: characters, then the learned merges in the order learned: the
 * adjacent pair with the lowest merge id goes first, every occurrence of it. */
static int encode_word(const Bpe *b, const char *w, size_t n, int *s) {
    int k = word_chars(b, w, n, s);
    for (;;) {
        int best = -1;
        for (int j = 0; j + 1 < k; j++) {
            int id = pairs_find(b, s[j], s[j + 1]);
            if (id >= 0 && (best < 0 || id < best)) best = id;
        }
        if (best < 0) return k;
        k = merge_pair(s, k, b->sym[best].left, b->sym[best].right, best);
    }
}

int bpe_encode(const Bpe *b, const char *s, int *ids, int cap) {
    int total = 0;
    int small[256];
    const char *w;
    for (size_t n; (n = next_word(&s, &w)) > 0;) {
        int *buf = n <= 256 ? small : xmalloc(n * sizeof(int));
        int k = encode_word(b, w, n, buf);
        for (int j = 0; j < k; j++) {
            if (total < cap) ids[total] = buf[j];
            total++;
        }
        if (buf != small) free(buf);
    }
    return total;
}

size_t bpe_decode(const Bpe *b, const int *ids, int n, char *out, size_t len) {
    size_t o = 0;
    int need_space = 0;
#define EMIT(str, sl)                                                      \
    do {                                                                   \
        for (size_t q_ = 0; q_ < (sl); q_++, o++)                          \
            if (len && o < len - 1) out[o] = (str)[q_];                    \
    } while (0)
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (id == BPE_EOS) break;
        if (id == BPE_PAD || id == BPE_BOS || id < 0 || id >= b->vocab) continue;
        if (need_space) EMIT(" ", 1);
        need_space = 0;
        const char *t = b->sym[id].text;
        EMIT(t, strlen(t));
        if (b->sym[id].eow) need_space = 1;
    }
#undef EMIT
    if (len) out[o < len - 1 ? o : len - 1] = 0;
    return o;
}

void bpe_symbol_str(const Bpe *b, int id, char *buf, size_t len) {
    if (id < 0 || id >= b->vocab) snprintf(buf, len, "<%d?>", id);
    else snprintf(buf, len, "%s%s", b->sym[id].text, b->sym[id].eow ? "</w>" : "");
}

/* ---- save / load ------------------------------------------------------------------ */

int bpe_save(const Bpe *b, const char *path, char *err, size_t errlen) {
    StrBuf o = {0};   /* the whole file, so that its checksum can end it */
    strbuf_printf(&o, "AIYNBPE 2\nvocab %d chars %d merges %d words %d\ntext %s\n", b->vocab, b->n_chars,
                  b->n_merges, b->n_words, b->tokenised ? "tokenised" : "as-is");
    for (int i = 0; i < b->n_chars; i++) {
        const BpeSymbol *s = &b->sym[BPE_N_SPECIAL + i];
        strbuf_printf(&o, "c\t%d\t%s\n", s->eow, s->text);
    }
    for (int i = BPE_N_SPECIAL + b->n_chars; i < b->vocab; i++)
        strbuf_printf(&o, "m\t%d\t%d\n", b->sym[i].left, b->sym[i].right);
    for (int i = 0; i < b->n_words; i++) strbuf_printf(&o, "w\t%s\n", b->words[i]);
    strbuf_printf(&o, "end %08x\n", crc32_update(0, o.s, o.len));

    if (o.oom) {
        strbuf_free(&o);
        return fail_rc(1, err, errlen, "%s: out of memory building the vocabulary file", path);
    }
    /* a unique temporary beside path, renamed over it when complete (fileio.h) */
    FioWriter w;
    if (fio_create(&w, path, err, errlen)) {
        strbuf_free(&o);
        return 1;
    }
    fwrite(o.s, 1, o.len, w.f);   /* fio_commit checks the stream's error flag */
    strbuf_free(&o);
    return fio_commit(&w, err, errlen) ? 1 : 0;
}

/* next line of the file buffer: returns it NUL-terminated (in place), or NULL */
static char *next_line(char **p, char *end) {
    if (*p >= end) return NULL;
    char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl) return NULL;
    *nl = 0;
    *p = nl + 1;
    return s;
}

/* "NAME N" at *s, N a count in 0..INT_MAX, then a space or the end of the
 * line; moves *s past it. 0, or -1 (the counts line is bad). */
static int read_count(const char **s, const char *name, int *v) {
    size_t k = strlen(name);
    if (strncmp(*s, name, k) || (*s)[k] != ' ' || (*s)[k + 1] < '0' || (*s)[k + 1] > '9') return -1;
    long long x = 0;
    const char *q = *s + k + 1;
    for (; *q >= '0' && *q <= '9'; q++)
        if ((x = 10 * x + (*q - '0')) > 0x7fffffff) return -1;
    if (*q && *q != ' ') return -1;
    *v = (int)x;
    *s = *q ? q + 1 : q;
    return 0;
}

/* What to do about a file that is there but cannot be read as a
 * vocabulary: the vocabulary cannot be rebuilt from a damaged file, and
 * training writes both it and the checkpoint. (A missing file is the
 * caller's to explain: it knows how its program trains.) */
#define RETRAIN "\n  (the vocabulary cannot be rebuilt from it: train again to write a new one)"

/* The bytes a line of each kind takes at the least (its text one byte):
 *   "c\t0\tX\n" 6, "m\t4\t4\n" 6, "w\tX\n" 4.
 * A declared count is believed only when that many lines fit in the
 * file's bytes, so nothing is allocated for lines that are not there. */
enum { MIN_CHAR_LINE = 6, MIN_MERGE_LINE = 6, MIN_WORD_LINE = 4 };

/* Refuses counts the rem bytes of lines after the header cannot hold,
 * naming the count: 0, or 2 with why in whybuf. */
static int counts_fit(int C, int M, int W, long long rem, char *whybuf, size_t len) {
    const struct { const char *name; long long n, least; } c[3] = {
        {"chars", C, MIN_CHAR_LINE}, {"merges", M, MIN_MERGE_LINE}, {"words", W, MIN_WORD_LINE}};
    long long need = 0;
    for (int i = 0; i < 3; i++) {
        if (c[i].n * c[i].least > rem) {
            snprintf(whybuf, len, "%s %lld: the file cannot hold that many (each such line takes at least %lld "
                     "bytes; the file has %lld bytes of lines)" RETRAIN, c[i].name, c[i].n, c[i].least, rem);
            return 2;
        }
        need += c[i].n * c[i].least;
    }
    if (need <= rem) return 0;
    snprintf(whybuf, len, "chars %d, merges %d and words %d: the file cannot hold that many lines (they take at "
             "least %lld bytes; the file has %lld)" RETRAIN, C, M, W, need, rem);
    return 2;
}

/* Bounds on what a file can make us allocate, all checked before the
 * allocation: the counts by the file's size (counts_fit); every character
 * one character (at most 4 bytes, as bpe_learn makes them); every merged
 * symbol at most BPE_MAX_SYMBOL_BYTES (bpe_learn makes none longer), so a
 * file of n bytes, at most n/6 merges, makes at most 43n bytes of text,
 * however its merges nest (40 merges each doubling the last would
 * otherwise make 2^40). */
int bpe_load(Bpe *b, const char *path, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    struct stat st;
    if (stat(path, &st) != 0) return fail_rc(1, err, errlen, "cannot open '%s': %s", path, strerror(errno));
    long long size = 0;
    FILE *f = fio_open_read(path, &size, err, errlen);   /* a regular file, or refused (bad input) */
    if (!f) return 2;
    if (size > (1 << 28)) {
        fclose(f);
        return fail_rc(2, err, errlen, "%s: %lld bytes is too big for a BPE file" RETRAIN, path, size);
    }
    size_t n = (size_t)size;
    char *data = xmalloc(n + 1);
    size_t got = fread(data, 1, n, f);
    fclose(f);
    if (got != n) {
        free(data);
        return fail_rc(1, err, errlen, "%s: read %zu of %zu bytes", path, got, n);
    }
    data[n] = 0;
    int rc = 2;
    const char *why = NULL;
    char whybuf[400];
    if (n < 10 || memcmp(data, "AIYNBPE ", 8)) { why = "not a BPE vocabulary (no AIYNBPE header)" RETRAIN; goto out; }
    /* CR LF after the first line: converted on its way (git's autocrlf, an
     * editor); the checksum is over the LF bytes, so converting back restores it */
    const char *nl1 = memchr(data, '\n', n);
    if (nl1 && nl1 > data && nl1[-1] == '\r') {
        why = "has Windows (CRLF) line endings; a BPE file has LF endings\n"
              "  (convert it back with dos2unix, which restores the bytes its checksum covers, or train again)";
        goto out;
    }
    int version = !strncmp(data, "AIYNBPE 2\n", 10) ? 2 : !strncmp(data, "AIYNBPE 1\n", 10) ? 1 : 0;
    if (!version) {
        why = "unsupported BPE file version (this program reads versions 1 and 2)\n"
              "  (a newer program wrote it: read it with that one, or train again with this one)";
        goto out;
    }
    /* the checksum line: "end xxxxxxxx\n" at the very end */
    if (n < 13 + 10 || data[n - 1] != '\n' || memcmp(data + n - 13, "end ", 4)) {
        why = "truncated (no end line)" RETRAIN;
        goto out;
    }
    unsigned crc_file;
    if (sscanf(data + n - 9, "%8x", &crc_file) != 1) { why = "bad end line" RETRAIN; goto out; }
    if (crc32_update(0, data, n - 13) != crc_file) { why = "checksum mismatch (the file is corrupted)" RETRAIN; goto out; }

    char *p = data, *end = data + n - 13;
    next_line(&p, end);
    const char *hdr = next_line(&p, end);
    int V, C, M, W;
    if (!hdr || read_count(&hdr, "vocab", &V) || read_count(&hdr, "chars", &C) || read_count(&hdr, "merges", &M) ||
        read_count(&hdr, "words", &W) || *hdr || C < 1 || V != (long long)BPE_N_SPECIAL + C + M || V > BPE_MAX_VOCAB) {
        snprintf(whybuf, sizeof whybuf, "bad counts line (\"vocab V chars C merges M words W\": V = %d + C + M, "
                 "C at least 1, V at most %d)" RETRAIN, BPE_N_SPECIAL, BPE_MAX_VOCAB);
        why = whybuf;
        goto out;
    }
    /* version 1 has no text line: its --translate always wrote input the
     * generated corpus's way, so it is read as tokenised (bpe.h) */
    int tokenised = 1;
    if (version >= 2) {
        char *t = next_line(&p, end);
        if (!t || (strcmp(t, "text tokenised") && strcmp(t, "text as-is"))) {
            why = "bad text line (expected \"text tokenised\" or \"text as-is\")" RETRAIN;
            goto out;
        }
        tokenised = !strcmp(t, "text tokenised");
    }
    if (counts_fit(C, M, W, (long long)(end - p), whybuf, sizeof whybuf)) {
        why = whybuf;
        goto out;
    }
    b->sym = xcalloc((size_t)V, sizeof(BpeSymbol));
    set_special(b);
    b->vocab = BPE_N_SPECIAL;
    b->tokenised = tokenised;
    for (int i = 0; i < C; i++) {
        char *l = next_line(&p, end);
        if (!l || l[0] != 'c' || l[1] != '\t' || (l[2] != '0' && l[2] != '1') || l[3] != '\t' || !l[4] ||
            strlen(l + 4) > 4) {
            snprintf(whybuf, sizeof whybuf, "character %d of %d: bad line (\"c<TAB>0 or 1<TAB>one character\")"
                     RETRAIN, i + 1, C);
            why = whybuf;
            goto out;
        }
        b->sym[b->vocab++] = (BpeSymbol){xstrndup(l + 4, strlen(l + 4)), l[2] == '1', -1, -1};
        if (i > 0 && sym_cmp(&b->sym[b->vocab - 2], &b->sym[b->vocab - 1]) >= 0) {
            why = "characters out of order" RETRAIN;
            goto out;
        }
    }
    b->n_chars = C;
    for (int i = 0; i < M; i++) {
        char *l = next_line(&p, end);
        int L, R;
        char extra;
        int id = b->vocab;
        if (!l || sscanf(l, "m\t%d\t%d%c", &L, &R, &extra) != 2 || L < BPE_N_SPECIAL || R < BPE_N_SPECIAL ||
            L >= id || R >= id) {
            snprintf(whybuf, sizeof whybuf, "merge %d of %d: bad line or an id not defined before it" RETRAIN, i + 1, M);
            why = whybuf;
            goto out;
        }
        size_t bytes = strlen(b->sym[L].text) + strlen(b->sym[R].text);
        if (bytes > BPE_MAX_SYMBOL_BYTES) {
            snprintf(whybuf, sizeof whybuf, "merge %d of %d would make a symbol of %zu bytes; training makes none "
                     "longer than %d" RETRAIN, i + 1, M, bytes, BPE_MAX_SYMBOL_BYTES);
            why = whybuf;
            goto out;
        }
        b->sym[b->vocab] = merged_symbol(b, L, R);
        b->vocab++;
        b->n_merges++;
    }
    b->words = xcalloc((size_t)W, sizeof(char *));
    for (int i = 0; i < W; i++) {
        char *l = next_line(&p, end);
        if (!l || l[0] != 'w' || l[1] != '\t' || !l[2]) {
            snprintf(whybuf, sizeof whybuf, "word %d of %d: bad line" RETRAIN, i + 1, W);
            why = whybuf;
            goto out;
        }
        b->words[b->n_words++] = xstrndup(l + 2, strlen(l + 2));
        if (i > 0 && strcmp(b->words[i - 1], b->words[i]) >= 0) {
            why = "words out of order" RETRAIN;
            goto out;
        }
    }
    if (p != end) { why = "extra lines before the end line" RETRAIN; goto out; }
    pairs_build(b);
    rc = 0;
out:
    free(data);
    if (rc) {
        bpe_free(b);
        return fail_rc(rc, err, errlen, "%s: %s", path, why);
    }
    return 0;
}
