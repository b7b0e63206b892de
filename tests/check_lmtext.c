/* check_lmtext.c - chapter 14's text: what each source keeps, every bad
 * input refused with its message, character tokens, the fixed split, the
 * batches, and the two format measures.
 *
 * "Read": small files written here in each source's format (the real
 * dictionary's and poems' text stays in their Debian packages).
 * "Bad input": each refusal, with status 2 and its message.
 * "Tokens", "Batches": hand-checked ids, windows and splits.
 * "Format": the headword and verse-line rules on hand-made text, where
 * each must and must not fire.
 * "Installed": the real texts, when dict-devil and fortunes-zh are
 * installed (SKIP printed otherwise): sizes, vocabulary, split, the
 * format shares on the real text and on random text of its distribution.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "text/lmformat.h"
#include "text/lmtext.h"
#include "testutil.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

static const char *tmp_file(const char *name, const char *content, size_t n) {
    const char *p = tmp_path(name);
    write_file(p, content, n);
    return p;
}

/* content gzip-compressed into tmpdir/name */
static const char *tmp_gz(const char *name, const char *content, size_t n) {
    const char *p = tmp_path(name);
    gzFile z = gzopen(p, "wb");
    ck_assert_ptr_nonnull(z);
    ck_assert_int_eq(gzwrite(z, content, (unsigned)n), (int)n);
    ck_assert_int_eq(gzclose(z), Z_OK);
    return p;
}

static void setup(void) { fresh_dir(tmpdir, sizeof tmpdir, "check_lmtext"); }
static void teardown(void) { remove_dir(tmpdir); }

/* loading path as source must fail with rc and a message containing want */
static void expect_error(LmSource source, const char *path, int rc, const char *want) {
    LmText t;
    char err[1024] = "";
    ck_assert_int_eq(lmtext_load_as(&t, source, path, err, sizeof err), rc);
    ck_assert_msg(strstr(err, want) != NULL, "message \"%s\" does not say \"%s\"", err, want);
    ck_assert_ptr_null(t.text);
    ck_assert_ptr_null(t.tokens);
    lmtext_free(&t);
}

/* ---- Read ------------------------------------------------------------------------ */

START_TEST(test_plain_file) {
    LmText t;
    char err[512];
    const char text[] = "héllo, wörld\nhello\n";   /* 19 characters, 21 bytes */
    ck_assert_int_eq(lmtext_load(&t, tmp_file("a.txt", text, sizeof text - 1), err, sizeof err), 0);
    ck_assert_int_eq(t.source, LMTEXT_FILE);
    ck_assert_str_eq(t.text, text);
    ck_assert_uint_eq(t.n_bytes, sizeof text - 1);
    ck_assert_uint_eq(t.n, 19);
    /* distinct code points ascending: \n ␣ , d e h l o r w é ö */
    const uint32_t want[] = {'\n', ' ', ',', 'd', 'e', 'h', 'l', 'o', 'r', 'w', 0xE9, 0xF6};
    ck_assert_int_eq(t.V, 12);
    for (int i = 0; i < t.V; i++) ck_assert_uint_eq(t.vocab[i], want[i]);
    ck_assert_int_eq(t.tokens[0], 5);    /* h */
    ck_assert_int_eq(t.tokens[1], 10);   /* é */
    ck_assert_int_eq(t.tokens[12], 0);   /* \n */
    /* the last ceil(19/10) = 2 characters validate */
    ck_assert_uint_eq(t.n_train, 17);
    ck_assert_int_eq(lmtext_id(&t, 0xF6), 11);
    ck_assert_int_eq(lmtext_id(&t, 'z'), -1);
    lmtext_free(&t);
    lmtext_free(&t);   /* a freed LmText frees again as a no-op */
}
END_TEST

/* the split: the last ceil(n/10) characters, whatever the bytes */
START_TEST(test_split_sizes) {
    const struct { const char *s; size_t n, train; } cases[] = {
        {"ab", 2, 1}, {"abcdefghij", 10, 9}, {"abcdefghijk", 11, 9}, {"日本語の文章です。日本語", 12, 10},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        LmText t;
        char err[256];
        ck_assert_int_eq(lmtext_from_bytes(&t, cases[c].s, strlen(cases[c].s), err, sizeof err), 0);
        ck_assert_uint_eq(t.n, cases[c].n);
        ck_assert_uint_eq(t.n_train, cases[c].train);
        lmtext_free(&t);
    }
}
END_TEST

/* dictd's header entries before the first headword and its alphabet line
 * after the last entry are dropped; the entries kept byte for byte,
 * whether the file is gzip (as dictzip writes it) or plain */
static const char devil_file[] =
    "00-database-dictfmt-1.13.0\nhttp://example.org/devils.txt\n00-database-short\n     The Book\n"
    "The original data is available.\n\n    PREFACE\n\nABOUT a preface, n. would not open an entry here.\n"
    "                                                                  A.B.\n\n"
    "ABASEMENT, n.  A decent and customary mental attitude.\n\n"
    "ABRACADABRA.\n\n    By _Abracadabra_ we signify\n\n"
    "ACCUSE, v.t.  To affirm another's guilt.\n\n abcdefghijklmnopqrstuvwxyz\n";
static const char devil_kept[] =
    "ABASEMENT, n.  A decent and customary mental attitude.\n\n"
    "ABRACADABRA.\n\n    By _Abracadabra_ we signify\n\n"
    "ACCUSE, v.t.  To affirm another's guilt.\n\n";

START_TEST(test_devil_entries_kept) {
    LmText t;
    char err[512];
    char files[2][512];   /* tmp_path's buffer is reused: each name copied */
    snprintf(files[0], sizeof files[0], "%s", tmp_gz("devil.dict.dz", devil_file, sizeof devil_file - 1));
    snprintf(files[1], sizeof files[1], "%s", tmp_file("devil.plain", devil_file, sizeof devil_file - 1));
    ck_assert_str_ne(files[0], files[1]);
    for (int f = 0; f < 2; f++) {
        ck_assert_msg(lmtext_load_as(&t, LMTEXT_DEVIL, files[f], err, sizeof err) == 0, "%s", err);
        ck_assert_str_eq(t.text, devil_kept);
        ck_assert_uint_eq(t.n_read, sizeof devil_file - 1);
        LmShare e = lmformat_entries(t.text, t.n_bytes);
        ck_assert_int_eq(e.hits, 2);
        ck_assert_int_eq(e.total, 3);
        lmtext_free(&t);
    }
    /* without the alphabet line, the text ends where the file does */
    const char no_alpha[] = "ABASEMENT, n.  A decent attitude.\n";
    ck_assert_int_eq(lmtext_load_as(&t, LMTEXT_DEVIL, tmp_file("d2", no_alpha, sizeof no_alpha - 1), err,
                                    sizeof err), 0);
    ck_assert_str_eq(t.text, no_alpha);
    lmtext_free(&t);
    /* no entry at all */
    const char none[] = "00-database-short\n     A book of no entries\n\nAbasement, n. lower case\n";
    expect_error(LMTEXT_DEVIL, tmp_file("d3", none, sizeof none - 1), 2, "holds no dictionary entry");
}
END_TEST

/* the poems: colour codes gone, a blank line between poems, the last "%" dropped */
START_TEST(test_tang_poems_kept) {
    const char file[] =
        "\x1b[32m《春晓》\x1b[m\n\x1b[33m作者：孟浩然\x1b[m\n春眠不觉晓，处处闻啼鸟。\n%\n"
        "\x1b[32m《登鹳雀楼》\x1b[m\n\x1b[33m作者：王之涣\x1b[m\n白日依山尽，黄河入海流。\n%\n";
    const char kept[] = "《春晓》\n作者：孟浩然\n春眠不觉晓，处处闻啼鸟。\n\n"
                        "《登鹳雀楼》\n作者：王之涣\n白日依山尽，黄河入海流。\n";
    LmText t;
    char err[512];
    ck_assert_msg(lmtext_load_as(&t, LMTEXT_TANG300, tmp_file("tang", file, sizeof file - 1), err, sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(t.text, kept);
    LmShare v = lmformat_verse_lines(t.text, t.n_bytes);
    ck_assert_int_eq(v.hits, 4);
    ck_assert_int_eq(v.total, 4);
    /* a "%" inside a line, and a final poem without its "%", stay as they are */
    const char file2[] = "百分之%百\n%\n末句无分隔\n";
    lmtext_free(&t);
    ck_assert_int_eq(lmtext_load_as(&t, LMTEXT_TANG300, tmp_file("tang2", file2, sizeof file2 - 1), err,
                                    sizeof err), 0);
    ck_assert_str_eq(t.text, "百分之%百\n\n末句无分隔\n");
    lmtext_free(&t);
}
END_TEST

/* ---- Bad input ------------------------------------------------------------------------- */

START_TEST(test_bad_files) {
    /* missing: a package's file says how to install it */
    expect_error(LMTEXT_DEVIL, "/nonexistent/devil.dict.dz", 2, "sudo apt-get install dict-devil");
    expect_error(LMTEXT_TANG300, "/nonexistent/tang300", 2, "sudo apt-get install fortunes-zh");
    expect_error(LMTEXT_FILE, "/nonexistent/book.txt", 2, "cannot open '/nonexistent/book.txt'");
    /* a folder and a FIFO, refused before a byte is read (a FIFO with no
     * writer would otherwise hang) */
    expect_error(LMTEXT_FILE, tmpdir, 2, "is not a regular file (it is a folder)");
    const char *fifo = tmp_path("fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    expect_error(LMTEXT_FILE, fifo, 2, "(it is a FIFO)");
    expect_error(LMTEXT_DEVIL, fifo, 2, "(it is a FIFO)");
    /* empty */
    expect_error(LMTEXT_FILE, tmp_file("empty", "", 0), 2, "is empty");
    expect_error(LMTEXT_DEVIL, tmp_gz("empty.gz", "", 0), 2, "is empty");
    /* binary: a NUL, invalid UTF-8, each named by its byte */
    expect_error(LMTEXT_FILE, tmp_file("nul", "abc\0def", 7), 2, "NUL byte at byte 3");
    expect_error(LMTEXT_FILE, tmp_file("latin1", "caf\xe9 au lait", 12), 2, "byte 3 (0xE9)");
    expect_error(LMTEXT_FILE, tmp_file("cut", "ab\xe6\x97", 4), 2, "byte 2 (0xE6)");
    expect_error(LMTEXT_FILE, tmp_file("surrogate", "a\xed\xa0\x80", 4), 2, "byte 1 (0xED)");
    expect_error(LMTEXT_DEVIL, tmp_gz("nul.gz", "ABASEMENT, n.  A\0", 17), 2, "NUL byte at byte 16");
    /* one distinct character: nothing to predict */
    expect_error(LMTEXT_FILE, tmp_file("one", "aaaaaaa", 7), 2, "one distinct character ('a', 7 times)");
    expect_error(LMTEXT_FILE, tmp_file("nl", "\n\n\n", 3), 2, "('⏎', 3 times)");
    /* a damaged gzip stream */
    const char *gz = tmp_gz("bad.gz", devil_file, sizeof devil_file - 1);
    size_t n;
    char *bytes = read_file_or_fail(gz, &n);
    bytes[n / 2] ^= 0x55, bytes[n / 2 + 1] ^= 0x55;
    expect_error(LMTEXT_DEVIL, tmp_file("bad.gz", bytes, n), 2, "is damaged");
    free(bytes);
}
END_TEST

/* a 2 GB file is refused from its size: nothing is read (a sparse file,
 * so the test writes no bytes either) */
START_TEST(test_too_big) {
    const char *big = tmp_path("big.txt");
    ck_assert_int_eq(sh("truncate -s 2G '%s'", big), 0);
    expect_error(LMTEXT_FILE, big, 2, "is 2048.0 MiB; texts up to 256 MiB are read");
    expect_error(LMTEXT_DEVIL, big, 2, "is 2048.0 MiB");
    /* a small gzip file of more than 256 MiB of text: refused as it is
     * decompressed, at 256 MiB + 1 byte */
    const char *bomb = tmp_path("bomb.gz");
    gzFile z = gzopen(bomb, "wb9");
    ck_assert_ptr_nonnull(z);
    static char spaces[1 << 20];
    memset(spaces, ' ', sizeof spaces);
    for (int i = 0; i < 257; i++) ck_assert_int_eq(gzwrite(z, spaces, sizeof spaces), (int)sizeof spaces);
    ck_assert_int_eq(gzclose(z), Z_OK);
    expect_error(LMTEXT_DEVIL, bomb, 2, "more than 256 MiB of text once decompressed");
}
END_TEST

START_TEST(test_bytes_refused) {
    LmText t;
    char err[256];
    ck_assert_int_eq(lmtext_from_bytes(&t, "", 0, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "empty"));
    ck_assert_int_eq(lmtext_from_bytes(&t, "ab\0c", 4, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "NUL byte at byte 2"));
    ck_assert_int_eq(lmtext_from_bytes(&t, "xx", 2, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "nothing to predict"));
    lmtext_free(&t);
}
END_TEST

/* ---- Tokens ----------------------------------------------------------------------------------- */

START_TEST(test_encode_decode) {
    LmText t;
    char err[512];
    const char text[] = "The cat\tsat.\n猫は座った。\n";
    ck_assert_int_eq(lmtext_from_bytes(&t, text, sizeof text - 1, err, sizeof err), 0);
    /* the whole text round-trips */
    char out[128];
    ck_assert_uint_eq(lmtext_decode(&t, t.tokens, t.n, out, sizeof out), sizeof text - 1);
    ck_assert_str_eq(out, text);
    /* a prompt */
    int ids[16];
    size_t n;
    ck_assert_int_eq(lmtext_encode(&t, "猫 sat", ids, 16, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_uint_eq(t.vocab[ids[0]], 0x732B);
    ck_assert_uint_eq(lmtext_decode(&t, ids, n, out, sizeof out), 7);
    ck_assert_str_eq(out, "猫 sat");
    /* more than cap: the count is still the whole prompt's */
    ck_assert_int_eq(lmtext_encode(&t, "sat sat", ids, 3, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 7);
    /* a character the text never had, and bytes that are not UTF-8 */
    ck_assert_int_eq(lmtext_encode(&t, "The dog", ids, 16, &n, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "'d' (U+0064) at byte 4 never occurs in the text") != NULL, "%s", err);
    ck_assert_int_eq(lmtext_encode(&t, "犬", ids, 16, &n, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "'犬' (U+72AC) at byte 0") != NULL, "%s", err);
    ck_assert_int_eq(lmtext_encode(&t, "ca\xff", ids, 16, &n, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "byte 2 (0xFF)") != NULL, "%s", err);
    /* decoding into a small buffer cuts at a character, never inside one */
    int two[] = {lmtext_id(&t, 0x732B), lmtext_id(&t, 0x306F)};   /* 猫は: 6 bytes */
    char small[5];
    ck_assert_uint_eq(lmtext_decode(&t, two, 2, small, sizeof small), 6);
    ck_assert_str_eq(small, "猫");
    ck_assert_uint_eq(lmtext_decode(&t, two, 2, NULL, 0), 6);
    lmtext_free(&t);
}
END_TEST

START_TEST(test_labels) {
    LmText t;
    char err[256], lb[32];
    const char text[] = "a b\tc\n\x1b\x7f" "é猫";
    ck_assert_int_eq(lmtext_from_bytes(&t, text, sizeof text - 1, err, sizeof err), 0);
    const struct { uint32_t cp; const char *label; } want[] = {
        {'\n', "⏎"}, {' ', "␣"}, {'\t', "⇥"}, {0x1B, "\\x1b"}, {0x7F, "\\x7f"}, {'a', "a"}, {0xE9, "é"},
        {0x732B, "猫"},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_str_eq(lmtext_label(&t, lmtext_id(&t, want[i].cp), lb, sizeof lb), want[i].label);
    lmtext_free(&t);
}
END_TEST

START_TEST(test_utf8) {
    uint32_t cp;
    const struct { const char *s; int len; uint32_t cp; } ok[] = {
        {"A", 1, 'A'}, {"é", 2, 0xE9}, {"猫", 3, 0x732B}, {"\xf0\x9f\x98\x80", 4, 0x1F600}, {"\xf4\x8f\xbf\xbf", 4, 0x10FFFF},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        ck_assert_int_eq(lmtext_utf8_next((const unsigned char *)ok[i].s, strlen(ok[i].s), &cp), ok[i].len);
        ck_assert_uint_eq(cp, ok[i].cp);
        char buf[4];
        ck_assert_int_eq(lmtext_utf8_put(cp, buf), ok[i].len);
        ck_assert(!memcmp(buf, ok[i].s, (size_t)ok[i].len));
    }
    const char *bad[] = {"\x80", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe6\x97", "\xff"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_int_eq(lmtext_utf8_next((const unsigned char *)bad[i], strlen(bad[i]), &cp), 0);
}
END_TEST

/* ---- Batches ------------------------------------------------------------------------------------ */

/* 40 characters "abcd...": train is the first 36 */
static void alphabet_text(LmText *t) {
    char s[41], err[256];
    for (int i = 0; i < 40; i++) s[i] = (char)('0' + i);   /* '0'..'W': 40 distinct, id = position */
    ck_assert_int_eq(lmtext_from_bytes(t, s, 40, err, sizeof err), 0);
    ck_assert_uint_eq(t->n_train, 36);
    for (int i = 0; i < 40; i++) ck_assert_int_eq(t->tokens[i], i);
}

START_TEST(test_batch_windows) {
    LmText t;
    alphabet_text(&t);
    enum { B = 64, T = 5 };
    int x[B * T], y[B * T], x2[B * T], y2[B * T], seen[36] = {0};
    char err[256];
    Rng r, r2;
    rng_seed(&r, 7), rng_seed(&r2, 7);
    for (int round = 0; round < 20; round++) {
        ck_assert_int_eq(lmtext_batch(&t, &r, B, T, x, y, err, sizeof err), 0);
        ck_assert_int_eq(lmtext_batch(&t, &r2, B, T, x2, y2, err, sizeof err), 0);
        ck_assert(!memcmp(x, x2, sizeof x) && !memcmp(y, y2, sizeof y));   /* same seed, same batch */
        for (int b = 0; b < B; b++) {
            int s = x[b * T];
            ck_assert_int_ge(s, 0);
            ck_assert_int_le(s + T, 35);   /* the target window ends inside train */
            seen[s] = 1;
            for (int i = 0; i < T; i++) {
                ck_assert_int_eq(x[b * T + i], s + i);
                ck_assert_int_eq(y[b * T + i], s + i + 1);
            }
        }
    }
    /* every start from 0 to n_train - T - 1 = 30 is drawn, none past it */
    for (int s = 0; s < 36; s++) ck_assert_int_eq(seen[s], s <= 30);
    /* another seed, another batch */
    rng_seed(&r2, 8);
    lmtext_batch(&t, &r2, B, T, x2, y2, err, sizeof err);
    ck_assert(memcmp(x, x2, sizeof x) != 0);
    /* T + 1 = train length is the longest window; one more is refused */
    ck_assert_int_eq(lmtext_batch(&t, &r, 2, 35, x, y, err, sizeof err), 0);
    ck_assert_int_eq(x[0], 0);
    ck_assert_int_eq(lmtext_batch(&t, &r, 2, 36, x, y, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "T+1 = 37 characters is longer than the train split (36 characters)"), "%s", err);
    ck_assert_int_eq(lmtext_batch(&t, &r, 0, 4, x, y, err, sizeof err), 2);
    ck_assert_int_eq(lmtext_batch(&t, &r, 1, 0, x, y, err, sizeof err), 2);
    lmtext_free(&t);
}
END_TEST

START_TEST(test_eval_windows) {
    LmText t;
    char err[256];
    char s[101];
    for (int i = 0; i < 100; i++) s[i] = (char)('!' + i % 90);
    ck_assert_int_eq(lmtext_from_bytes(&t, s, 100, err, sizeof err), 0);
    ck_assert_uint_eq(t.n_train, 90);   /* validation: tokens 90..99 */
    ck_assert_uint_eq(lmtext_eval_windows(&t, 3), 3);    /* (10 - 1) / 3 */
    ck_assert_uint_eq(lmtext_eval_windows(&t, 4), 2);    /* 9 / 4: one target left out */
    ck_assert_uint_eq(lmtext_eval_windows(&t, 9), 1);
    ck_assert_uint_eq(lmtext_eval_windows(&t, 10), 0);   /* T + 1 = 11 > 10 */
    ck_assert_uint_eq(lmtext_eval_windows(&t, 0), 0);
    int x[4 * 3], y[4 * 3];
    ck_assert_int_eq(lmtext_eval_batch(&t, 3, 0, 4, x, y), 3);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++) {
            ck_assert_int_eq(x[k * 3 + i], t.tokens[90 + k * 3 + i]);
            ck_assert_int_eq(y[k * 3 + i], t.tokens[90 + k * 3 + i + 1]);
        }
    ck_assert_int_eq(lmtext_eval_batch(&t, 3, 2, 4, x, y), 1);   /* from window 2: one left */
    ck_assert_int_eq(x[0], t.tokens[96]);
    ck_assert_int_eq(lmtext_eval_batch(&t, 3, 3, 4, x, y), 0);
    lmtext_free(&t);
}
END_TEST

/* random text of the training distribution: each character's share within
 * a binomial bound of its frequency in the train split (never validation's) */
START_TEST(test_random_ids) {
    LmText t;
    char err[256];
    /* train (first 18): 12 'a', 6 'b'; validation: "cc" */
    const char s[] = "aabaabaabaabaabaabcc";
    ck_assert_int_eq(lmtext_from_bytes(&t, s, 20, err, sizeof err), 0);
    ck_assert_uint_eq(t.n_train, 18);
    enum { N = 100000 };
    int *ids = malloc(N * sizeof *ids);
    Rng r;
    rng_seed(&r, 3);
    lmtext_random_ids(&t, &r, ids, N);
    long count[3] = {0};
    for (int i = 0; i < N; i++) count[ids[i]]++;
    double p = 2.0 / 3, bound = 5 * sqrt(p * (1 - p) / N);
    ck_assert_msg(fabs(count[0] / (double)N - p) < bound, "'a' share %g, want %g", count[0] / (double)N, p);
    ck_assert_int_eq(count[2], 0);
    free(ids);
    lmtext_free(&t);
}
END_TEST

/* ---- Format --------------------------------------------------------------------------------------------- */

START_TEST(test_entry_head_rule) {
    const char *yes[] = {"ABASEMENT, n.  A decent", "ACCUSE, v.t.  To affirm", "KING'S EVIL, n.  A malady",
                         "BOTTLE-NOSED, adj.  Having", "HERS, pron.\nHis.", "ABSURDITY, n. x", "HASH, x.  There",
                         "LOOKING-GLASS, n.\n", "ABATIS, n.pl.  x"};
    const char *no[] = {"ABRACADABRA.\n", "BABE or BABY, n.  A", "IMPOSTOR n.  A rival", "Abasement, n.  A",
                        "ABASEMENT, noun  A", "ABASEMENT,n.  A", "ABASEMENT,  n.  A", "ABASEMENT, n.A",
                        "ABASEMENT, N.  A", "R.I.P.  A careless", "I is the first letter", "T, the twentieth",
                        "  ABASEMENT, n.  A", "ABASEMENT , n.  A", "ABASEMENT, nn.  A", "ABASEMENT, n  A",
                        "APRIL  FOOL, n.  A", "-ABASEMENT, n. A"};
    const char *cut[] = {"", "ABASEM", "ABASEMENT", "ABASEMENT,", "ABASEMENT, ", "ABASEMENT, n", "ABASEMENT, n.",
                         "APRIL ", "ACCUSE, v.t."};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        ck_assert_msg(lmtext_entry_head(yes[i], strlen(yes[i])) == 1, "'%s' should open an entry", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        ck_assert_msg(lmtext_entry_head(no[i], strlen(no[i])) == 0, "'%s' should not open an entry", no[i]);
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++)
        ck_assert_msg(lmtext_entry_head(cut[i], strlen(cut[i])) == -1, "'%s' is undecided", cut[i]);
}
END_TEST

START_TEST(test_entries_share) {
    /* paragraphs: ABASEMENT (yes), the indented verse (not an entry), ABATIS
     * (yes; its second line is no paragraph), "ABRACADABRA." (no, after a
     * blank line of spaces), "not an entry" (no), the cut "ABDI" (undecided) */
    const char text[] = "ABASEMENT, n.  x\n\n    verse\n    more\n\nABATIS, n.  y\nACCUSE, v.t.  z\n   \n"
                        "ABRACADABRA.\n\nnot an entry\n\nABDI";
    LmShare e = lmformat_entries(text, sizeof text - 1);
    ck_assert_int_eq(e.hits, 2);
    ck_assert_int_eq(e.total, 4);
    /* the text's start opens a paragraph; a line right after a text line does not */
    const char two[] = "ACCUSE, v.t.  x\nABATIS, n.  y\n";
    e = lmformat_entries(two, sizeof two - 1);
    ck_assert_int_eq(e.hits, 1);
    ck_assert_int_eq(e.total, 1);
    e = lmformat_entries("", 0);
    ck_assert_int_eq(e.total, 0);
    /* random letters: no entries open so */
    const char noise[] = "\n\nAbq, n. x\n\nQQ,n.\n\nzz\n\n";
    e = lmformat_entries(noise, sizeof noise - 1);
    ck_assert_int_eq(e.hits, 0);
    ck_assert_int_eq(e.total, 3);
}
END_TEST

START_TEST(test_verse_lines_share) {
    /* title and author lines are not verse; 5 and 7 count, 6 does not; a run
     * cut by the text's end is not judged */
    const char poem[] = "《春晓》\n作者：孟浩然\n春眠不觉晓，处处闻啼鸟。\n一二三四五六，一二三四五六七。\n一二三";
    LmShare v = lmformat_verse_lines(poem, sizeof poem - 1);
    ck_assert_int_eq(v.hits, 3);
    ck_assert_int_eq(v.total, 4);
    /* any non-Han character ends a run: ASCII, a space, a newline, "・" */
    const char mixed[] = "一二三四五 一二三四五六七x一二三四五・一二三四五\n";
    v = lmformat_verse_lines(mixed, sizeof mixed - 1);
    ck_assert_int_eq(v.hits, 4);
    ck_assert_int_eq(v.total, 4);
    /* no Han at all */
    v = lmformat_verse_lines("ABASEMENT, n.\n", 14);
    ck_assert_int_eq(v.total, 0);
    ck_assert(lmformat_is_han(0x4E00) && lmformat_is_han(0x9FFF) && lmformat_is_han(0x3400) &&
              lmformat_is_han(0x20000));
    ck_assert(!lmformat_is_han(0xFF0C) && !lmformat_is_han(0x3002) && !lmformat_is_han('a') &&
              !lmformat_is_han(0x300A));
}
END_TEST

/* ---- BPE --------------------------------------------------------------------------------------------- */

static const char bpe_entry[] =
    "ABASEMENT, n.  A decent and customary mental attitude in the presence\nof wealth of power.\n\n"
    "    Poor Isabella's Dead, whose abdication\n                  G.J.\n\n"
    "ABATIS, n.  Rubbish in front of a fort, to prevent the rubbish outside\nfrom molesting the rubbish inside.\n\n";

/* the byte where t's validation split starts */
static size_t cut_byte(const LmText *t) {
    size_t b = 0;
    for (size_t c = 0; c < t->n_train_chars; c++) {
        uint32_t cp;
        b += (size_t)lmtext_utf8_next((const unsigned char *)t->text + b, t->n_bytes - b, &cp);
    }
    return b;
}

/* decode(tokens[from..to)) must be text[a..b) byte for byte */
static void expect_decodes_to(const LmText *t, size_t from, size_t to, const char *want, size_t len) {
    size_t need = lmtext_decode(t, t->tokens + from, to - from, NULL, 0);
    char *out = malloc(need + 1);
    lmtext_decode(t, t->tokens + from, to - from, out, need + 1);
    ck_assert_uint_eq(need, len);
    ck_assert_msg(!memcmp(out, want, len), "decoded text differs from the text");
    free(out);
}

START_TEST(test_bpe_round_trip) {
    char text[8 * sizeof bpe_entry], err[512];
    text[0] = '\0';
    for (int i = 0; i < 6; i++) strcat(text, bpe_entry);
    size_t len = strlen(text);
    LmText t;
    ck_assert_int_eq(lmtext_from_bytes(&t, text, len, err, sizeof err), 0);
    size_t chars = t.n, train_chars = t.n_train;
    ck_assert_msg(lmtext_use_bpe(&t, 120, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_nonnull(t.bpe);
    ck_assert_int_eq(t.V, t.bpe->vocab + 2);
    ck_assert_int_le(t.bpe->vocab, 120);
    ck_assert_uint_eq(t.n_chars, chars);
    ck_assert_uint_eq(t.n_train_chars, train_chars);   /* the split stays at the same character */
    ck_assert_uint_lt(t.n, chars * 2 / 3);              /* merges: fewer tokens than characters */
    /* both splits, and the whole, decode to the text byte for byte */
    size_t cut = cut_byte(&t);
    expect_decodes_to(&t, 0, t.n_train, text, cut);
    expect_decodes_to(&t, t.n_train, t.n, text + cut, len - cut);
    expect_decodes_to(&t, 0, t.n, text, len);
    /* every ' ' and '\n' is one token of its own */
    long spaces = 0, newlines = 0, sp_tok = 0, nl_tok = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ', newlines += text[i] == '\n';
    for (size_t i = 0; i < t.n; i++) {
        ck_assert_int_ge(t.tokens[i], BPE_N_SPECIAL);   /* no <unk>: every character was seen */
        ck_assert_int_lt(t.tokens[i], t.V);
        sp_tok += t.tokens[i] == lmtext_bpe_space(&t), nl_tok += t.tokens[i] == lmtext_bpe_newline(&t);
    }
    ck_assert_int_eq(sp_tok, spaces);
    ck_assert_int_eq(nl_tok, newlines);
    /* labels: ␣, ⏎, a piece that continues with '·', one that ends a word without */
    char lb[64];
    ck_assert_str_eq(lmtext_label(&t, lmtext_bpe_space(&t), lb, sizeof lb), "␣");
    ck_assert_str_eq(lmtext_label(&t, lmtext_bpe_newline(&t), lb, sizeof lb), "⏎");
    ck_assert_str_eq(lmtext_label(&t, BPE_UNK, lb, sizeof lb), "<unk>");
    int ids[64];
    size_t n;
    ck_assert_int_eq(lmtext_encode(&t, "rubbish", ids, 64, &n, err, sizeof err), 0);
    ck_assert_int_eq(t.bpe->sym[ids[n - 1]].eow, 1);
    lmtext_label(&t, ids[n - 1], lb, sizeof lb);
    ck_assert_msg(!strstr(lb, "·"), "'%s' ends a word", lb);
    if (n > 1) ck_assert_msg(strstr(lmtext_label(&t, ids[0], lb, sizeof lb), "·"), "'%s' continues", lb);
    /* a prompt: encoded, decoded back; a character never seen refused */
    ck_assert_int_eq(lmtext_encode(&t, "ABATIS, n.  A fort\n", ids, 64, &n, err, sizeof err), 0);
    char out[64];
    lmtext_decode(&t, ids, n, out, sizeof out);
    ck_assert_str_eq(out, "ABATIS, n.  A fort\n");
    ck_assert_int_eq(lmtext_encode(&t, "A fort, ZONE", ids, 64, &n, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "the word 'ZONE' at byte 8") != NULL, "%s", err);
    /* batches read the pieces */
    Rng r;
    rng_seed(&r, 1);
    int x[4 * 8], y[4 * 8];
    ck_assert_int_eq(lmtext_batch(&t, &r, 4, 8, x, y, err, sizeof err), 0);
    for (int i = 0; i < 4 * 8 - 1; i++)
        if (i % 8 != 7) ck_assert_int_eq(y[i], x[i + 1]);
    /* once is enough; a vocabulary too small for the characters is refused */
    ck_assert_int_eq(lmtext_use_bpe(&t, 200, err, sizeof err), 2);
    lmtext_free(&t);
    ck_assert_int_eq(lmtext_from_bytes(&t, text, len, err, sizeof err), 0);
    ck_assert_int_eq(lmtext_use_bpe(&t, 10, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "too small") != NULL, "%s", err);
    ck_assert_ptr_null(t.bpe);
    lmtext_free(&t);
}
END_TEST

/* a language without spaces: words cut every LMTEXT_BPE_MAX_WORD characters,
 * and still decoded byte for byte */
START_TEST(test_bpe_long_words) {
    const char line[] = "春眠不觉晓处处闻啼鸟夜来风雨声花落知多少春眠不觉晓处处闻啼鸟夜来风雨声花落知多少春眠不觉晓处处闻啼鸟\n";
    char text[20 * sizeof line], err[512];
    text[0] = '\0';
    for (int i = 0; i < 16; i++) strcat(text, line);
    size_t len = strlen(text);
    LmText t;
    ck_assert_int_eq(lmtext_from_bytes(&t, text, len, err, sizeof err), 0);
    ck_assert_msg(lmtext_use_bpe(&t, 300, err, sizeof err) == 0, "%s", err);
    expect_decodes_to(&t, 0, t.n, text, len);
    for (int id = BPE_N_SPECIAL; id < t.bpe->vocab; id++) {
        const char *p = t.bpe->sym[id].text;
        int chars = 0;
        for (; *p; p++) chars += ((unsigned char)*p & 0xC0) != 0x80;
        ck_assert_int_le(chars, LMTEXT_BPE_MAX_WORD);
    }
    ck_assert_uint_lt(t.n, t.n_chars / 4);
    lmtext_free(&t);
}
END_TEST

/* ---- Installed -------------------------------------------------------------------------------------------- */

/* The share of entries (or verse lines) in n random characters of t's
 * training distribution, seed 1. */
static LmShare random_share(const LmText *t, size_t n, int verse) {
    Rng r;
    rng_seed(&r, 1);
    return lmformat_random_share(t, verse ? lmformat_verse_lines : lmformat_entries, n, &r);
}

/* dict-devil 1.0-13.1 (Debian 12): the figures lmtext.h and lmformat.h quote */
START_TEST(test_devil_installed) {
    if (access(LMTEXT_DEVIL_PATH, R_OK) != 0) {
        printf("SKIP lmtext/devil: %s not installed (sudo apt-get install dict-devil)\n", LMTEXT_DEVIL_PATH);
        return;
    }
    LmText t;
    char err[512];
    ck_assert_msg(lmtext_load(&t, "devil", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(t.source, LMTEXT_DEVIL);
    ck_assert_uint_eq(t.n_read, 383656);
    ck_assert_uint_eq(t.n, 380684);
    ck_assert_uint_eq(t.n_bytes, 380684);
    ck_assert_int_eq(t.V, 83);
    ck_assert_uint_eq(t.n_train, 342615);
    ck_assert(!strncmp(t.text, "ABASEMENT, n.  A decent", 23));
    ck_assert(!strcmp(t.text + t.n_bytes - 12, "two years.\n\n"));
    LmShare e = lmformat_entries(t.text, t.n_bytes);
    ck_assert_int_eq(e.hits, 982);
    ck_assert_int_eq(e.total, 1003);
    /* a million random characters: about 500 paragraphs, none an entry */
    LmShare rnd = random_share(&t, 1000000, 0);
    ck_assert_int_gt(rnd.total, 400);
    ck_assert_int_eq(rnd.hits, 0);
    printf("lmtext/devil: %zu characters, %d distinct, train %zu, validation %zu; entries opening 'WORD, pos.': "
           "%ld of %ld (%.1f%%), in random text %ld of %ld\n", t.n, t.V, t.n_train, t.n - t.n_train, e.hits,
           e.total, 100.0 * e.hits / e.total, rnd.hits, rnd.total);
    lmtext_free(&t);
}
END_TEST

/* fortunes-zh 2.98 (Debian 12) */
START_TEST(test_tang_installed) {
    if (access(LMTEXT_TANG300_PATH, R_OK) != 0) {
        printf("SKIP lmtext/tang300: %s not installed (sudo apt-get install fortunes-zh)\n", LMTEXT_TANG300_PATH);
        return;
    }
    LmText t;
    char err[512];
    ck_assert_msg(lmtext_load(&t, "tang300", err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(t.n_read, 88927);
    ck_assert_uint_eq(t.n, 29577);
    ck_assert_int_eq(t.V, 2579);
    ck_assert_uint_eq(t.n_train, 26619);
    ck_assert(!strchr(t.text, '\x1b') && !strchr(t.text, '%'));
    ck_assert(!strncmp(t.text, "《感遇・其一》\n作者：张九龄\n", strlen("《感遇・其一》\n作者：张九龄\n")));
    LmShare v = lmformat_verse_lines(t.text, t.n_bytes);
    ck_assert_int_eq(v.hits, 3095);
    ck_assert_int_eq(v.total, 3262);
    LmShare rnd = random_share(&t, 1000000, 1);
    double share = (double)rnd.hits / rnd.total;
    ck_assert_int_gt(rnd.total, 100000);
    ck_assert_msg(share > 0.10 && share < 0.16, "random share %g", share);
    printf("lmtext/tang300: %zu characters, %d distinct, train %zu, validation %zu; verse lines of 5 or 7: "
           "%ld of %ld (%.1f%%), in random text %ld of %ld (%.1f%%)\n", t.n, t.V, t.n_train, t.n - t.n_train,
           v.hits, v.total, 100.0 * v.hits / v.total, rnd.hits, rnd.total, 100 * share);
    lmtext_free(&t);
}
END_TEST

/* BPE on the real dictionary: the train split round-trips byte for byte */
START_TEST(test_devil_bpe_installed) {
    if (access(LMTEXT_DEVIL_PATH, R_OK) != 0) {
        printf("SKIP lmtext/devil BPE: %s not installed (sudo apt-get install dict-devil)\n", LMTEXT_DEVIL_PATH);
        return;
    }
    LmText t;
    char err[512];
    ck_assert_msg(lmtext_load(&t, "devil", err, sizeof err) == 0, "%s", err);
    ck_assert_msg(lmtext_use_bpe(&t, 1024, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(t.V, 1024 + 2);
    size_t cut = cut_byte(&t);
    expect_decodes_to(&t, 0, t.n_train, t.text, cut);
    long unk = 0;
    for (size_t i = t.n_train; i < t.n; i++) unk += t.tokens[i] == BPE_UNK;
    ck_assert_uint_lt(t.n, t.n_chars * 3 / 5);   /* each space and newline stays a token: 1.7 characters a token */
    printf("lmtext/devil BPE 1024: %zu tokens (train %zu, validation %zu) for %zu characters, %ld <unk> in "
           "validation\n", t.n, t.n_train, t.n - t.n_train, t.n_chars, unk);
    lmtext_free(&t);
}
END_TEST

Suite *lmtext_suite(void) {
    Suite *s = suite_create("lmtext");
    TCase *rd = suite_case(s, "Read", test_plain_file, test_split_sizes, test_devil_entries_kept,
                           test_tang_poems_kept);
    tcase_add_checked_fixture(rd, setup, teardown);
    TCase *bad = suite_case(s, "Bad input", test_bad_files, test_too_big, test_bytes_refused);
    tcase_add_checked_fixture(bad, setup, teardown);
    tcase_set_timeout(bad, 60);   /* 257 MiB compressed and read back: seconds under the sanitizers */
    suite_case(s, "Tokens", test_encode_decode, test_labels, test_utf8);
    suite_case(s, "Batches", test_batch_windows, test_eval_windows, test_random_ids);
    suite_case(s, "Format", test_entry_head_rule, test_entries_share, test_verse_lines_share);
    tcase_set_timeout(suite_case(s, "BPE", test_bpe_round_trip, test_bpe_long_words), 60);
    TCase *inst = suite_case(s, "Installed", test_devil_installed, test_tang_installed, test_devil_bpe_installed);
    tcase_set_timeout(inst, 120);
    return s;
}
