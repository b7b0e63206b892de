/* check_sample.c - greedy, temperature, top-k and top-p sampling.
 *
 * "Core": greedy and its equivalents (temperature 0, top-k 1, V = 1),
 * ties to the lower id, -inf never chosen, huge logits stay finite, the
 * same seed gives the same tokens, bad settings named.
 * "Distribution": 100,000 draws each; every token's share within five
 * binomial standard deviations of the probability worked out by hand
 * (the seeds are fixed, so a pass is a pass every time).
 * "Cut-off": top-k and top-p never return a token they exclude (checked
 * against an independent cut in double on random logits), and the cut is
 * exact where probabilities are equal.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/sample.h"
#include "testutil.h"

enum { DRAWS = 100000, VMAX = 64 };

static SampleConfig cfg(float temperature, int top_k, float top_p) {
    return (SampleConfig){.temperature = temperature, .top_k = top_k, .top_p = top_p};
}

/* DRAWS tokens into count[V] (seed fixed) */
static void draw(const float *logits, int V, SampleConfig c, uint64_t seed, long *count) {
    float prob[VMAX];
    int order[VMAX];
    Rng r;
    rng_seed(&r, seed);
    memset(count, 0, (size_t)V * sizeof *count);
    for (int i = 0; i < DRAWS; i++) {
        int id = sample_next(logits, V, c, &r, prob, order);
        ck_assert_int_ge(id, 0);
        ck_assert_int_lt(id, V);
        count[id]++;
    }
}

/* every share within 5 binomial standard deviations of want[i] (0: never drawn) */
static void expect_shares(const long *count, const double *want, int V, const char *what) {
    for (int i = 0; i < V; i++) {
        double share = count[i] / (double)DRAWS, bound = 5 * sqrt(want[i] * (1 - want[i]) / DRAWS);
        if (want[i] == 0) ck_assert_msg(count[i] == 0, "%s: token %d drawn %ld times, excluded", what, i, count[i]);
        else ck_assert_msg(fabs(share - want[i]) <= bound, "%s: token %d share %.4f, want %.4f +- %.4f", what, i,
                           share, want[i], bound);
    }
}

/* ---- Core ---------------------------------------------------------------------------- */

START_TEST(test_greedy) {
    const float z[] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
    float prob[5];
    int order[5];
    Rng r;
    rng_seed(&r, 1);
    uint64_t before = r.state;
    ck_assert_int_eq(sample_argmax(z, 5), 1);   /* tie 1 and 3: the lower id */
    ck_assert_int_eq(sample_next(z, 5, cfg(0, 0, 1), &r, prob, order), 1);
    ck_assert_int_eq(sample_next(z, 5, cfg(1, 1, 1), &r, prob, order), 1);
    ck_assert_int_eq(sample_next(z, 5, cfg(5, 1, 0.5f), &r, prob, order), 1);
    ck_assert_int_eq(sample_next(z, 5, cfg(0, 0, 1), NULL, prob, order), 1);   /* greedy needs no Rng */
    ck_assert_uint_eq(r.state, before);   /* and draws nothing from it */
    /* V = 1: the one token, whatever the settings */
    const float one[] = {-3.0f};
    ck_assert_int_eq(sample_next(one, 1, cfg(1, 0, 1), &r, prob, order), 0);
    ck_assert_int_eq(sample_next(one, 1, cfg(2, 5, 0.1f), &r, prob, order), 0);
    /* top_p small keeps the most probable alone: greedy, with a draw */
    for (int i = 0; i < 100; i++) ck_assert_int_eq(sample_next(z, 5, cfg(1, 0, 1e-6f), &r, prob, order), 1);
    /* a tiny temperature is greedy too (the others' weights underflow to 0) */
    const float d[] = {0.1f, 0.3f, 0.2f};
    for (int i = 0; i < 100; i++) ck_assert_int_eq(sample_next(d, 3, cfg(1e-4f, 0, 1), &r, prob, order), 1);
}
END_TEST

START_TEST(test_masked_and_huge) {
    /* -inf: never drawn */
    const float z[] = {-INFINITY, 0.0f, -INFINITY, 0.0f};
    long count[4];
    draw(z, 4, cfg(1, 0, 1), 5, count);
    expect_shares(count, (const double[]){0, 0.5, 0, 0.5}, 4, "masked");
    draw(z, 4, cfg(1, 3, 1), 5, count);   /* top-k past the finite ones */
    expect_shares(count, (const double[]){0, 0.5, 0, 0.5}, 4, "masked top-k 3");
    /* huge logits: exp(z) would overflow; z - max does not */
    const float big[] = {1000.0f, 1000.0f - logf(3.0f), -1e30f};
    draw(big, 3, cfg(1, 0, 1), 6, count);
    expect_shares(count, (const double[]){0.75, 0.25, 0}, 3, "huge logits");
    /* the scratch holds finite weights afterwards, the largest exactly 1 */
    float prob[3];
    int order[3];
    Rng r;
    rng_seed(&r, 1);
    sample_next(big, 3, cfg(1, 0, 1), &r, prob, order);
    ck_assert(prob[0] == 1.0f && isfinite(prob[1]) && prob[2] == 0.0f);
}
END_TEST

START_TEST(test_deterministic) {
    float z[VMAX], prob[VMAX];
    int order[VMAX], a[200], b[200];
    Rng g;
    rng_seed(&g, 11);
    rng_fill_normal(&g, z, VMAX, 0, 2);
    const SampleConfig cs[] = {cfg(1, 0, 1), cfg(0.7f, 10, 1), cfg(1.3f, 0, 0.9f), cfg(1, 20, 0.8f)};
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        Rng r1, r2, r3;
        rng_seed(&r1, 42), rng_seed(&r2, 42), rng_seed(&r3, 43);
        int differs = 0;
        for (int i = 0; i < 200; i++) {
            a[i] = sample_next(z, VMAX, cs[c], &r1, prob, order);
            b[i] = sample_next(z, VMAX, cs[c], &r2, prob, order);
            differs |= sample_next(z, VMAX, cs[c], &r3, prob, order) != a[i];
        }
        ck_assert(!memcmp(a, b, sizeof a));   /* same seed, same tokens */
        ck_assert(differs);                   /* another seed, other tokens */
    }
}
END_TEST

START_TEST(test_config_check) {
    char err[256];
    ck_assert_int_eq(sample_config_check(sample_config_default(), err, sizeof err), 0);
    ck_assert_int_eq(sample_config_check(cfg(0, 1, 1), err, sizeof err), 0);
    ck_assert_int_eq(sample_config_check(cfg(-0.5f, 0, 1), err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "temperature -0.5"));
    ck_assert_int_eq(sample_config_check(cfg(NAN, 0, 1), err, sizeof err), 2);
    ck_assert_int_eq(sample_config_check(cfg(INFINITY, 0, 1), err, sizeof err), 2);
    ck_assert_int_eq(sample_config_check(cfg(1, -2, 1), err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "top-k -2"));
    ck_assert_int_eq(sample_config_check(cfg(1, 0, 0), err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "top-p 0"));
    ck_assert_int_eq(sample_config_check(cfg(1, 0, 1.5f), err, sizeof err), 2);
    ck_assert_int_eq(sample_config_check(cfg(1, 0, NAN), err, sizeof err), 2);
}
END_TEST

/* ---- Distribution ------------------------------------------------------------------------ */

/* p = (0.1, 0.2, 0.3, 0.4) as logits ln p */
static void logits_of(const double *p, int V, float *z) {
    for (int i = 0; i < V; i++) z[i] = (float)log(p[i]);
}

START_TEST(test_temperature_shares) {
    const double p[] = {0.1, 0.2, 0.3, 0.4};
    float z[4];
    long count[4];
    logits_of(p, 4, z);
    draw(z, 4, cfg(1, 0, 1), 1, count);
    expect_shares(count, p, 4, "temperature 1");
    /* temperature 2: p_i^(1/2), renormalised */
    double s = 0, w[4];
    for (int i = 0; i < 4; i++) s += w[i] = sqrt(p[i]);
    for (int i = 0; i < 4; i++) w[i] /= s;
    draw(z, 4, cfg(2, 0, 1), 2, count);
    expect_shares(count, w, 4, "temperature 2");
    /* temperature 0.5: p_i^2, renormalised (0.01, 0.04, 0.09, 0.16) / 0.3 */
    const double sq[] = {0.01 / 0.3, 0.04 / 0.3, 0.09 / 0.3, 0.16 / 0.3};
    draw(z, 4, cfg(0.5f, 0, 1), 3, count);
    expect_shares(count, sq, 4, "temperature 0.5");
}
END_TEST

START_TEST(test_top_k_top_p_shares) {
    const double p[] = {0.1, 0.2, 0.3, 0.4};
    float z[4];
    long count[4];
    logits_of(p, 4, z);
    /* top-k 2: 0.3 and 0.4, renormalised */
    draw(z, 4, cfg(1, 2, 1), 4, count);
    expect_shares(count, (const double[]){0, 0, 3.0 / 7, 4.0 / 7}, 4, "top-k 2");
    /* top-k 4 = V and 9 > V: no cut */
    draw(z, 4, cfg(1, 9, 1), 4, count);
    expect_shares(count, p, 4, "top-k 9");
    /* top-p 0.5: 0.4 < 0.5, 0.4 + 0.3 >= 0.5 -> {3, 2} */
    draw(z, 4, cfg(1, 0, 0.5f), 5, count);
    expect_shares(count, (const double[]){0, 0, 3.0 / 7, 4.0 / 7}, 4, "top-p 0.5");
    /* top-p 0.8: 0.4 + 0.3 = 0.7 < 0.8, + 0.2 -> {3, 2, 1} */
    draw(z, 4, cfg(1, 0, 0.8f), 6, count);
    expect_shares(count, (const double[]){0, 2.0 / 9, 3.0 / 9, 4.0 / 9}, 4, "top-p 0.8");
    /* top-k 3 then top-p 0.5 of what stays: 0.4/0.9 = 0.44 < 0.5 -> {3, 2} */
    draw(z, 4, cfg(1, 3, 0.5f), 7, count);
    expect_shares(count, (const double[]){0, 0, 3.0 / 7, 4.0 / 7}, 4, "top-k 3, top-p 0.5");
    /* temperature first, then the cut: at T = 0.5, (0.01, 0.04, 0.09, 0.16) / 0.3,
     * top-p 0.6: 0.533 < 0.6 -> {3, 2} */
    draw(z, 4, cfg(0.5f, 0, 0.6f), 8, count);
    expect_shares(count, (const double[]){0, 0, 9.0 / 25, 16.0 / 25}, 4, "temperature 0.5, top-p 0.6");
}
END_TEST

/* ---- Cut-off ------------------------------------------------------------------------------- */

/* equal probabilities: the cut falls exactly, lower ids first */
START_TEST(test_exact_cut_at_ties) {
    const float z[] = {0.25f, 0.25f, 0.25f, 0.25f, -1.0f};   /* four equal, one lower */
    long count[5];
    const double a = 1 / (1 + 3 + exp(-1.25));   /* each of the four, with nothing cut */
    draw(z, 5, cfg(1, 0, 1), 9, count);
    expect_shares(count, (const double[]){a, a, a, a, 1 - 4 * a}, 5, "no cut");
    draw(z, 5, cfg(1, 2, 1), 9, count);
    expect_shares(count, (const double[]){0.5, 0.5, 0, 0, 0}, 5, "top-k 2 at a tie");
    draw(z, 5, cfg(1, 3, 1), 9, count);
    expect_shares(count, (const double[]){1 / 3.0, 1 / 3.0, 1 / 3.0, 0, 0}, 5, "top-k 3 at a tie");
    /* top-p: four of 1/4 each (the fifth masked) */
    const float q[] = {-INFINITY, 1.0f, 1.0f, 1.0f, 1.0f};
    draw(q, 5, cfg(1, 0, 0.5f), 10, count);   /* 1/4 + 1/4 reaches 0.5 exactly: two */
    expect_shares(count, (const double[]){0, 0.5, 0.5, 0, 0}, 5, "top-p 0.5 at a tie");
    draw(q, 5, cfg(1, 0, 0.75f), 10, count);
    expect_shares(count, (const double[]){0, 1 / 3.0, 1 / 3.0, 1 / 3.0, 0}, 5, "top-p 0.75 at a tie");
    draw(q, 5, cfg(1, 0, 0.5001f), 10, count);   /* just past two: three */
    expect_shares(count, (const double[]){0, 1 / 3.0, 1 / 3.0, 1 / 3.0, 0}, 5, "top-p 0.5001 at a tie");
    draw(q, 5, cfg(1, 0, 0.25f), 10, count);
    expect_shares(count, (const double[]){0, 1, 0, 0, 0}, 5, "top-p 0.25 at a tie");
}
END_TEST

/* random logits: every token drawn under top-k is among the k highest, and
 * under top-p inside the nucleus worked out independently in double */
START_TEST(test_never_excluded) {
    float z[VMAX], prob[VMAX];
    int order[VMAX];
    Rng g, r;
    rng_seed(&g, 21), rng_seed(&r, 22);
    for (int trial = 0; trial < 50; trial++) {
        int V = 2 + rng_int(&g, VMAX - 1);
        rng_fill_normal(&g, z, (size_t)V, 0, 3);
        int k = 1 + rng_int(&g, V);
        float top_p = 0.05f + 0.9f * rng_uniform(&g);
        float temp = 0.5f + rng_uniform(&g);
        /* rank[i]: how many tokens come before i (higher logit, or equal and lower id) */
        int rank[VMAX];
        for (int i = 0; i < V; i++) {
            rank[i] = 0;
            for (int j = 0; j < V; j++) rank[i] += z[j] > z[i] || (z[j] == z[i] && j < i);
        }
        /* the nucleus at this temperature: the fewest by rank whose mass reaches top_p */
        double w[VMAX], total = 0;
        for (int i = 0; i < V; i++) total += w[i] = exp(z[i] / temp);
        int nucleus = 0;
        for (double cum = 0; nucleus < V && cum < top_p * total;) {
            for (int i = 0; i < V; i++)
                if (rank[i] == nucleus) cum += w[i];
            nucleus++;
        }
        for (int d = 0; d < 500; d++) {
            int id = sample_next(z, V, cfg(temp, k, 1), &r, prob, order);
            ck_assert_msg(rank[id] < k, "top-k %d drew token %d of rank %d", k, id, rank[id]);
            id = sample_next(z, V, cfg(temp, 0, top_p), &r, prob, order);
            ck_assert_msg(rank[id] < nucleus, "top-p %g drew token %d of rank %d; the nucleus has %d", top_p, id,
                          rank[id], nucleus);
        }
    }
}
END_TEST

Suite *sample_suite(void) {
    Suite *s = suite_create("sample");
    suite_case(s, "Core", test_greedy, test_masked_and_huge, test_deterministic, test_config_check);
    /* 100,000 draws a distribution: a second here, several under the sanitizers */
    tcase_set_timeout(suite_case(s, "Distribution", test_temperature_shares, test_top_k_top_p_shares), 120);
    tcase_set_timeout(suite_case(s, "Cut-off", test_exact_cut_at_ties, test_never_excluded), 120);
    return s;
}
