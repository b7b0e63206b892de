/* words.c - chapter 11's sentences and subwords on the terminal: wrapped
 * at 100 columns and escaped (the text comes from a corpus, a .bpe file or
 * the command line), how words segment into BPE symbols, and which words
 * of a real corpus to show. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fail.h"
#include "core/fileio.h"
#include "text/bpe.h"
#include "translation.h"


/* Prints "label text", wrapped at spaces so no line passes 100 columns
 * (continuation lines indented under the text). The text comes from a
 * corpus, a .bpe file or the command line, so it goes through fio_escape
 * first: a control byte, a C1 control or invalid UTF-8 prints as \xHH (and
 * '\' as "\\"), never as itself; printable UTF-8 (großen, 你好) is
 * unchanged. The label is the caller's own text (tr_print_ids escapes the
 * word it puts in one). */
void tr_print_wrapped(const char *label, const char *raw) {
    size_t cap = 4 * strlen(raw) + 4;   /* the worst case: every byte \xHH */
    char *safe = xmalloc(cap);
    const char *text = fio_escape(safe, cap, raw, (size_t)-1);
    int indent = 0;
    for (const char *q = label; *q; q++) indent += ((unsigned char)*q & 0xC0) != 0x80;
    int col = indent;
    printf("%s", label);
    const char *p = text;
    while (*p) {
        const char *w = p;
        while (*p && *p != ' ') p++;
        int cols = 0;
        for (const char *q = w; q < p; q++) cols += ((unsigned char)*q & 0xC0) != 0x80;
        if (col > indent && col + 1 + cols > 100) printf("\n%*s", col = indent, "");
        else if (col > indent) putchar(' '), col++;
        for (const char *q = w; q < p; q++) {   /* a word wider than a line is cut */
            if (((unsigned char)*q & 0xC0) != 0x80 && col == 100) printf("\n%*s", col = indent, "");
            putchar(*q);
            col += ((unsigned char)*q & 0xC0) != 0x80;
        }
        while (*p == ' ') p++;
    }
    putchar('\n');
    free(safe);
}


/* "  label      -> sym sym ...  (n tokens)", wrapped; the label (a word of
 * the corpus or of the user) escaped as tr_print_wrapped escapes the symbols */
void tr_print_ids(const Bpe *b, const char *raw_label, const int *ids, int n) {
    char label[4 * 160 + 4];
    fio_escape(label, sizeof label, raw_label, (size_t)-1);
    size_t cap = 64, len = 0;
    char *line = xmalloc(cap), sym[128];
    line[0] = 0;
    for (int i = 0; i < n; i++) {
        bpe_symbol_str(b, ids[i], sym, sizeof sym);
        size_t need = len + strlen(sym) + 2;
        if (need > cap) line = xrealloc(line, cap = 2 * need);
        len += (size_t)sprintf(line + len, "%s%s", i ? " " : "", sym);
    }
    int w = 0;   /* pad to 10 columns by characters, not bytes (großen) */
    for (const char *q = label; *q; q++) w += ((unsigned char)*q & 0xC0) != 0x80;
    char head[sizeof label + 32];
    snprintf(head, sizeof head, "  %s%*s -> ", label, w < 10 ? 10 - w : 0, "");
    char *text = xmalloc(len + 32);
    sprintf(text, "%s  (%d token%s)", line, n, n == 1 ? "" : "s");
    tr_print_wrapped(head, text);
    free(text);
    free(line);
}

/* how sentence s segments */
void tr_print_segmentation(const Bpe *b, const char *label, const char *s) {
    int n = bpe_encode(b, s, NULL, 0);
    int *ids = xmalloc(((size_t)n + 1) * sizeof(int));
    bpe_encode(b, s, ids, n);
    tr_print_ids(b, label, ids, n);
    free(ids);
}

/* 1 if the code point starting at s (l bytes) is a letter: a-z, A-Z or a
 * Latin letter with a diacritic (U+00C0..U+024F but for × and ÷) */
static int is_letter(const unsigned char *s, int l) {
    if (l == 1) return (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z');
    if (l != 2) return 0;
    int cp = (s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    return cp >= 0xC0 && cp <= 0x24F && cp != 0xD7 && cp != 0xF7;
}

typedef struct {
    const char *w;
    int n, count;       /* letters, occurrences */
} WordCount;

static int wc_text_cmp(const void *a, const void *b) {
    return strcmp(((const WordCount *)a)->w, ((const WordCount *)b)->w);
}

static int wc_cmp(const void *a, const void *b) {
    const WordCount *x = a, *y = b;
    if (x->count != y->count) return y->count - x->count;
    if (x->n != y->n) return y->n - x->n;
    return strcmp(x->w, y->w);
}

/* The k most frequent words of at least `least` letters (letters only: no
 * punctuation, no digits) among sentences[0..n); ties: longer first, then
 * byte order. Pointers into a copy of the text (*keep, to free). Returns
 * how many (fewer when the sentences have fewer such words). */
static int frequent_long_words(char *const *sentences, int n, int least, int k, const char **out, char **keep) {
    size_t total = 1;
    for (int i = 0; i < n; i++) total += strlen(sentences[i]) + 1;
    char *text = *keep = xmalloc(total), *p = text;
    for (int i = 0; i < n; i++) p += sprintf(p, "%s ", sentences[i]);
    WordCount *wc = xmalloc(total / 2 * sizeof(WordCount) + sizeof(WordCount));
    int nw = 0;
    for (char *w = strtok(text, " "); w; w = strtok(NULL, " ")) {
        int letters = 0, ok = 1;
        for (const unsigned char *q = (const unsigned char *)w; *q && ok;) {
            int l = (*q & 0xE0) == 0xC0 ? 2 : (*q & 0xF0) == 0xE0 ? 3 : (*q & 0xF8) == 0xF0 ? 4 : 1;
            ok = is_letter(q, l);
            letters++;
            for (int j = 0; j < l && *q; j++) q++;
        }
        if (ok && letters >= least) wc[nw++] = (WordCount){w, letters, 1};
    }
    /* count: sort by text, merge equal neighbours, then rank */
    qsort(wc, (size_t)nw, sizeof *wc, wc_text_cmp);
    int m = 0;
    for (int i = 0; i < nw; i++) {
        if (m > 0 && !strcmp(wc[m - 1].w, wc[i].w)) wc[m - 1].count++;
        else wc[m++] = wc[i];
    }
    qsort(wc, (size_t)m, sizeof *wc, wc_cmp);
    int got = m < k ? m : k;
    for (int i = 0; i < got; i++) out[i] = wc[i].w;
    free(wc);
    return got;
}

/* how a few words segment: the grammar's, chosen to show German
 * morphology; for a real corpus, its own dev set's most frequent long words */
void tr_show_segmentations(const TrTask *t, int generated) {
    printf("how words segment (</w> marks the end of a word):\n");
    if (generated) {
        static const char *const words[] = {"the", "großen", "Bäumen", "Mädchen", "gesehen", "children", "weil"};
        for (int i = 0; i < (int)(sizeof words / sizeof words[0]); i++)
            tr_print_segmentation(&t->bpe, words[i], words[i]);
        return;
    }
    printf("(the dev set's 3 most frequent words of 7 or more letters, each language; \"new\": a\n"
           "word training never had, spelled from the subwords it did have)\n");
    Bpe de_words = {0};   /* the German training words (t->bpe holds the English ones) */
    bpe_set_words(&de_words, t->train.tgt, t->train.n);
    for (int side = 0; side < 2; side++) {
        const char *w[3];
        char *keep, unk[8], label[160];
        int n = frequent_long_words(side ? t->dev.tgt : t->dev.src, t->dev.n, 7, 3, w, &keep);
        for (int i = 0; i < n; i++) {
            int is_new = bpe_unknown_word(side ? &de_words : &t->bpe, w[i], unk, sizeof unk);
            snprintf(label, sizeof label, "%s%s", w[i], is_new ? " (new)" : "");
            tr_print_segmentation(&t->bpe, label, w[i]);
        }
        if (!n) printf("  (no %s dev word of 7 or more letters)\n", side ? "German" : "English");
        free(keep);
    }
    bpe_free(&de_words);
}
