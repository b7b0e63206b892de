/* check_bpe.c - byte-pair encoding: merges on a hand-checked toy corpus,
 * exact round trips (UTF-8 included), unknown characters, save/load, and
 * the errors (vocabulary 0 or too small, damaged files, hostile files with
 * a valid checksum that would take gigabytes, CRLF line endings, a hint
 * that fits the error). Also the growing printf string bpe_save builds its
 * file in (core/strbuf.h). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "text/bpe.h"
#include "core/fileio.h"   /* crc32_update, to write a version 1 file by hand */
#include "core/strbuf.h"
#include "text/corpus.h"
#include "testutil.h"

static void sym(const Bpe *b, int id, char *buf) { bpe_symbol_str(b, id, buf, 64); }

START_TEST(test_toy_merges) {
    /* Sennrich et al.'s example: low x5, lower x2, newest x6, widest x3,
     * each word as characters with the end marker on the last one:
     * n e w e s t</w>. 11 characters. Pair counts, and the merges by hand:
     *   e+s 6+3 = 9 ties with s+t</w> 9; "e" < "s" in byte order   -> es
     *   es+t</w> 9                                                 -> est</w>
     *   l+o 5+2 = 7                                                -> lo
     *   n+e 6, e+w 6, w+est</w> 6 tie; "e" < "n" < "w"             -> ew    */
    char *a[] = {"low low low low low lower lower newest newest newest newest newest newest widest widest widest"};
    Bpe b;
    char err[256], l[64], r[64];
    ck_assert_int_eq(bpe_learn(&b, a, 1, NULL, 0, 4 + 11 + 4, err, sizeof err), 0);
    ck_assert_int_eq(b.n_chars, 11);
    ck_assert_int_eq(b.n_merges, 4);
    const char *want[4][3] = {{"e", "s", "es"}, {"es", "t</w>", "est</w>"}, {"l", "o", "lo"}, {"e", "w", "ew"}};
    for (int k = 0; k < 4; k++) {
        int id = BPE_N_SPECIAL + b.n_chars + k;
        char m[64];
        sym(&b, b.sym[id].left, l);
        sym(&b, b.sym[id].right, r);
        sym(&b, id, m);
        ck_assert_str_eq(l, want[k][0]);
        ck_assert_str_eq(r, want[k][1]);
        ck_assert_str_eq(m, want[k][2]);
    }
    /* encoding applies them in order: "lowest" -> lo w est</w> */
    int ids[16], n = bpe_encode(&b, "lowest", ids, 16);
    ck_assert_int_eq(n, 3);
    sym(&b, ids[2], l);
    ck_assert_str_eq(l, "est</w>");
    bpe_free(&b);
}
END_TEST

START_TEST(test_round_trip) {
    Corpus tr, dv, te;
    char err[256];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 3000, 100, 100, 3, err, sizeof err), 0);
    Bpe b;
    ck_assert_int_eq(bpe_learn(&b, tr.src, tr.n, tr.tgt, tr.n, 500, err, sizeof err), 0);
    ck_assert_int_le(b.vocab, 500);
    int ids[512];
    char out[2048];
    for (int i = 0; i < te.n; i++) {
        const char *s[2] = {te.src[i], te.tgt[i]};
        for (int k = 0; k < 2; k++) {
            int n = bpe_encode(&b, s[k], ids, 512);
            ck_assert_int_le(n, 512);
            for (int j = 0; j < n; j++) ck_assert_int_ne(ids[j], BPE_UNK);
            bpe_decode(&b, ids, n, out, sizeof out);
            ck_assert_str_eq(out, s[k]);
        }
    }
    /* UTF-8 words, whole or in pieces */
    const char *words[] = {"große Bäume", "Bäumen", "Mädchen", "weiß", "Äpfeln", "fünf zwölf"};
    for (int i = 0; i < 6; i++) {
        int n = bpe_encode(&b, words[i], ids, 512);
        bpe_decode(&b, ids, n, out, sizeof out);
        ck_assert_str_eq(out, words[i]);
    }
    /* </s> ends decoding; <pad>, <s> print nothing */
    int n = bpe_encode(&b, "Der Hund", ids + 1, 500);
    ids[0] = BPE_BOS;
    ids[n + 1] = BPE_EOS;
    ids[n + 2] = ids[1];
    bpe_decode(&b, ids, n + 3, out, sizeof out);
    ck_assert_str_eq(out, "Der Hund");
    /* a character training never saw */
    n = bpe_encode(&b, "Hund\xE2\x82\xAC", ids, 512);   /* Hund€ */
    ck_assert_int_eq(ids[n - 1], BPE_UNK);
    /* a buffer too small: the return says how much was needed */
    ck_assert_int_gt(bpe_encode(&b, te.src[0], ids, 2), 2);
    ck_assert_uint_eq(bpe_decode(&b, ids, 2, out, 3), bpe_decode(&b, ids, 2, NULL, 0));
    ck_assert_uint_le(strlen(out), 2);
    bpe_free(&b);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
}
END_TEST

/* Any text encodes (bpe.h): a word training never saw is spelled from the
 * subwords it has and decodes back to itself; only a character it never
 * saw becomes <unk>, one per character, and bpe_unknown_chars names it. */
START_TEST(test_unseen_words) {
    Corpus tr, dv, te;
    char err[256], out[4096], unk[64];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 3000, 1, 1, 3, err, sizeof err), 0);
    Bpe b;
    ck_assert_int_eq(bpe_learn(&b, tr.src, tr.n, tr.tgt, tr.n, 500, err, sizeof err), 0);
    bpe_set_words(&b, tr.src, tr.n);
    int ids[2048];
    /* "elephants" is no word of the grammar; its letters are, in those places */
    const char *word = "elephants";
    ck_assert_int_eq(bpe_unknown_word(&b, word, unk, sizeof unk), 1);
    int n = bpe_encode(&b, word, ids, 2048);
    ck_assert_int_gt(n, 1);                       /* spelled from several subwords ... */
    ck_assert_int_lt(n, (int)strlen(word));      /* ... some of them merged: not letter by letter */
    for (int j = 0; j < n; j++) ck_assert_int_ne(ids[j], BPE_UNK);
    ck_assert_int_eq(bpe_unknown_chars(&b, word, unk, sizeof unk), 0);
    bpe_decode(&b, ids, n, out, sizeof out);
    ck_assert_str_eq(out, word);
    /* a German word with umlauts and ß, and a long compound */
    const char *de[] = {"große Bäume", "Hundefutterdosenöffnerbäumeschülerinnenweißgrößenmädchenstraße"};
    for (int i = 0; i < 2; i++) {
        n = bpe_encode(&b, de[i], ids, 2048);
        for (int j = 0; j < n; j++) ck_assert_int_ne(ids[j], BPE_UNK);
        bpe_decode(&b, ids, n, out, sizeof out);
        ck_assert_str_eq(out, de[i]);
    }
    /* a word longer than the encoder's stack buffer (256 bytes) */
    char longw[700] = "";
    for (int i = 0; i < 80; i++) strcat(longw, "Hunde");
    n = bpe_encode(&b, longw, ids, 2048);
    ck_assert_int_le(n, 2048);
    bpe_decode(&b, ids, n, out, sizeof out);
    ck_assert_str_eq(out, longw);
    /* characters training never saw: one <unk> each, named once */
    n = bpe_encode(&b, "Hund\xE2\x82\xAC \xE2\x9C\x93 Katze \xE2\x9C\x93", ids, 2048);   /* Hund€ ✓ Katze ✓ */
    int unks = 0;
    for (int j = 0; j < n; j++) unks += ids[j] == BPE_UNK;
    ck_assert_int_eq(unks, 3);
    ck_assert_int_eq(bpe_unknown_chars(&b, "Hund\xE2\x82\xAC \xE2\x9C\x93 Katze \xE2\x9C\x93", unk, sizeof unk), 3);
    ck_assert_str_eq(unk, "\xE2\x82\xAC \xE2\x9C\x93");
    /* bytes that are not UTF-8 still encode: one <unk> per byte */
    n = bpe_encode(&b, "a\xFF\xFE", ids, 2048);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ids[1], BPE_UNK);
    ck_assert_int_eq(ids[2], BPE_UNK);
    bpe_free(&b);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
}
END_TEST

START_TEST(test_deterministic) {
    char *a[] = {"aa bb ab ba aab bba", "ba ab aa"};
    Bpe b1, b2;
    char err[256];
    ck_assert_int_eq(bpe_learn(&b1, a, 2, a, 2, 40, err, sizeof err), 0);
    ck_assert_int_eq(bpe_learn(&b2, a, 2, a, 2, 40, err, sizeof err), 0);
    ck_assert_int_eq(b1.vocab, b2.vocab);
    for (int i = 0; i < b1.vocab; i++) {
        ck_assert_str_eq(b1.sym[i].text, b2.sym[i].text);
        ck_assert_int_eq(b1.sym[i].left, b2.sym[i].left);
    }
    bpe_free(&b1);
    bpe_free(&b2);
}
END_TEST

/* StrBuf: appends in order past the first allocation (15,000 bytes in
 * 3,000 appends, then one of 10,000), NUL-terminated; after oom nothing
 * more is written; strbuf_free zeroes, and freeing twice or NULL is safe. */
START_TEST(test_strbuf) {
    StrBuf b = {0};
    char *want = malloc(15000 + 1);
    size_t k = 0;
    for (int i = 0; i < 3000; i++) {
        strbuf_printf(&b, "%04d,", i);
        k += (size_t)sprintf(want + k, "%04d,", i);
    }
    ck_assert_uint_eq(b.len, k);
    ck_assert_int_eq(memcmp(b.s, want, k + 1), 0);   /* the NUL too */
    memset(want, 'x', 10000);
    want[10000] = 0;
    strbuf_printf(&b, "<%s>", want);
    ck_assert_uint_eq(b.len, k + 10002);
    ck_assert(b.s[k] == '<' && b.s[k + 10001] == '>' && b.s[k + 10002] == 0 && !b.oom);
    free(want);
    b.oom = 1;   /* as if memory had run out: the text stays as it was */
    strbuf_printf(&b, "more");
    ck_assert_uint_eq(b.len, k + 10002);
    strbuf_free(&b);
    ck_assert(b.s == NULL && b.len == 0 && b.cap == 0 && b.oom == 0);
    strbuf_free(&b);
    strbuf_free(NULL);
}
END_TEST

START_TEST(test_errors) {
    char *a[] = {"der Hund"};
    Bpe b;
    char err[256];
    ck_assert_int_eq(bpe_learn(&b, a, 1, NULL, 0, 0, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "vocabulary size 0"));
    /* d e r H u n d: 7 characters (d inside and d</w>, r</w>, ...) */
    ck_assert_int_eq(bpe_learn(&b, a, 1, NULL, 0, 8, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "too small"));
    char *empty[] = {""};
    ck_assert_int_eq(bpe_learn(&b, empty, 1, NULL, 0, 100, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "no words"));
}
END_TEST

START_TEST(test_save_load) {
    char *a[] = {"Der große Hund sieht die Bäume", "The big dog sees the trees"};
    Bpe b, c;
    char err[256], dir[64], path[128];
    fresh_dir(dir, sizeof dir, "check_bpe");
    snprintf(path, sizeof path, "%s/v.bpe", dir);
    ck_assert_int_eq(bpe_learn(&b, a, 2, NULL, 0, 60, err, sizeof err), 0);
    bpe_set_words(&b, a + 1, 1);
    ck_assert_int_eq(bpe_save(&b, path, err, sizeof err), 0);
    ck_assert_int_ne(access(path, F_OK), -1);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_int_eq(access(tmp, F_OK), -1);   /* the temporary file is gone */
    ck_assert_int_eq(bpe_load(&c, path, err, sizeof err), 0);
    ck_assert_int_eq(c.vocab, b.vocab);
    ck_assert_int_eq(c.tokenised, 0);   /* bpe_learn's default: the text as the corpus had it */
    int i1[64], i2[64];
    int n1 = bpe_encode(&b, a[0], i1, 64), n2 = bpe_encode(&c, a[0], i2, 64);
    ck_assert_int_eq(n1, n2);
    for (int i = 0; i < n1; i++) ck_assert_int_eq(i1[i], i2[i]);
    char unk[64];
    ck_assert_int_eq(bpe_unknown_word(&c, "The big cat", unk, sizeof unk), 1);
    ck_assert_str_eq(unk, "cat");
    ck_assert_int_eq(bpe_unknown_word(&c, "the dog sees", unk, sizeof unk), 0);
    bpe_free(&c);

    /* how the text was written travels with the vocabulary (format 2) ... */
    b.tokenised = 1;
    ck_assert_int_eq(bpe_save(&b, path, err, sizeof err), 0);
    ck_assert_int_eq(bpe_load(&c, path, err, sizeof err), 0);
    ck_assert_int_eq(c.tokenised, 1);
    bpe_free(&c);
    /* ... and a version 1 file (no "text" line) reads as tokenised: what
     * the programs that wrote version 1 did with --translate input */
    {
        size_t n;
        char *v2 = read_file_or_fail(path, &n), *v1 = malloc(n + 32);
        char *text = strstr(v2, "text tokenised\n"), *end = strstr(v2, "end ");
        ck_assert_ptr_nonnull(text);
        size_t k = (size_t)(text - v2);
        memcpy(v1, v2, k);
        size_t body = (size_t)(end - (text + 15));
        memcpy(v1 + k, text + 15, body);
        k += body;
        v1[8] = '1';   /* "AIYNBPE 1" */
        k += (size_t)sprintf(v1 + k, "end %08x\n", crc32_update(0, v1, k));
        write_file(path, v1, k);
        ck_assert_int_eq(bpe_load(&c, path, err, sizeof err), 0);
        ck_assert_int_eq(c.tokenised, 1);
        ck_assert_int_eq(c.vocab, b.vocab);
        bpe_free(&c);
        v1[8] = '3';   /* a version this program does not know */
        write_file(path, v1, k);
        ck_assert_int_eq(bpe_load(&c, path, err, sizeof err), 2);
        ck_assert_ptr_nonnull(strstr(err, "version"));
        ck_assert_int_eq(bpe_save(&b, path, err, sizeof err), 0);
        free(v1), free(v2);
    }

    /* damage: one flipped byte, a truncation, another file */
    size_t n;
    char *buf = read_file_or_fail(path, &n);
    buf[20] ^= 1;
    write_file(path, buf, n);
    ck_assert_int_eq(bpe_load(&c, path, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "checksum"));
    buf[20] ^= 1;
    write_file(path, buf, n / 2);
    ck_assert_int_eq(bpe_load(&c, path, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "truncated"));
    write_text(path, "hello\n");
    ck_assert_int_eq(bpe_load(&c, path, err, sizeof err), 2);
    ck_assert_int_eq(bpe_load(&c, dir, err, sizeof err), 2);          /* a directory: not a regular file */
    ck_assert_int_eq(bpe_load(&c, "/nonexistent/v.bpe", err, sizeof err), 1);
    bpe_free(&b);
    free(buf);
    remove_dir(dir);
}
END_TEST

/* ---- hostile files ---------------------------------------------------------------- */

/* Writes body followed by its "end CRC" line: a file whose checksum is
 * right, so that only the loader's own checks stand between it and memory. */
static void write_with_crc(const char *path, const char *body) {
    StrBuf o = {0};
    strbuf_printf(&o, "%s", body);
    strbuf_printf(&o, "end %08x\n", crc32_update(0, o.s, o.len));
    write_file(path, o.s, o.len);
    strbuf_free(&o);
}

/* In a child (run_captured): bpe_load of the path in arg with the address
 * space held to what is mapped now + 256 MiB (not under AddressSanitizer,
 * whose shadow memory needs terabytes of it), so that a loader that
 * believes the file's counts dies of "out of memory" (exit 1) instead of
 * taking the machine. Prints the message, exits with bpe_load's code. */
static void load_limited(void *arg) {
    const char *path = arg;
#if !defined(__SANITIZE_ADDRESS__)
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) _exit(99);
    fclose(f);
    struct rlimit lim;
    getrlimit(RLIMIT_AS, &lim);
    lim.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)256 << 20);
    if (setrlimit(RLIMIT_AS, &lim)) _exit(98);
#endif
    Bpe b;
    char err[1024];
    int rc = bpe_load(&b, path, err, sizeof err);
    printf("%s\n", rc ? err : "loaded");
    if (!rc) bpe_free(&b);
    fflush(stdout);
    _exit(rc);
}

/* bpe_load of body (+ its CRC line) in a limited child: exit 2 and a
 * message holding `want`. */
static void assert_refused(const char *dir, const char *body, const char *want) {
    char path[160], *out;
    snprintf(path, sizeof path, "%s/hostile.bpe", dir);
    write_with_crc(path, body);
    int rc = run_captured(&out, NULL, load_limited, path);
    ck_assert_msg(rc == 2 && strstr(out, want), "exit %d, want 2 and a message with '%s':\n%s", rc, want, out);
    free(out);
}

/* Issue 34: a 4 kB file of 40 merges, each of the previous merge with
 * itself, doubles the text 40 times (2^40 bytes), checksum valid. The
 * loader bounds every symbol by BPE_MAX_SYMBOL_BYTES (what the learner can
 * make) and refuses the merge that would pass it, naming it. */
START_TEST(test_load_doubling_merges) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_bpe");
    for (int merges = 40; merges >= 12; merges -= 28) {   /* 2^40 bytes; and 2^12, which would fit in memory */
        StrBuf o = {0};
        strbuf_printf(&o, "AIYNBPE 2\nvocab %d chars 1 merges %d words 0\ntext as-is\nc\t0\ta\n",
                      BPE_N_SPECIAL + 1 + merges, merges);
        for (int i = 0; i < merges; i++) strbuf_printf(&o, "m\t%d\t%d\n", BPE_N_SPECIAL + i, BPE_N_SPECIAL + i);
        /* merge k makes 2^k bytes: merge 9 is the first past 256 */
        assert_refused(dir, o.s, "merge 9 of");
        assert_refused(dir, o.s, "512 bytes");
        strbuf_free(&o);
    }
    remove_dir(dir);
}
END_TEST

/* Issue 34: declared counts the file cannot hold ("words 2147483647" made
 * calloc ask for 16 GB) are refused before anything is allocated, naming
 * the count; so are counts whose sum overflows an int. */
START_TEST(test_load_counts_too_big) {
    char dir[64];
    fresh_dir(dir, sizeof dir, "check_bpe");
    assert_refused(dir, "AIYNBPE 2\nvocab 5 chars 1 merges 0 words 2147483647\ntext as-is\nc\t0\ta\n",
                   "words 2147483647");
    assert_refused(dir, "AIYNBPE 2\nvocab 1000005 chars 1 merges 1000000 words 0\ntext as-is\nc\t0\ta\n",
                   "merges 1000000");
    assert_refused(dir, "AIYNBPE 2\nvocab 1000 chars 996 merges 0 words 0\ntext as-is\nc\t0\ta\n",
                   "chars 996");
    assert_refused(dir, "AIYNBPE 2\nvocab 3 chars 2147483647 merges 2147483647 words 0\ntext as-is\nc\t0\ta\n",
                   "counts");
    assert_refused(dir, "AIYNBPE 2\nvocab 5 chars 1 merges 0 words 99999999999999999999\ntext as-is\nc\t0\ta\n",
                   "counts");
    /* each count fits alone, all three together do not */
    assert_refused(dir, "AIYNBPE 2\nvocab 5 chars 1 merges 0 words 1\ntext as-is\nc\t0\ta\n",
                   "chars 1, merges 0 and words 1");
    /* a "character" line of more than one character: the learner writes one each */
    assert_refused(dir, "AIYNBPE 2\nvocab 5 chars 1 merges 0 words 0\ntext as-is\nc\t0\tabcdefgh\n",
                   "character 1 of 1");
    remove_dir(dir);
}
END_TEST

/* The learner never makes a symbol the loader would refuse: a long word
 * seen twice merges up to BPE_MAX_SYMBOL_BYTES and no further, and its
 * vocabulary saves and loads back symbol for symbol. */
START_TEST(test_learn_long_word) {
    char word[1301], dir[64], path[128], err[256];
    memset(word, 'a', 1200);
    memcpy(word + 1200, "bcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!?#$%&*+-=<>()[]{}", 80);
    word[1280] = 0;
    char *a[] = {word, word};
    Bpe b, c;
    ck_assert_int_eq(bpe_learn(&b, a, 2, NULL, 0, 2000, err, sizeof err), 0);
    size_t longest = 0;
    for (int i = 0; i < b.vocab; i++)
        if (strlen(b.sym[i].text) > longest) longest = strlen(b.sym[i].text);
    ck_assert_uint_eq(longest, BPE_MAX_SYMBOL_BYTES);
    fresh_dir(dir, sizeof dir, "check_bpe");
    snprintf(path, sizeof path, "%s/long.bpe", dir);
    ck_assert_int_eq(bpe_save(&b, path, err, sizeof err), 0);
    ck_assert_msg(bpe_load(&c, path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(c.vocab, b.vocab);
    for (int i = 0; i < b.vocab; i++) ck_assert_str_eq(c.sym[i].text, b.sym[i].text);
    int ids[1300], n = bpe_encode(&c, word, ids, 1300);
    char out[1400];
    bpe_decode(&c, ids, n, out, sizeof out);
    ck_assert_str_eq(out, word);
    bpe_free(&b);
    bpe_free(&c);
    remove_dir(dir);
}
END_TEST

/* Issue 34: a .bpe converted to CRLF line endings (git's autocrlf, an
 * editor on Windows) is named as that, not "unsupported version"; and
 * every damaged-file message says what to do about it, not "train first"
 * (that hint is the caller's, for a file that is missing). */
START_TEST(test_load_crlf_and_hints) {
    char *a[] = {"Der große Hund sieht die Bäume", "The big dog sees the trees"};
    Bpe b, c;
    char err[512], dir[64], path[128];
    fresh_dir(dir, sizeof dir, "check_bpe");
    snprintf(path, sizeof path, "%s/v.bpe", dir);
    ck_assert_int_eq(bpe_learn(&b, a, 2, NULL, 0, 60, err, sizeof err), 0);
    ck_assert_int_eq(bpe_save(&b, path, err, sizeof err), 0);
    size_t n;
    char *lf = read_file_or_fail(path, &n), *crlf = malloc(2 * n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (lf[i] == '\n') crlf[k++] = '\r';
        crlf[k++] = lf[i];
    }
    write_file(path, crlf, k);
    ck_assert_int_eq(bpe_load(&c, path, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "CRLF") && strstr(err, "dos2unix") && !strstr(err, "version"), "%s", err);

    /* damaged: each message names the trouble and ends in a hint to train again */
    struct { const char *name; size_t len; int flip; const char *want; } cases[] = {
        {"checksum", n, 30, "checksum"}, {"truncated", n / 2, -1, "truncated"},
        {"version", n, 8, "version"}, {"not BPE", n, 0, "not a BPE"}};
    for (int i = 0; i < 4; i++) {
        memcpy(crlf, lf, n);
        if (cases[i].flip >= 0) crlf[cases[i].flip] = cases[i].flip == 8 ? '7' : crlf[cases[i].flip] ^ 1;
        write_file(path, crlf, cases[i].len);
        ck_assert_int_eq(bpe_load(&c, path, err, sizeof err), 2);
        ck_assert_msg(strstr(err, cases[i].want) && strstr(err, "train again") && !strstr(err, "train first"),
                      "%s: %s", cases[i].name, err);
    }
    free(lf), free(crlf);
    bpe_free(&b);
    remove_dir(dir);
}
END_TEST

Suite *bpe_suite(void) {
    Suite *s = suite_create("bpe");
    suite_case(s, "Core", test_toy_merges, test_round_trip, test_unseen_words, test_deterministic,
               test_strbuf);
    suite_case(s, "Limits", test_errors, test_save_load, test_load_doubling_merges, test_load_counts_too_big,
               test_learn_long_word, test_load_crlf_and_hints);
    return s;
}
