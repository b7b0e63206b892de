/* check_checkpoint.c - model_save / model_load and the CRC-32 under them.
 *
 * Core    CRC-32 check value; round trips are bit-exact, with and without
 *         the optimizer's TrainState.
 * Limits  every kind of bad file is refused with its own message and leaves
 *         the Model freed: truncated (at many offsets), a flipped byte,
 *         wrong magic, wrong version, trailing bytes, a config that does not
 *         match the tensors (shape, name, absurd size); a save that fails
 *         leaves the previous file as it was.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "checkpoint.h"
#include "model.h"
#include "rng.h"
#include "testutil.h"

static char dir[64];
static char path[128];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/aiyn_ckpt_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
}

static void teardown(void) {
    char p[160];
    snprintf(p, sizeof p, "%s.tmp", path);
    unlink(p);
    rmdir(p);
    unlink(path);
    rmdir(dir);
}

static Config small_config(int pre_ln) {
    Config c = {.N = 2, .d_model = 8, .d_ff = 12, .h = 2, .d_k = 4, .d_v = 3,
                .vocab = 11, .max_len = 16, .dropout = 0.1f, .pre_ln = pre_ln, .pad_id = 0};
    return c;
}

/* A model whose every parameter is random (LayerNorm and biases included). */
static void build_random(Model *m, int pre_ln, uint64_t seed) {
    char err[256];
    Config c = small_config(pre_ln);
    ck_assert_int_eq(model_build(m, &c, 2, 5, 5, seed, err, sizeof err), 0);
    Rng r;
    rng_seed(&r, seed);
    rng_fill_normal(&r, m->params.mem, m->params.n, 0.0f, 1.0f);
}

static unsigned char *read_all(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n ? *n : 1);
    ck_assert_uint_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void write_all(const char *p, const unsigned char *b, size_t n) {
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Recomputes the trailing CRC after an edit, so the file passes the
 * checksum and the deeper checks are what must catch it. */
static void fix_crc(unsigned char *b, size_t n) {
    uint32_t c = crc32_update(0, b, n - 4);
    for (int i = 0; i < 4; i++) b[n - 4 + i] = (unsigned char)(c >> (8 * i));
}

static void put32(unsigned char *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

/* Loads path expecting failure with `want` in the message and a freed model. */
static void expect_reject(const char *want, const char *what) {
    Model m;
    char err[512] = "";
    int rc = model_load(&m, path, 2, 5, 5, NULL, NULL, err, sizeof err);
    ck_assert_msg(rc != 0, "%s: load accepted a bad file", what);
    ck_assert_msg(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", what, err, want);
    ck_assert_ptr_null(m.params.mem);
    model_free(&m);
}

/* ============================================================================
 * Core
 * ========================================================================== */

START_TEST(test_crc32_check_value) {
    ck_assert_uint_eq(crc32_update(0, "123456789", 9), 0xCBF43926u);
    ck_assert_uint_eq(crc32_update(0, "", 0), 0u);
    /* chaining: the CRC of "1234" then "56789" is the CRC of the whole */
    ck_assert_uint_eq(crc32_update(crc32_update(0, "1234", 4), "56789", 5), 0xCBF43926u);
}
END_TEST

START_TEST(test_round_trip_weights) {
    int pre_ln = _i;
    Model a, b;
    build_random(&a, pre_ln, 100 + _i);
    char err[256] = "";
    ck_assert_msg(model_save(&a, path, NULL, err, sizeof err) == 0, "%s", err);
    int has = -1;
    TrainState ts = {0};
    ck_assert_msg(model_load(&b, path, 2, 5, 5, &ts, &has, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(has, 0);
    ck_assert_int_eq(memcmp(&a.cfg, &b.cfg, sizeof a.cfg), 0);
    ck_assert_uint_eq(a.params.n, b.params.n);
    ck_assert_int_eq(memcmp(a.params.mem, b.params.mem, a.params.n * sizeof(float)), 0);
    /* same weights, same outputs, bit for bit */
    int src[5] = {1, 2, 3, 4, 5}, tgt[3] = {1, 6, 7};
    float la[33];
    memcpy(la, model_forward(&a, src, tgt, 1, 5, 3, 0), sizeof la);
    ck_assert_close_arrays(model_forward(&b, src, tgt, 1, 5, 3, 0), la, 33, 0.0);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_int_ne(access(tmp, F_OK), 0);   /* no temporary left behind */
    model_free(&a);
    model_free(&b);
}
END_TEST

START_TEST(test_round_trip_train_state) {
    Model a, b;
    build_random(&a, 0, 7);
    size_t n = a.params.n;
    float *m1 = malloc(n * sizeof(float)), *v1 = malloc(n * sizeof(float));
    float *m2 = calloc(n, sizeof(float)), *v2 = calloc(n, sizeof(float));
    Rng r;
    rng_seed(&r, 8);
    rng_fill_normal(&r, m1, n, 0.0f, 1e-3f);
    for (size_t i = 0; i < n; i++) v1[i] = rng_uniform(&r) * 1e-6f;
    TrainState ts = {.step = 123456789012ull, .rng_state = {0xDEADBEEFCAFEF00Dull, 42}, .adam_m = m1, .adam_v = v1};
    char err[256] = "";
    ck_assert_msg(model_save(&a, path, &ts, err, sizeof err) == 0, "%s", err);

    TrainState back = {.adam_m = m2, .adam_v = v2};
    int has = 0;
    ck_assert_msg(model_load(&b, path, 1, 1, 1, &back, &has, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(has, 1);
    ck_assert(back.step == ts.step);
    ck_assert(back.rng_state[0] == ts.rng_state[0] && back.rng_state[1] == ts.rng_state[1]);
    ck_assert_int_eq(memcmp(m1, m2, n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(v1, v2, n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a.params.mem, b.params.mem, n * sizeof(float)), 0);
    model_free(&b);
    /* the same file, weights only */
    ck_assert_msg(model_load(&b, path, 1, 1, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(memcmp(a.params.mem, b.params.mem, n * sizeof(float)), 0);
    model_free(&b);
    model_free(&a);
    free(m1), free(v1), free(m2), free(v2);
}
END_TEST

/* ============================================================================
 * Limits
 * ========================================================================== */

/* Saves a model and returns the file's bytes for editing. */
static unsigned char *saved_bytes(size_t *n, int with_ts) {
    Model a;
    build_random(&a, 0, 3);
    float *mv = calloc(2 * a.params.n, sizeof(float));
    TrainState ts = {.step = 5, .adam_m = mv, .adam_v = mv + a.params.n};
    char err[256] = "";
    ck_assert_msg(model_save(&a, path, with_ts ? &ts : NULL, err, sizeof err) == 0, "%s", err);
    model_free(&a);
    free(mv);
    return read_all(path, n);
}

START_TEST(test_truncated) {
    size_t n;
    unsigned char *b = saved_bytes(&n, _i);
    size_t cuts[] = {0, 5, 8, 40, CKPT_HEADER_BYTES - 1, CKPT_HEADER_BYTES, 100, n / 2, n - 5, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_all(path, b, cuts[i]);
        char what[64];
        snprintf(what, sizeof what, "cut at %zu of %zu", cuts[i], n);
        expect_reject("truncated", what);
    }
    free(b);
}
END_TEST

START_TEST(test_flipped_byte) {
    size_t n;
    unsigned char *b = saved_bytes(&n, 1);
    /* in the config, in the optimizer state, in a tensor, in the CRC itself */
    size_t where[] = {CKPT_OFF_CONFIG + 5, CKPT_HEADER_BYTES + 40, n / 2, n - 20, n - 1};
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        b[where[i]] ^= 0x10;
        write_all(path, b, n);
        char what[64];
        snprintf(what, sizeof what, "byte %zu flipped", where[i]);
        expect_reject("checksum", what);
        b[where[i]] ^= 0x10;
    }
    free(b);
}
END_TEST

START_TEST(test_wrong_magic_version_trailing) {
    size_t n;
    unsigned char *b = saved_bytes(&n, 0);
    b[0] = 'X';
    write_all(path, b, n);
    expect_reject("not a checkpoint", "wrong magic");
    b[0] = 'A';
    put32(b + CKPT_OFF_VERSION, 2);
    write_all(path, b, n);
    expect_reject("version 2", "wrong version");
    put32(b + CKPT_OFF_VERSION, CKPT_VERSION);
    unsigned char *longer = malloc(n + 3);
    memcpy(longer, b, n);
    memset(longer + n, 0, 3);
    write_all(path, longer, n + 3);
    expect_reject("after the end", "trailing bytes");
    free(longer);
    /* the file is fine again once restored */
    write_all(path, b, n);
    Model m;
    char err[256] = "";
    ck_assert_msg(model_load(&m, path, 1, 1, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
    model_free(&m);
    free(b);
}
END_TEST

START_TEST(test_inconsistent_with_valid_crc) {
    size_t n;
    unsigned char *b = saved_bytes(&n, 0);
    unsigned char *e = malloc(n);

    /* d_ff 12 -> 10 in the config: the FFN tensors no longer fit it */
    memcpy(e, b, n);
    put32(e + CKPT_OFF_CONFIG + 8, 10);
    fix_crc(e, n);
    write_all(path, e, n);
    expect_reject("encoder.0.ffn.w1", "config d_ff edited");

    /* a tensor renamed: "embed" -> "embex" */
    memcpy(e, b, n);
    ck_assert_int_eq(memcmp(e + CKPT_HEADER_BYTES + 4, "embed", 5), 0);
    e[CKPT_HEADER_BYTES + 4 + 4] = 'x';
    fix_crc(e, n);
    write_all(path, e, n);
    expect_reject("embex", "tensor renamed");

    /* an absurd vocabulary: refused by size before anything is allocated */
    memcpy(e, b, n);
    put32(e + CKPT_OFF_CONFIG + 24, 1 << 24);
    fix_crc(e, n);
    write_all(path, e, n);
    expect_reject("parameters", "vocab 16M in a small file");

    /* an invalid config (h = 0) */
    memcpy(e, b, n);
    put32(e + CKPT_OFF_CONFIG + 12, 0);
    fix_crc(e, n);
    write_all(path, e, n);
    expect_reject("invalid config", "h = 0");

    /* wrong tensor count */
    memcpy(e, b, n);
    put32(e + CKPT_OFF_NTENSORS, 3);
    fix_crc(e, n);
    write_all(path, e, n);
    expect_reject("tensors", "tensor count");
    free(e);
    free(b);
}
END_TEST

START_TEST(test_missing_and_not_a_file) {
    snprintf(path, sizeof path, "%s/does-not-exist.ckpt", dir);
    expect_reject("cannot open", "missing file");
    snprintf(path, sizeof path, "%s", dir);
    expect_reject("not a regular file", "a folder");
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
}
END_TEST

/* A save that fails must leave the old file exactly as it was. */
START_TEST(test_failed_save_keeps_old_file) {
    Model a, b, c;
    build_random(&a, 0, 1);
    build_random(&b, 0, 2);
    char err[256] = "", tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_msg(model_save(&a, path, NULL, err, sizeof err) == 0, "%s", err);
    size_t n0;
    unsigned char *before = read_all(path, &n0);

    /* 1: the disk fills up while writing (the temporary is /dev/full) */
    if (access("/dev/full", W_OK) == 0) {
        ck_assert_int_eq(symlink("/dev/full", tmp), 0);
        ck_assert_int_ne(model_save(&b, path, NULL, err, sizeof err), 0);
        ck_assert_msg(strstr(err, "No space") != NULL, "message: %s", err);
        ck_assert_int_ne(access(tmp, F_OK), 0);   /* the temporary was removed */
    }
    /* 2: the temporary cannot even be created */
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    ck_assert_int_ne(model_save(&b, path, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot create") != NULL, "message: %s", err);
    rmdir(tmp);

    size_t n1;
    unsigned char *after = read_all(path, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert_int_eq(memcmp(before, after, n0), 0);
    ck_assert_msg(model_load(&c, path, 1, 1, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(memcmp(c.params.mem, a.params.mem, a.params.n * sizeof(float)), 0);
    /* and a save that works replaces it */
    ck_assert_msg(model_save(&b, path, NULL, err, sizeof err) == 0, "%s", err);
    model_free(&c);
    ck_assert_msg(model_load(&c, path, 1, 1, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(memcmp(c.params.mem, b.params.mem, b.params.n * sizeof(float)), 0);
    free(before);
    free(after);
    model_free(&a);
    model_free(&b);
    model_free(&c);
}
END_TEST

Suite *checkpoint_suite(void) {
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("Core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_crc32_check_value);
    tcase_add_loop_test(tc, test_round_trip_weights, 0, 2);
    tcase_add_test(tc, test_round_trip_train_state);
    suite_add_tcase(s, tc);

    tc = tcase_create("Limits");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_truncated, 0, 2);
    tcase_add_test(tc, test_flipped_byte);
    tcase_add_test(tc, test_wrong_magic_version_trailing);
    tcase_add_test(tc, test_inconsistent_with_valid_crc);
    tcase_add_test(tc, test_missing_and_not_a_file);
    tcase_add_test(tc, test_failed_save_keeps_old_file);
    suite_add_tcase(s, tc);
    return s;
}
