/* check_dropout.c - the counter-based dropout generator (dropout_mask.h).
 *
 * "Core": the hash against numbers computed outside this code. mix64 is
 * splitmix64's finaliser; its value at 0 is splitmix64's first output for
 * seed 0, 0xE220A8397B1DCDAF, the number every splitmix64 implementation
 * documents. The masks below were computed with a ten-line Python script
 * that writes the formula of dropout_mask.h out with Python integers
 * (masked to 64 bits), independently of the C code:
 *
 *   M = 2**64 - 1
 *   def mix(z):
 *       z = (z + 0x9E3779B97F4A7C15) & M
 *       z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
 *       z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
 *       return z ^ (z >> 31)
 *   def u(key, t, i):
 *       return (mix((mix(key ^ ((t * 0xD1B54A32D192ED03) & M)) + i) & M) >> 40) / 2**24
 *   mask = ''.join('1' if u(key, t, i) >= p else '0' for i in range(32))
 *
 * "Use": dropout_forward keeps exactly the elements the mask says, scaled
 * by 1/(1-p), and the 24-bit numbers it compares are the script's.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dropout_mask.h"
#include "fast/nn_fast.h"
#include "ref/nn.h"
#include "testutil.h"

typedef struct {
    uint64_t key;
    uint32_t tensor;
    float p;
    const char *mask;       /* element i kept: '1' */
    uint32_t bits[3];       /* (z >> 40) of elements 0, 1, 2 */
} HandMask;

static const HandMask HAND[] = {
    {0x0, 0, 0.5f, "10110010111101000011110110011011", {10946269, 2791669, 8554350}},
    {0x1, 0, 0.1f, "11111111111111111111111111110011", {6177195, 8836861, 12376539}},
    {0x0123456789ABCDEFull, 3, 0.5f, "00000000001101000110100111001111", {7188646, 4312749, 3192896}},
    {0x2A, 7, 0.3f, "11111110111111111111011111011110", {13619914, 8248652, 14585607}},
};
enum { N_HAND = sizeof HAND / sizeof HAND[0] };

START_TEST(test_mix64_reference) {
    ck_assert_uint_eq(dropout_mix64(0), 0xE220A8397B1DCDAFull);
    ck_assert_uint_eq(dropout_mix64(1), 0x910A2DEC89025CC1ull);
}
END_TEST

START_TEST(test_hand_masks) {
    const HandMask *h = &HAND[_i];
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq(dropout_uniform(h->key, h->tensor, (uint64_t)i), h->bits[i] / 16777216.0f);
    for (int i = 0; i < 32; i++) {
        float k = dropout_keep(h->key, h->tensor, (uint64_t)i, h->p);
        float want = h->mask[i] == '1' ? 1.0f / (1.0f - h->p) : 0.0f;
        ck_assert_msg(k == want, "key %#llx tensor %u p %g element %d: keep %g, the script says %c",
                      (unsigned long long)h->key, h->tensor, (double)h->p, i, (double)k, h->mask[i]);
    }
}
END_TEST

/* dropout_forward applies exactly those masks: out = x * keep */
START_TEST(test_forward_uses_mask) {
    const HandMask *h = &HAND[_i];
    float x[32], out[32], keep[32];
    for (int i = 0; i < 32; i++) x[i] = 1.0f + i;
    dropout_forward(out, keep, x, h->p, 32, h->key, h->tensor);
    for (int i = 0; i < 32; i++) {
        float want = h->mask[i] == '1' ? 1.0f / (1.0f - h->p) : 0.0f;
        ck_assert_float_eq(keep[i], want);
        ck_assert_float_eq(out[i], x[i] * want);
    }
}
END_TEST

/* another tensor id or key: another mask (the sites of one pass are independent) */
START_TEST(test_sites_differ) {
    int same_t = 0, same_k = 0;
    for (uint64_t i = 0; i < 4096; i++) {
        int a = dropout_keep(5, 0, i, 0.5f) > 0;
        same_t += a == (dropout_keep(5, 1, i, 0.5f) > 0);
        same_k += a == (dropout_keep(6, 0, i, 0.5f) > 0);
    }
    /* independent fair coins agree about half the time: 2048 +- 32 (1 std) */
    ck_assert_msg(same_t > 1800 && same_t < 2300, "tensors 0 and 1 agree on %d of 4096", same_t);
    ck_assert_msg(same_k > 1800 && same_k < 2300, "keys 5 and 6 agree on %d of 4096", same_k);
}
END_TEST

/* The tuned dropout_forward (16 lanes, chunks over the threads) draws the
 * plain loop's mask to the bit, at sizes around the vector width and the
 * chunk, in place too. */
START_TEST(test_dropout_tuned_matches_ref) {
    size_t sizes[] = {1, 15, 16, 17, 1000, 32768 + 5, 200003};
    float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
    for (int a = 0; a < 7; a++)
        for (int b = 0; b < 4; b++) {
            size_t n = sizes[a];
            float *x = malloc(n * sizeof(float)), *o1 = malloc(n * sizeof(float)), *o2 = malloc(n * sizeof(float));
            float *k1 = malloc(n * sizeof(float)), *k2 = malloc(n * sizeof(float));
            ck_assert(x && o1 && o2 && k1 && k2);
            for (size_t i = 0; i < n; i++) x[i] = o2[i] = 0.25f + (float)(i % 13);
            dropout_forward_ref(o1, k1, x, ps[b], n, 0x1234567ull + a, 3u + b);
            dropout_forward(o2, k2, o2, ps[b], n, 0x1234567ull + a, 3u + b);   /* in place */
            ck_assert_msg(!memcmp(k1, k2, n * sizeof(float)) && !memcmp(o1, o2, n * sizeof(float)),
                          "n=%zu p=%g: tuned mask differs from the plain loop", n, ps[b]);
            free(x); free(o1); free(o2); free(k1); free(k2);
        }
}
END_TEST

Suite *dropout_suite(void) {
    Suite *s = suite_create("dropout");
    TCase *core = suite_case(s, "Core", test_mix64_reference);
    tcase_add_loop_test(core, test_hand_masks, 0, N_HAND);
    TCase *use = suite_case(s, "Use", test_sites_differ, test_dropout_tuned_matches_ref);
    tcase_add_loop_test(use, test_forward_uses_mask, 0, N_HAND);
    return s;
}
