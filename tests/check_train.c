/* check_train.c - the copy task, training steps, exact resume, NaN stops,
 * greedy decoding (Section 5). Tiny models and few steps: it stays fast. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "model/model.h"
#include "ref/nn.h"
#include "model/train.h"
#include "io/checkpoint.h"
#include "task/copy_task.h"
#include "testutil.h"

/* ---- helpers --------------------------------------------------------------- */

/* N=1, d_model=16, d_ff=32, h=2: a few thousand parameters, a step in well
 * under a millisecond. Dropout 0.1 so the dropout RNG matters for resume. */
static Config tiny_config(float dropout) {
    Config c = test_config(1, 16, 32, 2, 8, 8, COPY_VOCAB, 16, dropout);
    c.pad_id = COPY_PAD;
    return c;
}

static void build_tiny(Model *m, float dropout, int B, uint64_t seed) {
    char err[256];
    Config c = tiny_config(dropout);
    memset(m, 0, sizeof *m);
    int rc = model_build(m, &c, B, COPY_LEN, COPY_LEN - 1, seed, err, sizeof err);
    ck_assert_msg(rc == 0, "model_build: %s", err);
}

static TrainHyper tiny_hyper(float eps_ls) {
    TrainHyper hp = train_hyper_paper();
    hp.eps_ls = eps_ls;
    hp.warmup = 20;
    return hp;
}

static void init_trainer(Trainer *t, Model *m, float eps_ls, int B, uint64_t data_seed) {
    char err[256];
    TrainHyper hp = tiny_hyper(eps_ls);
    int rc = trainer_init(t, m, &hp, B, COPY_LEN, data_seed, err, sizeof err);
    ck_assert_msg(rc == 0, "trainer_init: %s", err);
}

/* one step on the next copy batch from t's data stream, as chapter 08 takes it */
static TrainStatus copy_step(Trainer *t, StepStats *st) {
    CopyBatch cb;
    ck_assert(copy_batch_alloc(&cb, t->B, t->T) == 0);
    TrainStatus s = copy_train_step(t, &cb, st);
    copy_batch_free(&cb);
    return s;
}

static void temp_path(char *buf, size_t len, const char *tag) {
    const char *dir = getenv("BUILD_DIR");
    snprintf(buf, len, "%s/check_train_%s_%d.ckpt", dir && *dir ? dir : "/tmp", tag, (int)getpid());
}

/* ---- Core: the data ------------------------------------------------------- */

START_TEST(test_copy_batch_layout) {
    enum { B = 64, T = COPY_LEN };
    int src[B * T], tin[B * (T - 1)], tout[B * (T - 1)];
    Rng r;
    rng_seed(&r, 3);
    copy_batch(src, tin, tout, B, T, COPY_VOCAB, &r);
    int seen[COPY_VOCAB] = {0};
    for (int b = 0; b < B; b++) {
        ck_assert_int_eq(src[b * T], COPY_START);
        for (int t = 1; t < T; t++) {
            int x = src[b * T + t];
            ck_assert_msg(x >= 2 && x < COPY_VOCAB, "token %d at (%d,%d) is not a word", x, b, t);
            seen[x]++;
        }
        for (int t = 0; t < T - 1; t++) {
            ck_assert_int_eq(tin[b * (T - 1) + t], src[b * T + t]);       /* shifted right */
            ck_assert_int_eq(tout[b * (T - 1) + t], src[b * T + t + 1]);  /* the copy */
        }
    }
    for (int v = 2; v < COPY_VOCAB; v++) ck_assert_msg(seen[v] > 0, "word %d never drawn", v);
    /* the same seed gives the same batch */
    int src2[B * T];
    rng_seed(&r, 3);
    copy_batch(src2, tin, tout, B, T, COPY_VOCAB, &r);
    ck_assert(memcmp(src, src2, sizeof src) == 0);
}
END_TEST

/* Label smoothing (Sec. 5.4): every target row sums to 1, padding gets 0,
 * the target 1 - eps, and the loss floor is the entropy of that row:
 * V = 11, eps = 0.1: -(0.9 ln 0.9) - 0.1 ln(0.1/9) = 0.0948245 + 0.4499810 = 0.5448054. */
START_TEST(test_smoothed_targets_and_floor) {
    float dist[COPY_VOCAB];
    for (int target = 2; target < COPY_VOCAB; target++) {
        smoothed_targets(dist, target, COPY_VOCAB, 0.1f, COPY_PAD);
        double sum = 0;
        for (int v = 0; v < COPY_VOCAB; v++) sum += dist[v];
        ck_assert_double_eq_tol(sum, 1.0, 1e-6);
        ck_assert(dist[COPY_PAD] == 0.0f);
        ck_assert_double_eq_tol(dist[target], 0.9, 1e-7);
        ck_assert_double_eq_tol(dist[COPY_START], 0.1 / 9, 1e-7);
        /* the floor is -sum dist log dist */
        double h = 0;
        for (int v = 0; v < COPY_VOCAB; v++)
            if (dist[v] > 0) h -= dist[v] * log(dist[v]);
        ck_assert_double_eq_tol(h, smoothed_loss_floor(COPY_VOCAB, 0.1f, COPY_PAD), 1e-6);
    }
    ck_assert_double_eq_tol(smoothed_loss_floor(COPY_VOCAB, 0.1f, COPY_PAD), 0.5448054, 1e-6);
    ck_assert(smoothed_loss_floor(COPY_VOCAB, 0.0f, COPY_PAD) == 0.0);
    ck_assert_double_eq_tol(smoothed_loss_floor(COPY_VOCAB, 0.1f, -1),
                            -0.9 * log(0.9) - 0.1 * log(0.01), 1e-7);
}
END_TEST

/* ---- Core: training ---------------------------------------------------------- */

START_TEST(test_loss_decreases) {
    Model m;
    Trainer t;
    build_tiny(&m, 0.0f, 16, 1);
    init_trainer(&t, &m, 0.1f, 16, 2);
    double first = 0, last = 0;
    StepStats st;
    for (int s = 0; s < 60; s++) {
        ck_assert_int_eq(copy_step(&t, &st), TRAIN_OK);
        ck_assert(isfinite(st.loss) && st.lr > 0 && st.grad_norm > 0);
        ck_assert_int_eq(st.n_tokens, 16 * (COPY_LEN - 1));
        if (s < 5) first += st.loss / 5;
        if (s >= 55) last += st.loss / 5;
    }
    ck_assert_uint_eq(t.step, 60);
    /* at the start: about ln 10 = 2.3 (10 classes besides padding, uniform) */
    ck_assert_msg(first > 1.8, "first losses %.3f", first);
    ck_assert_msg(last < first - 0.3, "loss went from %.3f to %.3f", first, last);
    trainer_free(&t);
    model_free(&m);
}
END_TEST

/* copy_train_step draws its batch with copy_batch from the trainer's data
 * stream, then trains on it: the same losses and weights as drawing the
 * batch by hand and calling train_step_global, and the stream ends where it
 * would (what keeps chapter 08's losses, and a resumed run, the same). */
START_TEST(test_copy_step_is_batch_then_step) {
    enum { B = 8, T = COPY_LEN };
    Model a, b;
    Trainer ta, tb;
    build_tiny(&a, 0.1f, B, 51);
    build_tiny(&b, 0.1f, B, 51);
    init_trainer(&ta, &a, 0.1f, B, 52);
    init_trainer(&tb, &b, 0.1f, B, 52);
    int src[B * T], tin[B * (T - 1)], tout[B * (T - 1)];
    for (int s = 0; s < 3; s++) {
        StepStats sa, sb;
        ck_assert_int_eq(copy_step(&ta, &sa), TRAIN_OK);
        copy_batch(src, tin, tout, B, T, COPY_VOCAB, &tb.data_rng);
        ck_assert_int_eq(train_step_global(&tb, src, tin, tout, B, T, T - 1, &sb), TRAIN_OK);
        ck_assert(sa.loss == sb.loss);
        ck_assert_uint_eq(ta.data_rng.state, tb.data_rng.state);
    }
    ck_assert(memcmp(a.params.mem, b.params.mem, a.params.n * sizeof(float)) == 0);
    trainer_free(&ta), trainer_free(&tb);
    model_free(&a), model_free(&b);
}
END_TEST

/* One fixed batch, trained on over and over, is learned by heart. Without
 * smoothing the loss goes to ~0; with eps = 0.1 it can only reach the floor
 * 0.5448 (the entropy of the smoothed targets), never below. After that,
 * greedy decoding reproduces the memorised sequences. */
START_TEST(test_overfit_one_batch) {
    enum { B = 4, T = COPY_LEN };
    float eps = _i == 0 ? 0.0f : 0.1f;
    double floor = smoothed_loss_floor(COPY_VOCAB, eps, COPY_PAD);
    int src[B * T], tin[B * (T - 1)], tout[B * (T - 1)];
    Rng r;
    rng_seed(&r, 11);
    copy_batch(src, tin, tout, B, T, COPY_VOCAB, &r);
    Model m;
    Trainer t;
    build_tiny(&m, 0.0f, B, 5);
    /* a gentler rate than the default factor 1: with one batch there is no
     * data noise, and a high rate only makes the loss bounce off the floor */
    char err[256];
    TrainHyper hp = tiny_hyper(eps);
    hp.factor = 0.3f;
    ck_assert_msg(trainer_init(&t, &m, &hp, B, T, 6, err, sizeof err) == 0, "%s", err);
    StepStats st = {0};
    double lowest = 1e9;
    for (int s = 0; s < 300; s++) {
        ck_assert_int_eq(train_step_batch(&t, src, tin, tout, B, T, T - 1, &st), TRAIN_OK);
        if (st.loss < lowest) lowest = st.loss;
    }
    ck_assert_msg(st.loss < floor + 0.02, "eps %.1f: loss %.4f, floor %.4f", eps, st.loss, floor);
    ck_assert_msg(lowest > floor - 1e-4, "eps %.1f: loss %.6f went below the floor %.6f", eps, lowest, floor);
    int ys[B * T];
    ck_assert_msg(copy_greedy(&m, ys, src, B, T, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < B * T; i++)
        ck_assert_msg(ys[i] == src[i], "decoded %d at %d, want %d", ys[i], i, src[i]);
    trainer_free(&t);
    model_free(&m);
}
END_TEST

/* Same seeds, same loss curve, bit for bit (dropout on). */
START_TEST(test_same_seed_same_curve) {
    enum { S = 15 };
    float loss[2][S];
    Model m2[2];
    for (int run = 0; run < 2; run++) {
        Trainer t;
        build_tiny(&m2[run], 0.1f, 8, 21);
        init_trainer(&t, &m2[run], 0.1f, 8, 22);
        StepStats st;
        for (int s = 0; s < S; s++) {
            ck_assert_int_eq(copy_step(&t, &st), TRAIN_OK);
            loss[run][s] = st.loss;
        }
        trainer_free(&t);
    }
    ck_assert(memcmp(loss[0], loss[1], sizeof loss[0]) == 0);
    ck_assert(memcmp(m2[0].params.mem, m2[1].params.mem, m2[0].params.n * sizeof(float)) == 0);
    /* and a different data seed gives a different curve (so the test can fail) */
    Trainer t;
    model_free(&m2[1]);
    build_tiny(&m2[1], 0.1f, 8, 21);
    init_trainer(&t, &m2[1], 0.1f, 8, 23);
    StepStats st;
    int differ = 0;
    for (int s = 0; s < S; s++) {
        copy_step(&t, &st);
        differ += st.loss != loss[0][s];
    }
    ck_assert_int_gt(differ, 0);
    trainer_free(&t);
    model_free(&m2[0]);
    model_free(&m2[1]);
}
END_TEST

/* 2K steps in one go == K steps, save, load, K steps: identical weights and
 * Adam moments, byte for byte. Dropout is on, so both RNG streams must be
 * restored for this to hold. */
START_TEST(test_resume_is_exact) {
    enum { K = 6, B = 8 };
    char path[512], err[256];
    temp_path(path, sizeof path, "resume");
    Model a, b;
    Trainer ta, tb;
    build_tiny(&a, 0.1f, B, 31);
    init_trainer(&ta, &a, 0.1f, B, 32);
    for (int s = 0; s < 2 * K; s++) ck_assert_int_eq(copy_step(&ta, NULL), TRAIN_OK);

    build_tiny(&b, 0.1f, B, 31);
    init_trainer(&tb, &b, 0.1f, B, 32);
    for (int s = 0; s < K; s++) ck_assert_int_eq(copy_step(&tb, NULL), TRAIN_OK);
    ck_assert_msg(trainer_save(&tb, path, err, sizeof err) == 0, "save: %s", err);
    trainer_free(&tb);
    model_free(&b);

    TrainHyper hp = tiny_hyper(0.1f);
    ck_assert_msg(trainer_resume(&tb, &b, path, &hp, B, COPY_LEN, B, err, sizeof err) == 0, "resume: %s", err);
    ck_assert_uint_eq(tb.step, K);
    for (int s = 0; s < K; s++) ck_assert_int_eq(copy_step(&tb, NULL), TRAIN_OK);

    ck_assert_uint_eq(tb.step, ta.step);
    ck_assert_uint_eq(a.params.n, b.params.n);
    ck_assert_msg(memcmp(a.params.mem, b.params.mem, a.params.n * sizeof(float)) == 0,
                  "resumed weights differ from the uninterrupted run");
    ck_assert(memcmp(ta.adam_m, tb.adam_m, ta.n * sizeof(float)) == 0);
    ck_assert(memcmp(ta.adam_v, tb.adam_v, ta.n * sizeof(float)) == 0);
    ck_assert_uint_eq(ta.data_rng.state, tb.data_rng.state);
    ck_assert_uint_eq(a.dropout_rng.state, b.dropout_rng.state);
    trainer_free(&ta);
    trainer_free(&tb);
    model_free(&a);
    model_free(&b);
    remove(path);
}
END_TEST

/* ---- Limits ------------------------------------------------------------------ */

/* A NaN weight makes the loss NaN: the step refuses, nothing changes, and
 * the checkpoint written before stays byte for byte what it was. */
START_TEST(test_nan_stops_and_keeps_checkpoint) {
    enum { B = 8 };
    char path[512], err[256];
    temp_path(path, sizeof path, "nan");
    Model m;
    Trainer t;
    build_tiny(&m, 0.1f, B, 41);
    init_trainer(&t, &m, 0.1f, B, 42);
    for (int s = 0; s < 3; s++) ck_assert_int_eq(copy_step(&t, NULL), TRAIN_OK);
    ck_assert_msg(trainer_save(&t, path, err, sizeof err) == 0, "save: %s", err);
    size_t len0;
    unsigned char *before = read_file_or_fail(path, &len0);

    size_t n = m.params.n;
    float *w = malloc(n * sizeof(float)), *am = malloc(n * sizeof(float));
    m.params.mem[0] = NAN;
    memcpy(w, m.params.mem, n * sizeof(float));
    memcpy(am, t.adam_m, n * sizeof(float));
    StepStats st;
    ck_assert_int_eq(copy_step(&t, &st), TRAIN_NONFINITE_LOSS);
    ck_assert(!isfinite(st.loss));
    ck_assert_uint_eq(t.step, 3);
    ck_assert(memcmp(w, m.params.mem, n * sizeof(float)) == 0);
    ck_assert(memcmp(am, t.adam_m, n * sizeof(float)) == 0);
    ck_assert_int_eq(all_finite(m.params.mem, n), 0);

    /* the caller (chapter 08) does not save after a failed step; the file
     * on disk is the last good one and still loads */
    size_t len1;
    unsigned char *after = read_file_or_fail(path, &len1);
    ck_assert_uint_eq(len0, len1);
    ck_assert(memcmp(before, after, len0) == 0);
    Model back;
    Trainer tb;
    TrainHyper hp = tiny_hyper(0.1f);
    ck_assert_msg(trainer_resume(&tb, &back, path, &hp, B, COPY_LEN, B, err, sizeof err) == 0, "%s", err);
    ck_assert(all_finite(back.params.mem, back.params.n));
    ck_assert_uint_eq(tb.step, 3);
    trainer_free(&tb);
    model_free(&back);
    free(before);
    free(after);
    free(w);
    free(am);
    trainer_free(&t);
    model_free(&m);
    remove(path);
}
END_TEST

START_TEST(test_all_finite) {
    float x[4] = {0, 1, -1e38f, 3};
    ck_assert_int_eq(all_finite(x, 4), 1);
    x[2] = INFINITY;
    ck_assert_int_eq(all_finite(x, 4), 0);
    x[2] = NAN;
    ck_assert_int_eq(all_finite(x, 4), 0);
    ck_assert_int_eq(all_finite(x, 0), 1);
}
END_TEST

/* Ids outside [0, 11) are refused before they reach the model. */
START_TEST(test_out_of_vocab_rejected) {
    Config c = tiny_config(0);
    char err[256];
    int good[COPY_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    ck_assert_int_eq(model_check_tokens(&c, good, COPY_LEN, "source", err, sizeof err), 0);
    int bad[COPY_LEN] = {1, 2, 3, 11, 5, 6, 7, 8, 9, 10};
    ck_assert_int_eq(model_check_tokens(&c, bad, COPY_LEN, "source", err, sizeof err), 2);
    ck_assert_msg(strstr(err, "11") != NULL, "message does not name the id: %s", err);
    bad[3] = -1;
    ck_assert_int_eq(model_check_tokens(&c, bad, COPY_LEN, "source", err, sizeof err), 2);
}
END_TEST

/* The same through the chapter program: a bad --decode or --resume is a
 * plain error, exit code 2, before any training. */
static int run_chapter(const char *args) {
    const char *dir = getenv("BUILD_DIR");
    return sh("%s/08_training %s >/dev/null 2>&1", dir && *dir ? dir : "build", args);
}
START_TEST(test_chapter_rejects_bad_input) {
    ck_assert_int_eq(run_chapter("--decode '2 3 4 5 6 7 8 9 11' --out /tmp/check_train_bad"), 2);
    ck_assert_int_eq(run_chapter("--decode '2 3 x' --out /tmp/check_train_bad"), 2);
    ck_assert_int_eq(run_chapter("--resume /nonexistent/ckpt --out /tmp/check_train_bad"), 2);
    ck_assert_int_eq(run_chapter("--d-model 30 --heads 4 --out /tmp/check_train_bad"), 2);
    /* --attn-layer / --attn-head are checked against the model built, not a
     * fixed range: layer 2 of a 1-layer model, head 3 of 2 heads */
    const char *tiny = "--layers 1 --d-model 16 --d-ff 32 --heads 2 --batch 8 --steps 2 --eval 0 --examples 0"
                       " --out /tmp/check_train_bad";
    char args[512];
    snprintf(args, sizeof args, "%s --attn-layer 2", tiny);
    ck_assert_int_eq(run_chapter(args), 2);
    snprintf(args, sizeof args, "%s --attn-head 3", tiny);
    ck_assert_int_eq(run_chapter(args), 2);
    snprintf(args, sizeof args, "%s --attn-layer 1 --attn-head 2 --attn-enc", tiny);
    ck_assert_int_eq(run_chapter(args), 0);
}
END_TEST

/* The whole program: a NaN at step 25 stops it with exit code 1, and the
 * checkpoint from step 20 is still there and resumes. */
START_TEST(test_chapter_nan_keeps_checkpoint) {
    char dir[64], args[768], path[512], err[256];
    fresh_dir(dir, sizeof dir, "check_train_nan");
    snprintf(args, sizeof args, "--layers 1 --d-model 16 --d-ff 32 --heads 2 --batch 8 --steps 30 "
             "--checkpoint-every 10 --nan-at 25 --eval 0 --examples 0 --out %s", dir);
    ck_assert_int_eq(run_chapter(args), 1);
    snprintf(path, sizeof path, "%s/copy.ckpt", dir);
    Model m;
    Trainer t;
    TrainHyper hp = tiny_hyper(0.1f);
    ck_assert_msg(trainer_resume(&t, &m, path, &hp, 8, COPY_LEN, 8, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(t.step, 20);
    ck_assert(all_finite(m.params.mem, m.params.n));
    trainer_free(&t);
    model_free(&m);
    remove_dir(dir);
}
END_TEST

/* Greedy decoding's shape and stopping rule (untrained model): copy_greedy,
 * then decode_greedy (decode.h) itself with an end symbol. */
START_TEST(test_greedy_shape_and_end) {
    enum { B = 3, T = COPY_LEN };
    Model m;
    build_tiny(&m, 0.0f, B, 51);
    int src[B * T], tin[B * (T - 1)], tout[B * (T - 1)], ys[B * T];
    Rng r;
    rng_seed(&r, 52);
    copy_batch(src, tin, tout, B, T, COPY_VOCAB, &r);
    char err[256];
    ck_assert_msg(copy_greedy(&m, ys, src, B, T, err, sizeof err) == 0, "%s", err);
    for (int b = 0; b < B; b++) {
        ck_assert_int_eq(ys[b * T], COPY_START);
        for (int j = 1; j < T; j++)   /* never the padding token */
            ck_assert(ys[b * T + j] > COPY_PAD && ys[b * T + j] < COPY_VOCAB);
    }
    /* Declare row 0's first output the end symbol: row 0 ends after it, the
     * others are unchanged up to where they emit it themselves, then pad. */
    int end = ys[1];
    Decoder d;
    ck_assert_msg(decoder_new(&d, &m, B, 1, T, T - 1, err, sizeof err) == 0, "%s", err);
    DecodeOpts o = decode_opts_paper(COPY_START, end);
    o.beam = 1, o.offset = -1;
    ck_assert_msg(decode_greedy(&d, &o, src, B, T, err, sizeof err) == 0, "%s", err);
    for (int b = 0; b < B; b++) {
        const int *y = d.out + (size_t)b * d.max_T;
        int j = 0;
        for (; j < T - 1; j++) {
            ck_assert_int_eq(y[j], ys[b * T + 1 + j]);
            if (y[j] == end) break;
        }
        ck_assert_int_eq(d.out_len[b], j < T - 1 ? j + 1 : T - 1);
        for (j++; j < T - 1; j++) ck_assert_int_eq(y[j], COPY_PAD);
    }
    ck_assert_int_eq(d.out_len[0], 1);
    decoder_free(&d);
    /* the accuracy of an untrained model is about chance (1/9 per token) */
    double tok;
    double exact = copy_exact_match(&m, 50, T, 7, &tok);
    ck_assert(exact >= 0 && exact < 0.1 && tok < 0.5);
    model_free(&m);
}
END_TEST

/* ---- capacity: buffers sized by the batches that run ----------------------- */

/* Two batch shapes under one token budget, in turn: 8 rows of (5, 4) tokens
 * (32 target positions) and 3 rows of (10, 9) (27). Sized per dimension,
 * the loss gradient holds 8 x 9 = 72 rows and the activations 8 x (10, 9);
 * sized by the batches, 32 rows and the larger batch's activations (the
 * trainer at exactly its capacity). Same weights and Adam moments, bit for
 * bit, dropout on. */
enum { CB = 8, CT = COPY_LEN };
static const int cap_batches[2][3] = {{8, 5, 4}, {3, 10, 9}};

START_TEST(test_row_capacity_same_weights) {
    char err[256];
    Config c = tiny_config(0.1f);
    TrainHyper hp = tiny_hyper(0.1f);
    size_t acts = 0;
    int rows = 0;
    for (int k = 0; k < 2; k++) {
        size_t a = model_acts_floats(&c, cap_batches[k][0], cap_batches[k][1], cap_batches[k][2]);
        acts = a > acts ? a : acts;
        int n = cap_batches[k][0] * cap_batches[k][2];
        rows = n > rows ? n : rows;
    }
    ck_assert_int_eq(rows, 32);
    Model m[2];
    Trainer t[2];
    build_tiny(&m[0], 0.1f, CB, 31);
    init_trainer(&t[0], &m[0], 0.1f, CB, 32);
    memset(&m[1], 0, sizeof m[1]);
    ck_assert_msg(model_build_cap(&m[1], &c, CB, CT, CT - 1, acts, 31, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(trainer_init_cap(&t[1], &m[1], &hp, CB, CT, rows, 32, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(t[0].max_rows, CB * (CT - 1));
    ck_assert_int_eq(t[1].max_rows, rows);
    ck_assert_uint_lt(m[1].acts_floats, m[0].acts_floats);
    int src[CB * CT], tin[CB * (CT - 1)], tout[CB * (CT - 1)];
    Rng r;
    rng_seed(&r, 33);
    for (int step = 0; step < 6; step++) {
        int B = cap_batches[step % 2][0], Ts = cap_batches[step % 2][1], Tt = cap_batches[step % 2][2];
        for (int i = 0; i < B * Ts; i++) src[i] = 2 + rng_int(&r, COPY_VOCAB - 2);
        for (int i = 0; i < B * Tt; i++) tin[i] = 1 + rng_int(&r, COPY_VOCAB - 1), tout[i] = 2 + rng_int(&r, 9);
        StepStats st[2];
        for (int j = 0; j < 2; j++) ck_assert_int_eq(train_step_batch(&t[j], src, tin, tout, B, Ts, Tt, &st[j]), TRAIN_OK);
        ck_assert(st[0].loss == st[1].loss);
    }
    ck_assert(memcmp(m[0].params.mem, m[1].params.mem, m[0].params.n * sizeof(float)) == 0);
    ck_assert(memcmp(t[0].adam_m, t[1].adam_m, t[0].n * sizeof(float)) == 0);
    ck_assert(memcmp(t[0].adam_v, t[1].adam_v, t[0].n * sizeof(float)) == 0);

    /* one position past the row capacity (4 rows of 9 targets = 36 > 32)
     * stops at an assertion before anything runs; in a child, so that
     * CK_FORK=no works too */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        train_step_batch(&t[1], src, tin, tout, 4, 9, 9, NULL);
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %d", status);
    for (int j = 0; j < 2; j++) trainer_free(&t[j]), model_free(&m[j]);
    /* a row capacity of 0 is a message */
    Model m0;
    Trainer t0;
    build_tiny(&m0, 0.1f, CB, 31);
    ck_assert_int_eq(trainer_init_cap(&t0, &m0, &hp, CB, CT, 0, 1, err, sizeof err), 2);
    trainer_free(&t0);
    model_free(&m0);
}
END_TEST

Suite *train_suite(void) {
    Suite *s = suite_create("train");
    TCase *core = suite_case(s, "Core", test_copy_batch_layout, test_smoothed_targets_and_floor,
                             test_loss_decreases, test_copy_step_is_batch_then_step,
                             test_same_seed_same_curve, test_resume_is_exact,
                             test_greedy_shape_and_end, test_row_capacity_same_weights);
    tcase_set_timeout(core, 60);
    tcase_add_loop_test(core, test_overfit_one_batch, 0, 2);
    TCase *lim = suite_case(s, "Limits", test_nan_stops_and_keeps_checkpoint, test_all_finite,
                            test_out_of_vocab_rejected, test_chapter_rejects_bad_input,
                            test_chapter_nan_keeps_checkpoint);
    tcase_set_timeout(lim, 60);
    return s;
}
