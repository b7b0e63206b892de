/* testutil.h - the helpers every Check suite shares, one of each
 * (tests/testutil.c holds their bodies).
 *
 *   comparing     ck_assert_close_arrays: the first mismatches and the max
 *                 difference, so a failing test says where and by how much
 *   gradients     fd_check / fd_diff: central finite differences against a
 *                 backward pass, the one helper every Gradient case uses;
 *                 weighted_sum, the scalar such a case differentiates
 *   inputs        zeros, randn (random normal arrays); build_or_fail and
 *                 perturb_params (a model to check); test_config and
 *                 test_config_tiny (a small model's Config)
 *   files         read_file / read_file_or_fail / write_file / write_text;
 *                 fresh_dir / remove_dir (a folder of one's own in /tmp)
 *   skips         test_skip / test_skip_missing: a part not run, counted
 *                 and listed by the runner after Check's summary
 *   programs      sh (a shell command's exit status); build_dir and
 *                 chapter_binary ($BUILD_DIR/prog, or the test fails); run_captured
 *                 and sh_captured (a child's or a command's stdout and
 *                 stderr, as strings); limit_file_size (a full disk)
 *   output        capture_begin / capture_end (what this process prints);
 *                 text_cols / widest_line / assert_lines_fit: how wide
 *                 printed text is on a terminal
 *   suites        suite_case: a test case and its tests, in one line
 *
 * Failures of the test's world (a temporary folder that cannot be made, a
 * fork that fails) fail the test where they happen, with a message; the
 * helpers that may meet a missing file on purpose say so and return NULL.
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>   /* waitpid, WIFEXITED: the suites fork children of their own too */
#include <unistd.h>
#include "core/rng.h"
#include "core/tensor.h"
#include "model/model.h"

/* ---- comparing ----------------------------------------------------------- */

/* Fails the test when some |a[i] - b[i]| > tol (or is NaN), printing the
 * first 5 such elements and the largest difference with where it is. */
void assert_close_arrays_at(const float *a, const float *b, size_t n, double tol, const char *what,
                            const char *file, int line);
#define ck_assert_close_arrays(a, b, n, tol) \
    assert_close_arrays_at((a), (b), (n), (tol), #a, __FILE__, __LINE__)

/* ---- gradients ----------------------------------------------------------- */

/* A scalar loss of whatever the test's forward pass reads (summed in double
 * by the test), evaluated afresh on every call. */
typedef double (*FdLoss)(void *ctx);

/* One central difference of loss in *p: (L(p+h) - L(p-h)) divided by the
 * step actually taken (p +- h rounded to float); *p is restored. */
double fd_diff(FdLoss loss, void *ctx, float *p, float h);
/* The same for a parameter of a double-precision reference (the loss then
 * computed in double throughout, as tests/attention_double.h's). */
double fd_diff_double(FdLoss loss, void *ctx, double *p, double h);

/* Compares grad[i], the backward pass's d loss / d param[i], with fd_diff
 * for each i in idx[0..nidx) (idx NULL: every i in 0..n). An entry passes
 * when |numeric - analytic| <= atol + rtol * max(|numeric|, |analytic|).
 * A kink (ReLU at 0, a top-k choice that flips) spoils a quotient whose
 * step crosses it: an entry that fails at h is tried again at 2h, and
 * passes if that quotient agrees; where the two quotients disagree with
 * each other too, the kink is counted in *kinks (may be NULL) and the entry
 * skipped. A real error - both quotients agree with each other and not
 * with backward - fails the test, naming what[i], both values and the
 * tolerance. Returns the number of entries compared (kinks included). */
size_t fd_check_at(FdLoss loss, void *ctx, float *param, const float *grad, size_t n, const size_t *idx,
                   size_t nidx, float h, double atol, double rtol, int *kinks, const char *what,
                   const char *file, int line);
#define fd_check(loss, ctx, param, grad, n, h, atol, rtol) \
    fd_check_at((loss), (ctx), (param), (grad), (n), NULL, 0, (h), (atol), (rtol), NULL, #param, __FILE__, \
                __LINE__)
/* fd_check_at with fd_diff_double: the float backward pass of a layer
 * against central differences of its double-precision reference. */
size_t fd_check_double_at(FdLoss loss, void *ctx, double *param, const float *grad, size_t n, double h, double atol,
                          double rtol, const char *what, const char *file, int line);
#define fd_check_double(loss, ctx, param, grad, n, h, atol, rtol, what) \
    fd_check_double_at((loss), (ctx), (param), (grad), (n), (h), (atol), (rtol), (what), __FILE__, __LINE__)

/* The usual scalar of a Gradient case: L = sum_i out[i] * R[i] for a fixed
 * random R (so dL/dout = R), summed in double. */
double weighted_sum(const float *out, const float *R, size_t n);

/* ---- inputs -------------------------------------------------------------- */

/* n zeroed floats (at least one, so n = 0 still gets a pointer), failing the
 * test when there is no memory; the caller frees. */
float *zeros(size_t n);

/* n draws of N(0, std^2) from r (rng_fill_normal, so the stream is r's and
 * a test's numbers depend only on its seed): malloc'd, the caller frees. */
float *randn(Rng *r, size_t n, float std);

/* A small model's Config, Config's fields in Config's order; the rest as
 * config_base() has them (post-LN, sinusoidal positions, padding id 0).
 * A test that needs pre-LN, learned positions or another padding id sets
 * that field on the copy it gets. */
Config test_config(int N, int d_model, int d_ff, int h, int d_k, int d_v, int vocab, int max_len, float dropout);
/* The tiny model with every size different, so that a swapped dimension
 * shows: N=2, d_model 8, d_ff 12, h 2, d_k 4, d_v 3 (h*d_k = 8 = d_model
 * but h*d_v = 6 != d_model), vocab 11, max_len 16. */
Config test_config_tiny(float dropout);

/* model_build(m, c, B, Ts, Tt, seed), failing the test with its message. */
void build_or_fail(Model *m, const Config *c, int B, int Ts, int Tt, uint64_t seed);
/* Moves every 1-D tensor (Norm gains and biases, the FFN's biases) off its
 * initial 1 or 0 by up to +-0.3, so that their gradients (and mistakes in
 * them) are generic. */
void perturb_params(Model *m, uint64_t seed);

/* ---- files --------------------------------------------------------------- */

/* The whole file at path with one NUL after its last byte (so a text file
 * is a string); *len (len may be NULL) gets its size without the NUL.
 * malloc'd, the caller frees. NULL when the file cannot be opened. */
void *read_file(const char *path, size_t *len);
/* The same, failing the test (naming path) when the file cannot be read. */
void *read_file_or_fail(const char *path, size_t *len);
/* Writes n bytes of data to path (created or truncated); fails the test when
 * it cannot. */
void write_file(const char *path, const void *data, size_t n);
/* write_file of the string text, without its NUL. */
void write_text(const char *path, const char *text);

/* A new empty folder /tmp/SUITE_XXXXXX, its name into dir (cap bytes);
 * remove_dir deletes it with whatever is in it (rm -rf). */
void fresh_dir(char *dir, size_t cap, const char *suite);
void remove_dir(const char *dir);

/* ---- skips --------------------------------------------------------------- */

/* The environment variable naming the file the runner (check_main.c) reads
 * the skips from: each test runs in a forked child, so a skip is a line
 * appended to that file, not a counter in memory. */
#define SKIP_FILE_ENV "AIYN_SKIP_FILE"

/* Records that suite left a part of a test out, and why (printf-formatted):
 * "SUITE: skipped: WHY" on stderr, and "SUITE: WHY" as one line of
 * $AIYN_SKIP_FILE, which the runner counts and lists after Check's
 * summary. The caller then returns or goes on without that part. */
__attribute__((format(printf, 2, 3))) void test_skip(const char *suite, const char *fmt, ...);
/* The same for a part that needs tool, which CI's machine installs
 * (.ci/run): under CI=true its absence fails the test instead, naming the
 * tool, since there a skip would hide a broken install. */
__attribute__((format(printf, 3, 4))) void test_skip_missing(const char *suite, const char *tool, const char *fmt,
                                                             ...);

/* ---- programs ------------------------------------------------------------ */

/* Runs a printf-formatted shell command; its exit status (-1: killed by a
 * signal). Its output goes where the test's goes, unless the command
 * redirects it. */
__attribute__((format(printf, 1, 2))) int sh(const char *fmt, ...);

/* $BUILD_DIR, where `make test` put the programs (the runner sets it to
 * its own folder when it is unset); fails the test when it is empty. */
const char *build_dir(void);
/* The built program $BUILD_DIR/prog into bin; returns 1. A program that is
 * not there fails the test (suite names it): a test of a program that did
 * not run has tested nothing. */
int chapter_binary(char *bin, size_t cap, const char *suite, const char *prog);

/* Runs fn(arg) in a child process (fn may exec a program; when it returns,
 * the child exits 0). The child's stdout lands in *out and its stderr in
 * *err (stderr is read through a pipe while the child runs, so a limit on
 * file sizes set in fn does not cut the messages); with err NULL, stderr
 * goes into *out too, in the order written. out NULL: both are thrown
 * away. The strings are malloc'd and NUL-terminated; the caller frees.
 * Returns the exit status, 128 + the signal number when a signal ended the
 * child (as the shell's $?). */
int run_captured(char **out, char **err, void (*fn)(void *), void *arg);
/* run_captured of a printf-formatted command line run by /bin/sh -c. */
__attribute__((format(printf, 3, 4))) int sh_captured(char **out, char **err, const char *fmt, ...);

/* A full disk, for this process (call it in a child): from now on a write
 * that would make a file longer than `bytes` fails with EFBIG, as a full
 * disk's fails with ENOSPC (RLIMIT_FSIZE, with SIGXFSZ ignored, or the
 * kernel would kill the process instead; both survive exec). */
void limit_file_size(long bytes);

/* ---- output -------------------------------------------------------------- */

/* Everything this process prints on stdout between capture_begin() and
 * capture_end() lands in the string capture_end returns (malloc'd, the
 * caller frees) instead of on the screen. Not nested. */
void capture_begin(void);
char *capture_end(void);

/* Columns of s[0..len): UTF-8 continuation bytes and ANSI escapes (ESC ...
 * letter) take none, every other character one; with wide, East Asian wide
 * characters (U+3000 to U+DFFF, U+F000 and up: 貓吃魚) take two, as a
 * terminal shows them. */
int text_cols(const char *s, size_t len, int wide);
/* The widest line of s, every character one column: how show.c measures
 * what it lays out (so a wide character such as 猫 counts once). */
int widest_line(const char *s);
/* Fails the test at the first line of s wider than max_cols characters,
 * unless that line contains `unless` (NULL: no exception), e.g. the output
 * folder, whose width is the user's path's. */
void assert_lines_fit(const char *s, int max_cols, const char *unless);

/* ---- suites -------------------------------------------------------------- */

/* The test case `name` of suite s with the tests listed, in order, added to
 * s: `suite_case(s, "Core", test_a, test_b);` is tcase_create, one
 * tcase_add_test per test and suite_add_tcase. Returns the case, for
 * tcase_set_timeout, tcase_add_loop_test or a fixture. */
TCase *suite_case_of(Suite *s, const char *name, const TTest *const *tests);
#define suite_case(s, name, ...) \
    suite_case_of((s), (name), (const TTest *const[]){__VA_ARGS__, NULL})

#endif
