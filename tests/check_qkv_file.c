/* check_qkv_file.c - the Q/K/V text format behind chapter 03's --input.
 *
 * Test cases:
 *   Core       good files parse to the right numbers and labels (and the
 *              example shipped with chapter 03 parses)
 *   Malformed  loop test over bad files: each is rejected with return 2, the
 *              right FILE:LINE, and words saying what was expected
 *   Hostile    control bytes in tokens and in bad numbers come back escaped;
 *              a FIFO is refused without blocking; numbers whose scores
 *              would overflow float32 (near 1e20) are refused naming the rows
 */
#include <check.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include "03_attention/qkv_file.h"
#include "testutil.h"

START_TEST(test_good_file) {
    const char *text =
        "# two queries over three keys\n"
        "tokens: a b\n"
        "\n"
        "Q\n"
        "  1 0    # first query\n"
        "  0.5 -2\r\n"            /* a Windows line ending */
        "K:\n"
        "1 1\n"
        "0 1\n"
        "V\n"
        "1 2 3\n"
        "4 5 6\n";
    QkvFile f;
    char err[256] = "";
    ck_assert_msg(qkv_parse(&f, text, "good.qkv", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(f.Tq, 2);
    ck_assert_int_eq(f.Tk, 2);
    ck_assert_int_eq(f.d_k, 2);
    ck_assert_int_eq(f.d_v, 3);
    const float q[4] = {1, 0, 0.5f, -2}, k[4] = {1, 1, 0, 1}, v[6] = {1, 2, 3, 4, 5, 6};
    ck_assert_close_arrays(f.Q, q, 4, 0.0);
    ck_assert_close_arrays(f.K, k, 4, 0.0);
    ck_assert_close_arrays(f.V, v, 6, 0.0);
    ck_assert_str_eq(f.q_tokens[1], "b");
    ck_assert_str_eq(f.k_tokens[0], "a");
    qkv_free(&f);
    qkv_free(&f);      /* an emptied QkvFile frees again harmlessly */
    qkv_free(NULL);
}
END_TEST

START_TEST(test_good_cross_file) {
    /* cross-attention: 1 query, 3 keys, separate labels over two k_tokens lines,
     * sections in another order */
    const char *text =
        "V\n1\n2\n3\n"
        "k_tokens: le chat\n"
        "k_tokens: noir\n"
        "q_tokens: cat\n"
        "K\n1 0\n0 1\n1 1\n"
        "Q\n2 2\n";
    QkvFile f;
    char err[256] = "";
    ck_assert_msg(qkv_parse(&f, text, "cross.qkv", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(f.Tq, 1);
    ck_assert_int_eq(f.Tk, 3);
    ck_assert_int_eq(f.d_v, 1);
    ck_assert_str_eq(f.k_tokens[2], "noir");
    ck_assert_str_eq(f.q_tokens[0], "cat");
    qkv_free(&f);
    /* no tokens at all: labels stay NULL */
    ck_assert(qkv_parse(&f, "Q\n1\nK\n1\nV\n1\n", "bare.qkv", err, sizeof err) == 0);
    ck_assert_ptr_null(f.q_tokens);
    ck_assert_ptr_null(f.k_tokens);
    qkv_free(&f);
}
END_TEST

START_TEST(test_example_file) {
    /* the file chapter 03's README tells readers to try (tests run from the repo root) */
    QkvFile f;
    char err[256] = "";
    ck_assert_msg(qkv_load(&f, "chapters/03_attention/example.qkv", err, sizeof err) == 0, "%s", err);
    ck_assert_int_gt(f.Tq, 1);
    ck_assert_ptr_nonnull(f.q_tokens);
    qkv_free(&f);
    /* a file that is not there */
    ck_assert_int_eq(qkv_load(&f, "no/such/file.qkv", err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "cannot open 'no/such/file.qkv'"));
}
END_TEST

/* ---- malformed files ------------------------------------------------------------ */

typedef struct {
    const char *why;
    const char *text;
    int line;               /* the line the message must name       */
    const char *expect;     /* words the message must contain        */
} BadFile;

static const BadFile bad[] = {
    {"empty", "", 1, "no content"},
    {"only comments", "# nothing\n\n   # here\n", 3, "no content"},
    {"numbers before a section", "1 2\nQ\n1 2\n", 1, "section header"},
    {"not a number", "Q\n1 2\n1 x\nK\n1 2\nV\n1\n", 3, "'x' is not a number"},
    {"half a number", "Q\n1 2.5.1\nK\n1 2\nV\n1\n", 2, "'2.5.1' is not a number"},
    {"nan", "Q\n1 nan\nK\n1 2\nV\n1\n", 2, "not a finite"},
    {"overflow", "Q\n1 1e39\nK\n1 2\nV\n1\n", 2, "not a finite"},
    {"ragged rows", "Q\n1 2\n3 4\n5\nK\n1 2\nV\n1\n", 4, "expected 2 like the first row of Q (line 2)"},
    {"ragged V", "Q\n1\nK\n1\n2\nV\n1 2\n3\n", 8, "expected 2"},
    {"d_k mismatch", "Q\n1 2 3\nK\n1 2\n3 4\nV\n1\n2\n", 4, "same width d_k"},
    {"K/V rows", "Q\n1 2\nK\n1 2\n3 4\n5 6\nV\n1\n2\n", 7, "one value row per key"},
    {"missing V", "Q\n1 2\nK\n1 2\n", 4, "section V is missing"},
    {"missing Q", "# no Q here\nK\n1 2\nV\n1\n\n", 6, "section Q is missing"},
    {"empty section", "Q\nK\n1 2\nV\n1\n", 1, "section Q has no rows"},
    {"section twice", "Q\n1\nK\n1\nQ\n2\nV\n1\n", 5, "second time (first at line 1)"},
    {"tokens count", "tokens: a b c\nQ\n1\n2\nK\n1\n2\nV\n1\n2\n", 1, "3 labels but Q has 2 rows"},
    {"tokens vs keys", "tokens: a b\nQ\n1\n2\nK\n1\nV\n1\n", 1, "q_tokens:"},
    {"q_tokens count", "q_tokens: a\nQ\n1\n2\nK\n1\nV\n1\n", 1, "1 labels but Q has 2 rows"},
    {"k_tokens count", "Q\n1\nK\n1\n2\nV\n1\n2\nk_tokens: a b c\n", 9, "3 labels but K has 2 rows"},
    {"empty tokens", "tokens:   \nQ\n1\nK\n1\nV\n1\n", 1, "no words"},
    {"forgot the colon", "Q\n1\ntokens a\nK\n1\nV\n1\n", 3, "expected a colon"},
    {"mixed token styles", "tokens: a\nq_tokens: b\nQ\n1\nK\n1\nV\n1\n", 2, "one style"},
    {"lower-case header", "q\n1\nK\n1\nV\n1\n", 1, "section header (Q, K or V"},
    /* scores that overflow float32: 1e20 * 1e20 = 1e40 > 3.4e38 */
    {"scores overflow", "Q\n1 2\n1e20 1e20\nK\n1 1\n1e20 0\nV\n1\n2\n", 3,
     "(row 2 of Q) with key row 2 of K (line 6) can reach 1e+40"},
    {"huge value", "Q\n1\nK\n1\nV\n3e38\n", 6, "row 1 of V"},
};
#define N_BAD ((int)(sizeof bad / sizeof bad[0]))

START_TEST(test_malformed) {
    const BadFile *b = &bad[_i];
    QkvFile f;
    char err[512] = "", where[64];
    int rc = qkv_parse(&f, b->text, "bad.qkv", err, sizeof err);
    ck_assert_msg(rc == 2, "case '%s' was accepted", b->why);
    snprintf(where, sizeof where, "bad.qkv:%d: ", b->line);
    ck_assert_msg(strncmp(err, where, strlen(where)) == 0, "case '%s': message '%s' should start '%s'",
                  b->why, err, where);
    ck_assert_msg(strstr(err, b->expect) != NULL, "case '%s': message '%s' should say '%s'",
                  b->why, err, b->expect);
    ck_assert_ptr_null(f.Q);     /* nothing left allocated on failure */
}
END_TEST

START_TEST(test_absurd_sizes) {
    QkvFile f;
    char err[512] = "";
    /* a row of QKV_MAX_COLS + 1 numbers on line 2 */
    size_t cap = (size_t)(QKV_MAX_COLS + 1) * 2 + 64;
    char *text = malloc(cap > (size_t)(QKV_MAX_ROWS + 1) * 4 + 64 ? cap : (size_t)(QKV_MAX_ROWS + 1) * 4 + 64);
    char *t = text;
    t += sprintf(t, "Q\n");
    for (int i = 0; i <= QKV_MAX_COLS; i++) t += sprintf(t, "1 ");
    sprintf(t, "\nK\n1\nV\n1\n");
    ck_assert_int_eq(qkv_parse(&f, text, "wide.qkv", err, sizeof err), 2);
    ck_assert_msg(strstr(err, "wide.qkv:2: ") == err && strstr(err, "more than"), "%s", err);
    /* QKV_MAX_ROWS + 1 rows of K: the message names the first row too many */
    t = text;
    t += sprintf(t, "Q\n1\nK\n");
    for (int i = 0; i <= QKV_MAX_ROWS; i++) t += sprintf(t, "1\n");
    ck_assert_int_eq(qkv_parse(&f, text, "tall.qkv", err, sizeof err), 2);
    char where[64];
    snprintf(where, sizeof where, "tall.qkv:%d: ", 3 + QKV_MAX_ROWS + 1);
    ck_assert_msg(strncmp(err, where, strlen(where)) == 0 && strstr(err, "more than"), "%s", err);
    free(text);
}
END_TEST

/* No byte of a hostile file reaches a message or a label unescaped. */
START_TEST(test_control_bytes_escaped) {
    const char *text = "tokens: \x1b[31mred \xc2\x9b" "2J ok\n"   /* ESC [, and C1 CSI in UTF-8 */
                       "Q\n1\n2\n3\nK\n1\n2\n3\nV\n1\n2\n3\n";
    QkvFile f;
    char err[512] = "";
    ck_assert_msg(qkv_parse(&f, text, "t.qkv", err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(f.q_tokens[0], "\\x1b[31mred");
    ck_assert_str_eq(f.k_tokens[1], "\\xc2\\x9b2J");
    ck_assert_str_eq(f.q_tokens[2], "ok");
    qkv_free(&f);
    /* a bad number, and a stray line, holding an escape sequence that would
     * retitle the terminal window */
    const char *bad_texts[] = {"Q\n1 \x1b]0;owned\x07\nK\n1\nV\n1\n", "\x1b[2Jhello\nQ\n1\n"};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(qkv_parse(&f, bad_texts[i], "t.qkv", err, sizeof err), 2);
        for (const char *p = err; *p; p++) ck_assert_msg((unsigned char)*p >= 0x20, "control byte in '%s'", err);
        ck_assert_msg(strstr(err, "\\x1b"), "message: %s", err);
    }
}
END_TEST

START_TEST(test_fifo_refused) {
    char dir[64], path[128];
    fresh_dir(dir, sizeof dir, "check_qkv");
    snprintf(path, sizeof path, "%s/f.qkv", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    QkvFile f;
    char err[512] = "";
    alarm(5);   /* before the fix fopen blocked forever waiting for a writer */
    ck_assert_int_eq(qkv_load(&f, path, err, sizeof err), 2);
    alarm(0);
    ck_assert_msg(strstr(err, "not a regular file (it is a FIFO)"), "message: %s", err);
    ck_assert_int_eq(qkv_load(&f, dir, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "it is a folder"), "message: %s", err);
    remove_dir(dir);
}
END_TEST

Suite *qkv_file_suite(void) {
    Suite *s = suite_create("qkv_file");
    suite_case(s, "Core", test_good_file, test_good_cross_file, test_example_file);
    TCase *bad_files = suite_case(s, "Malformed", test_absurd_sizes);
    tcase_add_loop_test(bad_files, test_malformed, 0, N_BAD);
    suite_case(s, "Hostile", test_control_bytes_escaped, test_fifo_refused);
    return s;
}
