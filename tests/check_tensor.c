/* check_tensor.c - named tensors, views, comparison, RNG determinism. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/rng.h"
#include "core/tensor.h"
#include "testutil.h"

START_TEST(test_shape_string) {
    Tensor *q = tensor_new("Q", "batch seq d_k", 2, 5, 8);
    char buf[128];
    ck_assert_str_eq(tensor_shape_str(q, buf, sizeof buf), "Q [batch=2, seq=5, d_k=8]");
    ck_assert_int_eq(tensor_numel(q), 80);
    ck_assert(tensor_is_contiguous(q));
    for (size_t i = 0; i < tensor_numel(q); i++) ck_assert(q->data[i] == 0.0f);
    tensor_free(q);
    tensor_free(NULL);   /* a no-op */
}
END_TEST

START_TEST(test_reshape_transpose_heads) {
    /* [batch=1, seq=3, d_model=4] -> [batch, seq, heads=2, d_head=2] -> [batch, heads, seq, d_head] */
    Tensor *x = tensor_new("x", "batch seq d_model", 1, 3, 4);
    for (int i = 0; i < 12; i++) x->data[i] = (float)i;
    Tensor r = tensor_reshape(x, "x", "batch seq heads d_head", 1, 3, 2, 2);
    Tensor t = tensor_transpose(&r, 1, 2);
    char buf[128];
    ck_assert_str_eq(tensor_shape_str(&t, buf, sizeof buf), "x [batch=1, heads=2, seq=3, d_head=2]");
    ck_assert(!tensor_is_contiguous(&t));
    /* head 1, position 2, element 0 is x[0, 2, 1*2 + 0] = 2*4 + 2 = 10 */
    ck_assert(*tensor_at(&t, 0, 1, 2, 0) == 10.0f);
    Tensor *c = tensor_new("xh", "batch heads seq d_head", 1, 2, 3, 2);
    tensor_copy(c, &t);
    float want[12] = {0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11};
    ck_assert_close_arrays(c->data, want, 12, 0.0);
    tensor_free(c);
    tensor_free(x);
}
END_TEST

START_TEST(test_diff) {
    float a[3] = {1, 2, 3}, b[3] = {1, 2.5f, 3};
    Diff d = diff_arrays(a, b, 3);
    ck_assert(fabs(d.max_abs - 0.5) < 1e-12);
    ck_assert_int_eq(d.where, 1);
    float n[1] = {NAN}, z[1] = {0};
    ck_assert(isinf(diff_arrays(n, z, 1).max_abs));
}
END_TEST

START_TEST(test_rng_deterministic) {
    Rng a, b;
    rng_seed(&a, 1234);
    rng_seed(&b, 1234);
    for (int i = 0; i < 1000; i++) ck_assert_uint_eq(rng_u32(&a), rng_u32(&b));
    rng_seed(&b, 1235);
    int same = 0;
    for (int i = 0; i < 100; i++) same += rng_u32(&a) == rng_u32(&b);
    ck_assert_int_lt(same, 3);
}
END_TEST

START_TEST(test_rng_moments) {
    /* 200k draws: uniform mean 1/2 var 1/12; normal mean 0 var 1 */
    Rng r;
    rng_seed(&r, 7);
    double su = 0, su2 = 0, sn = 0, sn2 = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = rng_uniform(&r), z = rng_normal(&r);
        ck_assert(u >= 0.0 && u < 1.0);
        su += u; su2 += u * u; sn += z; sn2 += z * z;
    }
    ck_assert(fabs(su / n - 0.5) < 0.005);
    ck_assert(fabs(su2 / n - 0.25 - 1.0 / 12) < 0.005);
    ck_assert(fabs(sn / n) < 0.01);
    ck_assert(fabs(sn2 / n - 1.0) < 0.02);
    for (int i = 0; i < 1000; i++) { int k = rng_int(&r, 7); ck_assert(k >= 0 && k < 7); }
}
END_TEST

/* calloc_big is calloc: zeros, for arrays below and above its 4 MiB line,
 * touched or not (the huge-page advice and the touch change where the
 * memory comes from, never what it holds), and freed with free(). */
START_TEST(test_calloc_big_zeroed) {
    size_t counts[] = {1, 1000, (size_t)3 << 20};   /* floats: 4 B, 4 KB, 12 MiB */
    for (int k = 0; k < 3; k++)
        for (int touch = 0; touch < 2; touch++) {
            float *p = calloc_big(counts[k], sizeof(float), touch);
            ck_assert_ptr_nonnull(p);
            for (size_t i = 0; i < counts[k]; i++)
                if (p[i] != 0.0f) ck_abort_msg("%zu floats, touch %d: element %zu is %g", counts[k], touch, i, p[i]);
            p[counts[k] - 1] = 1.0f;   /* all of it is ours to write */
            free(p);
        }
}
END_TEST

Suite *tensor_suite(void) {
    Suite *s = suite_create("tensor");
    suite_case(s, "Core", test_shape_string, test_reshape_transpose_heads, test_diff,
               test_calloc_big_zeroed);
    suite_case(s, "Rng", test_rng_deterministic, test_rng_moments);
    return s;
}
