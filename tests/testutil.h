/* testutil.h - shared helpers for the Check suites.
 *
 * ck_assert_close_arrays(a, b, n, tol): fails with the first mismatches and
 * the max difference, so a failing test says where and by how much.
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include "tensor.h"

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

#endif
