/* check_checkpoint.c - model_save / model_load, trainer_save / trainer_resume
 * (io/checkpoint.h) and the CRC-32 under them (core/fileio.h).
 *
 * Core    CRC-32 check value; round trips are bit-exact, with and without
 *         the optimizer's TrainState; Config's one list of fields (every
 *         field once, in the file's order); checkpoint_of_run tells this
 *         run's saves from another run's, naming what differs.
 * Limits  every kind of bad file is refused with its own message and leaves
 *         the Model freed: truncated (at many offsets), a flipped byte,
 *         wrong magic, wrong version, trailing bytes, a config that does not
 *         match the tensors (shape, name, absurd size); a save that fails
 *         leaves the previous file as it was.
 * Hostile files a checkpoint replaced while it is being resumed (read once),
 *         a huge max_len or a header stretched to gigabytes (refused in
 *         milliseconds), a FIFO (refused, no hang), NaN/inf in the weights or
 *         in Adam's state (never saved, never loaded), a symlink planted
 *         where a fixed temporary name used to be, two runs saving to one
 *         path at once, escape sequences in a tensor name, a full disk.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "core/fileio.h"
#include "io/checkpoint.h"
#include "model/model.h"
#include "core/rng.h"
#include "model/train.h"
#include "text/bpe.h"
#include "text/copy_data.h"
#include "testutil.h"

static char dir[64];
static char path[128];

static void setup(void) {
    fresh_dir(dir, sizeof dir, "check_checkpoint");
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
}

static void teardown(void) { remove_dir(dir); }   /* whatever a test left in its folder */

/* A model whose every parameter is random (LayerNorm and biases included). */
static void build_random(Model *m, int pre_ln, uint64_t seed) {
    char err[256];
    Config c = test_config_tiny(0.1f);
    c.pre_ln = pre_ln;
    ck_assert_int_eq(model_build(m, &c, 2, 5, 5, seed, err, sizeof err), 0);
    Rng r;
    rng_seed(&r, seed);
    rng_fill_normal(&r, m->params.mem, m->params.n, 0.0f, 1.0f);
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

/* Writes the n edited bytes e to path with their CRC recomputed (so the
 * checksum passes and the deeper checks must catch the edit), then
 * expect_reject(want, what). */
static void expect_reject_edited(unsigned char *e, size_t n, const char *want, const char *what) {
    fix_crc(e, n);
    write_file(path, e, n);
    expect_reject(want, what);
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

/* Table 3 (E): the learned table travels in the file as "pos_embed", the
 * option as flags bit 1 (the 44-byte config had no spare field); a file
 * whose bit is cleared is then inconsistent, and refused as such. */
START_TEST(test_round_trip_learned_pe) {
    char err[256] = "";
    Config c = test_config_tiny(0.1f);
    c.pos = POS_LEARNED;
    Model a, b;
    ck_assert_int_eq(model_build(&a, &c, 2, 5, 5, 7, err, sizeof err), 0);
    Rng r;
    rng_seed(&r, 7);
    rng_fill_normal(&r, a.params.mem, a.params.n, 0.0f, 1.0f);
    ck_assert_msg(model_save(&a, path, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(model_load(&b, path, 2, 5, 5, NULL, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(b.cfg.pos, POS_LEARNED);
    ck_assert_int_eq(memcmp(&a.cfg, &b.cfg, sizeof a.cfg), 0);
    ck_assert_ptr_nonnull(b.params.pos_embed);
    ck_assert_int_eq(memcmp(a.params.mem, b.params.mem, a.params.n * sizeof(float)), 0);
    int src[5] = {1, 2, 3, 4, 5}, tgt[3] = {1, 6, 7};
    float la[33];
    memcpy(la, model_forward(&a, src, tgt, 1, 5, 3, 0), sizeof la);
    ck_assert_close_arrays(model_forward(&b, src, tgt, 1, 5, 3, 0), la, 33, 0.0);
    model_free(&b);
    size_t n;
    unsigned char *e = read_file_or_fail(path, &n);
    ck_assert_uint_eq(e[CKPT_OFF_FLAGS] & CKPT_FLAG_LEARNED_PE, CKPT_FLAG_LEARNED_PE);
    e[CKPT_OFF_FLAGS] &= (unsigned char)~CKPT_FLAG_LEARNED_PE;
    fix_crc(e, n);
    write_file(path, e, n);
    expect_reject("inconsistent", "learned-PE file with its flag cleared");
    free(e);
    model_free(&a);
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

/* Config's fields are listed once (CONFIG_FIELDS): every field of the
 * struct exactly once, the 4-byte block in the file's order, and
 * config_differs names the field that differs, dropout aside. */
START_TEST(test_config_fields) {
    static const char *const order[CONFIG_N_FIELDS] = {"N", "d_model", "d_ff", "h", "d_k", "d_v", "vocab",
                                                       "max_len", "dropout", "pre_ln", "pad_id", "pos", "arch",
                                                       "norm", "ffn"};
    size_t bytes = 0;
    for (int i = 0; i < CONFIG_N_FIELDS; i++) {
        ck_assert_str_eq(CONFIG_FIELDS[i].name, order[i]);
        for (int j = 0; j < i; j++) ck_assert_uint_ne(CONFIG_FIELDS[i].offset, CONFIG_FIELDS[j].offset);
        ck_assert_uint_lt(CONFIG_FIELDS[i].offset, sizeof(Config));
        bytes += 4;
    }
    ck_assert_uint_eq(bytes, sizeof(Config));   /* no field of Config left out of the list */
    ck_assert_int_eq(CONFIG_FIELDS[8].kind, CFG_F32);
    ck_assert_int_eq(CONFIG_FIELDS[11].kind, CFG_FLAG);
    ck_assert_int_eq(CONFIG_FIELDS[12].kind, CFG_FLAG);
    ck_assert_int_eq(CONFIG_FIELDS[13].kind, CFG_FLAG);
    ck_assert_int_eq(CONFIG_FIELDS[14].kind, CFG_FLAG);
    Config a = test_config_tiny(0.1f), b;
    char why[96] = "";
    ck_assert_int_eq(config_field_int(&a, &CONFIG_FIELDS[3]), a.h);
    b = a, b.dropout = 0.5f;
    ck_assert_int_eq(config_differs(&a, &b, why, sizeof why), 0);   /* a run's setting, not the model */
    for (int i = 0; i < CONFIG_N_FIELDS; i++) {
        if (CONFIG_FIELDS[i].kind == CFG_F32) continue;
        b = a;
        int v = config_field_int(&a, &CONFIG_FIELDS[i]) + 1;
        memcpy((char *)&b + CONFIG_FIELDS[i].offset, &v, sizeof v);
        ck_assert_int_eq(config_differs(&b, &a, why, sizeof why), 1);
        char want[96];
        snprintf(want, sizeof want, "%s %d, this run's %d", CONFIG_FIELDS[i].name, v, v - 1);
        ck_assert_str_eq(why, want);
    }
}
END_TEST

/* A vocabulary learned from sentences s[0..n) (both sides) */
static void learn_vocab(Bpe *b, char **s, int n) {
    char err[256];
    ck_assert_msg(bpe_learn(b, s, n, s, n, 40, err, sizeof err) == 0, "%s", err);
}

/* checkpoint_of_run: a save of this run (config, step, data RNG, the
 * vocabulary beside it) is one, every other file is not, and says why */
START_TEST(test_checkpoint_of_run) {
    char *text[] = {"the man sees the dog", "der Mann sieht den Hund"}, *other[] = {"a b c", "x y z"};
    Bpe bpe, bpe2;
    learn_vocab(&bpe, text, 2);
    learn_vocab(&bpe2, other, 2);
    char err[256] = "", why[512] = "", bp[160];
    Config c = test_config_tiny(0.1f);
    c.vocab = bpe.vocab;
    Model a, back;
    ck_assert_int_eq(model_build(&a, &c, 1, 4, 4, 5, err, sizeof err), 0);
    float *mv = calloc(2 * a.params.n, sizeof(float));
    TrainState ts = {.step = 50, .rng_state = {777, 9}, .adam_m = mv, .adam_v = mv + a.params.n};
    ck_assert_msg(model_save(&a, path, &ts, err, sizeof err) == 0, "%s", err);
    snprintf(bp, sizeof bp, "%s.bpe", path);
    CkptRun run = {.cfg = &a.cfg, .bpe = &bpe, .state = 1, .step = 50, .data_rng = 777};
    ck_assert_int_eq(checkpoint_of_run(path, &run, NULL, why, sizeof why), 1);   /* no .bpe yet */
    ck_assert_msg(strstr(why, ".bpe"), "why: %s", why);
    ck_assert_msg(bpe_save(&bpe, bp, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(checkpoint_of_run(path, &run, &back, why, sizeof why) == 0, "why: %s", why);
    ck_assert_int_eq(memcmp(a.params.mem, back.params.mem, a.params.n * sizeof(float)), 0);
    model_free(&back);
    Config h2 = a.cfg;
    h2.h = 4, h2.d_k = 2, h2.d_v = 2;
    CkptRun r2 = run;
    r2.cfg = &h2;
    ck_assert_int_eq(checkpoint_of_run(path, &r2, NULL, why, sizeof why), 2);
    ck_assert_str_eq(why, "another model (h 2, this run's 4)");
    r2 = run, r2.step = 60;
    ck_assert_int_eq(checkpoint_of_run(path, &r2, NULL, why, sizeof why), 2);
    ck_assert_str_eq(why, "it was saved at step 50, not 60");
    r2 = run, r2.data_rng = 778;
    ck_assert_int_eq(checkpoint_of_run(path, &r2, NULL, why, sizeof why), 2);
    ck_assert_str_eq(why, "another run (another --seed)");
    r2 = run, r2.bpe = &bpe2;
    ck_assert_int_eq(checkpoint_of_run(path, &r2, NULL, why, sizeof why), 2);
    ck_assert_str_eq(why, "its .bpe is another vocabulary (another corpus, --seed or --vocab)");
    r2 = run, r2.bpe = NULL, r2.state = 0;   /* the architecture alone, as averaging asks */
    ck_assert_int_eq(checkpoint_of_run(path, &r2, NULL, why, sizeof why), 0);
    /* weights only: no training state to know the run by */
    ck_assert_msg(model_save(&a, path, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(checkpoint_of_run(path, &run, NULL, why, sizeof why), 2);
    ck_assert_str_eq(why, "weights only, no training state");
    remove(bp);
    remove(path);
    ck_assert_int_eq(checkpoint_of_run(path, &run, NULL, why, sizeof why), 1);   /* no file at all */
    model_free(&a);
    free(mv);
    bpe_free(&bpe), bpe_free(&bpe2);
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
    return read_file_or_fail(path, n);
}

START_TEST(test_truncated) {
    size_t n;
    unsigned char *b = saved_bytes(&n, _i);
    size_t cuts[] = {0, 5, 8, 40, CKPT_HEADER_BYTES - 1, CKPT_HEADER_BYTES, 100, n / 2, n - 5, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file(path, b, cuts[i]);
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
        write_file(path, b, n);
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
    write_file(path, b, n);
    expect_reject("not a checkpoint", "wrong magic");
    b[0] = 'A';
    put32(b + CKPT_OFF_VERSION, 2);
    write_file(path, b, n);
    expect_reject("version 2", "wrong version");
    put32(b + CKPT_OFF_VERSION, CKPT_VERSION);
    unsigned char *longer = malloc(n + 3);
    memcpy(longer, b, n);
    memset(longer + n, 0, 3);
    write_file(path, longer, n + 3);
    expect_reject("has 3 bytes after the end", "trailing bytes");
    free(longer);
    /* the file is fine again once restored */
    write_file(path, b, n);
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

    /* d_ff 12 -> 10 in the config: the file's size no longer fits it */
    memcpy(e, b, n);
    put32(e + CKPT_OFF_CONFIG + 8, 10);
    expect_reject_edited(e, n, "its config implies a file of", "config d_ff edited");

    /* a tensor's shape edited: [11, 8] -> [8, 11], same size, same CRC */
    memcpy(e, b, n);
    put32(e + CKPT_HEADER_BYTES + 4 + 5 + 4, 8);
    put32(e + CKPT_HEADER_BYTES + 4 + 5 + 8, 11);
    expect_reject_edited(e, n, "tensor 0 is 'embed' [8, 11] in the file, but its config says 'embed' [11, 8]", "shape transposed");

    /* a tensor renamed: "embed" -> "embex" */
    memcpy(e, b, n);
    ck_assert_int_eq(memcmp(e + CKPT_HEADER_BYTES + 4, "embed", 5), 0);
    e[CKPT_HEADER_BYTES + 4 + 4] = 'x';
    expect_reject_edited(e, n, "embex", "tensor renamed");

    /* an absurd vocabulary: refused by size before anything is allocated */
    memcpy(e, b, n);
    put32(e + CKPT_OFF_CONFIG + 24, 1 << 24);
    expect_reject_edited(e, n, "parameters", "vocab 16M in a small file");

    /* an invalid config (h = 0) */
    memcpy(e, b, n);
    put32(e + CKPT_OFF_CONFIG + 12, 0);
    expect_reject_edited(e, n, "invalid config", "h = 0");

    /* wrong tensor count */
    memcpy(e, b, n);
    put32(e + CKPT_OFF_NTENSORS, 3);
    expect_reject_edited(e, n, "it has 3 tensors, its config needs", "tensor count");
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

/* ---- helpers for the hostile cases --------------------------------------- */

/* 1 if the two files hold the same bytes */
static int same_file(const char *a, const char *b) {
    size_t na, nb;
    unsigned char *x = read_file_or_fail(a, &na), *y = read_file_or_fail(b, &nb);
    int same = na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

/* files in dir other than the ones named (NULL-terminated): leftovers */
static int count_other_files(const char *d, const char *const *keep) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "ls -A '%s'", d);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[256];
    int other = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        int kept = 0;
        for (int i = 0; keep[i]; i++) kept |= !strcmp(line, keep[i]);
        if (!kept) {
            fprintf(stderr, "  leftover in %s: %s\n", d, line);
            other++;
        }
    }
    pclose(p);
    return other;
}

/* A save that fails must leave the old file exactly as it was, and nothing
 * else behind. */
START_TEST(test_failed_save_keeps_old_file) {
    Model a, b, c;
    build_random(&a, 0, 1);
    build_random(&b, 0, 2);
    char err[256] = "", copy[160];
    ck_assert_msg(model_save(&a, path, NULL, err, sizeof err) == 0, "%s", err);
    snprintf(copy, sizeof copy, "%s/copy", dir);
    size_t n0;
    unsigned char *before = read_file_or_fail(path, &n0);
    write_file(copy, before, n0);

    /* 1: the disk fills up while writing. RLIMIT_FSIZE makes every write
     * past 4 kB fail with EFBIG, as a full disk fails with ENOSPC (SIGXFSZ
     * ignored, or the kernel would kill the process instead). */
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        limit_file_size(4096);
        char e2[256] = "";
        int rc = model_save(&b, path, NULL, e2, sizeof e2);
        _exit(rc == 1 && strstr(e2, "File too large") && strstr(e2, "was left as it was") ? 0 : 10 + rc);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "save onto a full disk: child status %d", st);

    /* 2: the folder does not exist (nothing can be created there) */
    char nowhere[200];
    snprintf(nowhere, sizeof nowhere, "%s/no-such-folder/model.ckpt", dir);
    ck_assert_int_eq(model_save(&b, nowhere, NULL, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "cannot create") != NULL, "message: %s", err);

    ck_assert_msg(same_file(path, copy), "a failed save changed the old file");
    const char *keep[] = {"model.ckpt", "copy", NULL};
    ck_assert_int_eq(count_other_files(dir, keep), 0);   /* no temporary left behind */
    ck_assert_msg(model_load(&c, path, 1, 1, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(memcmp(c.params.mem, a.params.mem, a.params.n * sizeof(float)), 0);
    /* and a save that works replaces it */
    ck_assert_msg(model_save(&b, path, NULL, err, sizeof err) == 0, "%s", err);
    model_free(&c);
    ck_assert_msg(model_load(&c, path, 1, 1, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(memcmp(c.params.mem, b.params.mem, b.params.n * sizeof(float)), 0);
    free(before);
    model_free(&a);
    model_free(&b);
    model_free(&c);
}
END_TEST

/* Item 1 of issue 14: trainer_resume used to read the file twice - once for
 * the sizes, once for the data - and sized Adam's arrays by the first read,
 * so a bigger model saved to the same path in between was written past
 * them. The hook replaces the file right after the loader opens it. */
static char swap_from[160];
static int hook_calls;
static void replace_file(const char *p) {
    hook_calls++;
    if (swap_from[0]) {
        ck_assert_int_eq(rename(swap_from, p), 0);
        swap_from[0] = '\0';
    }
}

START_TEST(test_resume_file_replaced_mid_load) {
    char err[512] = "";
    TrainHyper hp = train_hyper_paper();
    Config small = test_config(1, 8, 8, 2, 4, 4, COPY_VOCAB, COPY_LEN, 0.0f);
    Config big = small;
    big.N = 2, big.d_model = 16, big.d_ff = 32, big.d_k = big.d_v = 8;
    Model ms, mb, m;
    Trainer ts, tb, t;
    ck_assert_int_eq(model_build(&ms, &small, 2, COPY_LEN, COPY_LEN - 1, 1, err, sizeof err), 0);
    ck_assert_int_eq(model_build(&mb, &big, 2, COPY_LEN, COPY_LEN - 1, 2, err, sizeof err), 0);
    ck_assert_int_eq(trainer_init(&ts, &ms, &hp, 2, COPY_LEN, 3, err, sizeof err), 0);
    ck_assert_int_eq(trainer_init(&tb, &mb, &hp, 2, COPY_LEN, 4, err, sizeof err), 0);
    ck_assert_msg(trainer_save(&ts, path, err, sizeof err) == 0, "%s", err);
    snprintf(swap_from, sizeof swap_from, "%s/big.ckpt", dir);
    ck_assert_msg(trainer_save(&tb, swap_from, err, sizeof err) == 0, "%s", err);

    hook_calls = 0;
    checkpoint_test_hook = replace_file;
    int rc = trainer_resume(&t, &m, path, &hp, 2, COPY_LEN, 2, err, sizeof err);
    checkpoint_test_hook = NULL;
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(hook_calls, 1);                 /* the file was opened once */
    ck_assert_uint_eq(m.params.n, ms.params.n);      /* and what was read is what was opened */
    ck_assert_uint_eq(t.n, m.params.n);
    ck_assert_int_eq(memcmp(m.params.mem, ms.params.mem, ms.params.n * sizeof(float)), 0);
    /* the path now holds the big model, and resuming it gives the big one */
    trainer_free(&t);
    model_free(&m);
    ck_assert_msg(trainer_resume(&t, &m, path, &hp, 2, COPY_LEN, 2, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(m.params.n, mb.params.n);
    trainer_free(&t), trainer_free(&ts), trainer_free(&tb);
    model_free(&m), model_free(&ms), model_free(&mb);
}
END_TEST

/* Item 2: a small valid file asking for a huge PE table, and a header
 * stretched to gigabytes, are refused at once - not after 35 s and 4 GB, or
 * 120 s of CRC. */
START_TEST(test_small_file_big_demands) {
    char err[512] = "";
    Config c = test_config(1, 32, 8, 2, 4, 4, 4, 16, 0.0f);
    Model a;
    ck_assert_int_eq(model_build(&a, &c, 1, 1, 1, 1, err, sizeof err), 0);
    ck_assert_msg(model_save(&a, path, NULL, err, sizeof err) == 0, "%s", err);
    model_free(&a);
    size_t n;
    unsigned char *b = read_file_or_fail(path, &n);

    /* max_len 2^20 x d_model 32 = 32M floats of PE in a file of a few kB */
    put32(b + CKPT_OFF_CONFIG + 28, 1u << 20);
    fix_crc(b, n);
    write_file(path, b, n);
    /* CPU seconds, not wall time: a busy machine stretches the wall clock
     * but not the work; reading 2 GiB or filling 32M floats costs seconds */
    clock_t t0 = clock();
    expect_reject("max_len 1048576 x d_model 32 = 3.36e+07 positional-encoding values (0.134 GB); "
                  "a checkpoint may ask for at most 4.19e+06", "huge max_len");
    ck_assert_msg(clock() - t0 < CLOCKS_PER_SEC, "refusing took %.1f CPU seconds",
                  (double)(clock() - t0) / CLOCKS_PER_SEC);

    /* the header declares 2 GiB and the file is stretched to match (sparse) */
    put32(b + CKPT_OFF_CONFIG + 28, 16);
    uint64_t big = 2ull << 30;
    for (int i = 0; i < 8; i++) b[CKPT_OFF_SIZE + i] = (unsigned char)(big >> (8 * i));
    write_file(path, b, n);
    ck_assert_int_eq(truncate(path, (off_t)big), 0);
    t0 = clock();
    expect_reject("implies a file of", "header stretched to 2 GiB");
    ck_assert_msg(clock() - t0 < CLOCKS_PER_SEC, "refusing took %.1f CPU seconds",
                  (double)(clock() - t0) / CLOCKS_PER_SEC);
    unlink(path);
    free(b);
}
END_TEST

/* Item 3: a FIFO is refused at once (opening one for reading waits for a
 * writer - forever). */
START_TEST(test_fifo_refused) {
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    alarm(5);   /* a hang fails the test instead of the whole suite */
    expect_reject("not a regular file (it is a FIFO)", "FIFO");
    alarm(0);
    unlink(path);
}
END_TEST

/* Item 5: NaN or inf anywhere in the state - weights, Adam's m or v - is
 * never saved, and a file holding one (CRC valid) is never loaded. */
START_TEST(test_nonfinite_never_saved_or_loaded) {
    Model a, b;
    build_random(&a, 0, 5);
    size_t n = a.params.n;
    float *mv = calloc(2 * n, sizeof(float));
    TrainState ts = {.step = 11, .adam_m = mv, .adam_v = mv + n};
    char err[512] = "";
    ck_assert_msg(model_save(&a, path, &ts, err, sizeof err) == 0, "%s", err);
    char copy[160];
    snprintf(copy, sizeof copy, "%s/good", dir);
    size_t n0;
    unsigned char *good = read_file_or_fail(path, &n0);
    write_file(copy, good, n0);

    mv[n + 7] = INFINITY;   /* adam_v[7], as Adam's v overflows when |g| > 1.8e19 */
    ck_assert_int_eq(model_save(&a, path, &ts, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "the state holds 1 non-finite value (the first: adam_v[7], element 7 of 'embed', "
                         "is inf)"), "message: %s", err);
    mv[n + 7] = 0;
    a.params.mem[3] = NAN;
    ck_assert_int_eq(model_save(&a, path, NULL, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "weights[3]") && strstr(err, "'embed'"), "message: %s", err);
    ck_assert_msg(same_file(path, copy), "a refused save changed the file");

    /* a CRC-valid file with one NaN in Adam's m: refused on load */
    size_t at = CKPT_HEADER_BYTES + 32 + 4 * 5;   /* adam_m[5] */
    uint32_t qnan = 0x7FC00000u;
    put32(good + at, qnan);
    fix_crc(good, n0);
    write_file(path, good, n0);
    expect_reject("holds 1 non-finite value (the first: adam_m[5], element 5 of 'embed', is nan): "
                  "a checkpoint must hold finite numbers only", "NaN in Adam's m");
    float *m2 = malloc(n * sizeof(float)), *v2 = malloc(n * sizeof(float));
    TrainState back = {.adam_m = m2, .adam_v = v2};
    ck_assert_int_ne(model_load(&b, path, 1, 1, 1, &back, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "finite"), "message: %s", err);
    free(m2), free(v2), free(mv), free(good);
    model_free(&a);
}
END_TEST

/* Item 6: the temporary used to be "path.tmp". A symlink planted there had
 * its target overwritten and path became that symlink. Now the temporary
 * is a fresh name, so the symlink is never followed. */
START_TEST(test_planted_symlink_not_followed) {
    char victim[160], link[160], err[256] = "";
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(link, sizeof link, "%s.tmp", path);
    write_text(victim, "precious\n");
    ck_assert_int_eq(symlink(victim, link), 0);
    Model a;
    build_random(&a, 0, 9);
    ck_assert_msg(model_save(&a, path, NULL, err, sizeof err) == 0, "%s", err);
    size_t nv;
    unsigned char *v = read_file_or_fail(victim, &nv);
    ck_assert_msg(nv == 9 && !memcmp(v, "precious\n", 9), "the symlink's target was overwritten");
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert_msg(S_ISREG(st.st_mode), "%s is not a regular file after the save", path);
    const char *keep[] = {"model.ckpt", "model.ckpt.tmp", "victim", NULL};
    ck_assert_int_eq(count_other_files(dir, keep), 0);
    free(v);
    model_free(&a);
}
END_TEST

/* Item 6: two runs saving to one path at once. With one fixed temporary
 * name they overwrote each other's half-written file and one rename failed
 * ("left as it was", which was false). Now every save succeeds and the file
 * is always one complete checkpoint. */
START_TEST(test_concurrent_saves) {
    fflush(stdout), fflush(stderr);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        ck_assert_int_ge(kids[k], 0);
        if (kids[k] == 0) {
            Model a;
            char e[256];
            build_random(&a, 0, 20 + k);
            for (int i = 0; i < 40; i++)
                if (model_save(&a, path, NULL, e, sizeof e)) _exit(1);
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st = 0;
        waitpid(kids[k], &st, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a concurrent save failed (child %d)", k);
    }
    Model m;
    char err[256];
    ck_assert_msg(model_load(&m, path, 1, 1, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
    model_free(&m);
    const char *keep[] = {"model.ckpt", NULL};
    ck_assert_int_eq(count_other_files(dir, keep), 0);
}
END_TEST

/* Item 7: a tensor name from the file reaches the message escaped: no
 * control byte (ESC starts terminal escape sequences) is echoed. */
START_TEST(test_tensor_name_escaped) {
    size_t n;
    unsigned char *b = saved_bytes(&n, 0);
    ck_assert_int_eq(memcmp(b + CKPT_HEADER_BYTES + 4, "embed", 5), 0);
    b[CKPT_HEADER_BYTES + 4] = 0x1b;      /* "\x1b" "mbed" */
    b[CKPT_HEADER_BYTES + 4 + 1] = 0x07;  /* BEL */
    fix_crc(b, n);
    write_file(path, b, n);
    Model m;
    char err[512] = "";
    ck_assert_int_ne(model_load(&m, path, 1, 1, 1, NULL, NULL, err, sizeof err), 0);
    for (const char *p = err; *p; p++) ck_assert_msg((unsigned char)*p >= 0x20, "control byte in: %s", err);
    ck_assert_msg(strstr(err, "\\x1b\\x07bed"), "message: %s", err);
    free(b);
}
END_TEST

Suite *checkpoint_suite(void) {
    Suite *s = suite_create("checkpoint");
    TCase *tc = suite_case(s, "Core", test_crc32_check_value, test_round_trip_learned_pe,
                           test_round_trip_train_state, test_config_fields, test_checkpoint_of_run);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_round_trip_weights, 0, 2);
    tc = suite_case(s, "Limits", test_flipped_byte, test_wrong_magic_version_trailing,
                    test_inconsistent_with_valid_crc, test_missing_and_not_a_file,
                    test_failed_save_keeps_old_file);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_truncated, 0, 2);
    tc = suite_case(s, "Hostile", test_resume_file_replaced_mid_load, test_small_file_big_demands,
                    test_fifo_refused, test_nonfinite_never_saved_or_loaded,
                    test_planted_symlink_not_followed, test_concurrent_saves,
                    test_tensor_name_escaped);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    return s;
}
