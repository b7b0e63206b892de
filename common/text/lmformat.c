/* lmformat.c - the dictionary's and the poems' form, measured (the rules
 * are in lmformat.h). */
#include "text/lmformat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/fail.h"
#include "text/lmtext.h"

/* ---- The Devil's Dictionary ---------------------------------------------------- */

/* 1 when the line s[0..n) holds nothing but spaces and tabs */
static int blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t') return 0;
    return 1;
}

LmShare lmformat_entries(const char *text, size_t n) {
    LmShare r = {0, 0};
    int after_blank = 1;   /* the first line opens a paragraph */
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && text[e] != '\n') e++;
        int is_blank = blank(text + i, e - i);
        if (after_blank && !is_blank && text[i] != ' ' && text[i] != '\t') {
            int head = lmtext_entry_head(text + i, n - i);
            if (head >= 0) r.total++, r.hits += head;
        }
        after_blank = is_blank;
        i = e + 1;
    }
    return r;
}

/* ---- the Tang poems --------------------------------------------------------------- */

int lmformat_is_han(unsigned cp) {
    return (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
           (cp >= 0x20000 && cp <= 0x2FA1F);
}

static int starts_with(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    return n >= k && !memcmp(s, prefix, k);
}

LmShare lmformat_verse_lines(const char *text, size_t n) {
    LmShare r = {0, 0};
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && text[e] != '\n') e++;
        int skip = starts_with(text + i, e - i, "《") || starts_with(text + i, e - i, "作者：");
        long run = 0;
        for (size_t j = i; !skip && j < e;) {
            uint32_t cp;
            int len = lmtext_utf8_next(s + j, e - j, &cp);
            if (!len) cp = 0xFFFD, len = 1;   /* not UTF-8: a non-Han character */
            if (lmformat_is_han(cp)) run++;
            else if (run) r.total++, r.hits += run == 5 || run == 7, run = 0;
            j += (size_t)len;
        }
        if (run && e < n) r.total++, r.hits += run == 5 || run == 7;   /* ended by the newline */
        i = e + 1;
    }
    return r;
}

/* ---- the baseline: random text of the training distribution ---------------------------- */

LmShare lmformat_random_share(const LmText *t, LmShare (*measure)(const char *, size_t), size_t n, Rng *r) {
    int *ids = xmalloc(n * sizeof *ids);
    lmtext_random_ids(t, r, ids, n);
    size_t len = lmtext_decode(t, ids, n, NULL, 0);
    char *text = xmalloc(len + 1);
    lmtext_decode(t, ids, n, text, len + 1);
    LmShare share = measure(text, len);
    free(text);
    free(ids);
    return share;
}
