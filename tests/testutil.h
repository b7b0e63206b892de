/* testutil.h - shared helpers for the Check suites.
 *
 * ck_assert_close_arrays(a, b, n, tol): fails with the first mismatches and
 * the max difference, so a failing test says where and by how much.
 * chapter_binary / fresh_dir / remove_dir / sh: for suites that run a chapter.
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "core/tensor.h"

static inline void assert_close_arrays_at(const float *a, const float *b, size_t n, double tol,
                                          const char *what, const char *file, int line) {
    Diff d = diff_arrays(a, b, n);
    if (!(d.max_abs <= tol)) {
        int shown = 0;
        for (size_t i = 0; i < n && shown < 5; i++) {
            if (!(fabs((double)a[i] - (double)b[i]) <= tol)) {
                fprintf(stderr, "  %s[%zu]: got %.9g, want %.9g\n", what, i, a[i], b[i]);
                shown++;
            }
        }
        ck_assert_msg(0, "%s:%d: %s differs: max |diff| %.3g at %zu (tolerance %.3g)",
                      file, line, what, d.max_abs, d.where, tol);
    }
}
#define ck_assert_close_arrays(a, b, n, tol) \
    assert_close_arrays_at((a), (b), (n), (tol), #a, __FILE__, __LINE__)

/* The built program $BUILD_DIR/prog into bin. 0, with a line saying that
 * suite's runs of it are skipped, when BUILD_DIR is unset or there is none. */
static inline int chapter_binary(char *bin, size_t cap, const char *suite, const char *prog) {
    const char *build = getenv("BUILD_DIR");
    if (!build || !*build) {
        fprintf(stderr, "%s: BUILD_DIR not set, %s runs skipped\n", suite, prog);
        return 0;
    }
    snprintf(bin, cap, "%s/%s", build, prog);
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "%s: no %s, its runs skipped\n", suite, bin);
        return 0;
    }
    return 1;
}

/* A new empty folder /tmp/SUITE_XXXXXX into dir; remove_dir deletes it. */
static inline void fresh_dir(char *dir, size_t cap, const char *suite) {
    snprintf(dir, cap, "/tmp/%s_XXXXXX", suite);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}
static inline void remove_dir(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Runs a printf-formatted shell command; its exit status (-1: killed by a signal). */
__attribute__((format(printf, 1, 2)))
static inline int sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
