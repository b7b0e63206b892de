/* check_batch_file.c - the --batch-file format (common/io/batch_file.h) and
 * gradients on demand (tools/parity/grad_dump.h).
 *
 * Core     the README's example parses, pads with the pad id, shifts the
 *          target into what the decoder reads and what it predicts, and
 *          counts only real target tokens; the training step's gradient
 *          pass (train_grad) with dropout off gives the loss of its own
 *          formula, the same bits twice (with dropout on, other numbers),
 *          and the gradients grad_dump_write puts in the file.
 * Limits   every kind of bad batch gets rc 2 and a message naming the
 *          problem: syntax (no '|', two, empty side, short target, letters,
 *          negative or huge ids, nothing but comments), meaning (id outside
 *          the vocabulary, a pad id inside a sequence or first, too long for
 *          max_len, ragged lengths in a model without a pad id), files
 *          (missing, a FIFO, a NUL byte).
 * Programs parity_dump --batch-file exits 2 on a bad batch and writes
 *          the dumps on a good one.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/batch_file.h"
#include "model/train.h"
#include "parity/grad_dump.h"
#include "ref/nn.h"
#include "testutil.h"

static const char *EXAMPLE =
    "# lines starting with '#' and blank lines are ignored\n"
    "# one example per line: source ids | target ids\n"
    "3 4 5 6 3 7 2 | 1 8 9 10 11 2\n"
    "\n"
    "3 4 2         | 1 8 2\n";

/* the toy model the example's ids fit: vocabulary 12, padding id pad_id */
static Config toy_config(int pad_id) {
    Config c = test_config(1, 8, 16, 2, 4, 4, 12, 8, 0.1f);
    c.pad_id = pad_id;
    return c;
}

START_TEST(test_example_pads_and_shifts) {
    char err[256];
    BatchFile bf;
    Batch b;
    ck_assert_int_eq(batch_file_parse(EXAMPLE, "example", &bf, err, sizeof err), 0);
    ck_assert_int_eq(bf.n, 2);
    ck_assert_int_eq(bf.max_src, 7);
    ck_assert_int_eq(bf.max_tgt, 6);
    Config c = toy_config(0);
    ck_assert_int_eq(batch_pad(&bf, &c, &b, err, sizeof err), 0);
    ck_assert_int_eq(b.B, 2);
    ck_assert_int_eq(b.Ts, 7);
    ck_assert_int_eq(b.Tt, 5);
    const int src1[7] = {3, 4, 2, 0, 0, 0, 0};
    const int in0[5] = {1, 8, 9, 10, 11}, out0[5] = {8, 9, 10, 11, 2};
    const int in1[5] = {1, 8, 0, 0, 0}, out1[5] = {8, 2, 0, 0, 0};
    ck_assert_mem_eq(b.src + 7, src1, sizeof src1);
    ck_assert_mem_eq(b.tgt_in, in0, sizeof in0);
    ck_assert_mem_eq(b.tgt_out, out0, sizeof out0);
    ck_assert_mem_eq(b.tgt_in + 5, in1, sizeof in1);
    ck_assert_mem_eq(b.tgt_out + 5, out1, sizeof out1);
    ck_assert_int_eq(b.n_tokens, 7);     /* 5 + 2 predictions; padding counts for nothing */
    batch_free(&b);
    batch_file_free(&bf);
}
END_TEST

/* No pad id: equal lengths are fine (nothing to pad) */
START_TEST(test_no_pad_equal_lengths) {
    char err[256];
    BatchFile bf;
    Batch b;
    ck_assert_int_eq(batch_file_parse("3 4 | 1 5 6\n4 3 | 1 6 5\n", "t", &bf, err, sizeof err), 0);
    Config c = toy_config(-1);
    ck_assert_int_eq(batch_pad(&bf, &c, &b, err, sizeof err), 0);
    ck_assert_int_eq(b.n_tokens, 4);
    batch_free(&b);
    batch_file_free(&bf);
}
END_TEST

typedef struct {
    const char *text;
    int pad_id;          /* -2: syntax error expected (batch_pad not reached) */
    const char *why;     /* a piece of the message                           */
} Bad;

static const Bad BAD[] = {
    {"3 4 5 1 2\n", -2, "no '|'"},
    {"3 4 | 1 2 | 5\n", -2, "a second '|'"},
    {"| 1 2\n", -2, "source is empty"},
    {"3 4 | 1\n", -2, "at least 2 ids"},
    {"3 x | 1 2\n", -2, "'x' is not a token id"},
    {"3 4a | 1 2\n", -2, "inside a number"},
    {"3 -4 | 1 2\n", -2, "negative"},
    {"3 99999999999 | 1 2\n", -2, "too large"},
    {"# only a comment\n\n", -2, "no examples"},
    {"3 12 | 1 2\n", 0, "outside the vocabulary [0, 12)"},
    {"3 4 | 1 2 40\n", 0, "outside the vocabulary"},
    {"3 0 4 | 1 2\n", 0, "padding may only end a sequence"},
    {"0 3 | 1 2\n", 0, "starts with the pad id"},
    {"3 4 | 1 0\n", 0, "every target token to predict is padding"},
    {"1 2 3 4 5 6 7 8 9 | 1 2\n", 0, "more than the model's max_len 8"},
    {"3 4 | 1 2 3 4 5 6 7 8 9 10\n", 0, "more than the model's max_len 8"},
    {"3 4 | 1 2\n3 | 1 2\n", -1, "no pad id"},
    {"3 4 | 1 2\n3 4 | 1 2 3\n", -1, "no pad id"},
};

START_TEST(test_bad_batches) {
    const Bad *t = &BAD[_i];
    char err[256] = "";
    BatchFile bf;
    Batch b;
    int rc = batch_file_parse(t->text, "bad.txt", &bf, err, sizeof err);
    if (t->pad_id == -2) {
        ck_assert_msg(rc == 2, "case %d: rc %d, want 2 (syntax)", _i, rc);
    } else {
        ck_assert_msg(rc == 0, "case %d: syntax rc %d: %s", _i, rc, err);
        Config c = toy_config(t->pad_id);
        rc = batch_pad(&bf, &c, &b, err, sizeof err);
        ck_assert_msg(rc == 2, "case %d: pad rc %d, want 2", _i, rc);
        ck_assert_ptr_null(b.src);
        batch_file_free(&bf);
    }
    ck_assert_msg(strstr(err, t->why), "case %d: message '%s' does not say '%s'", _i, err, t->why);
    ck_assert_msg(strstr(err, "bad.txt"), "case %d: message '%s' does not name the file", _i, err);
}
END_TEST

START_TEST(test_bad_files) {
    char dir[64], p[128], err[256];
    fresh_dir(dir, sizeof dir, "check_batch_file");
    BatchFile bf;
    snprintf(p, sizeof p, "%s/missing", dir);
    ck_assert_int_eq(batch_file_read(p, &bf, err, sizeof err), 2);
    snprintf(p, sizeof p, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    ck_assert_int_eq(batch_file_read(p, &bf, err, sizeof err), 2);   /* refused, not waited on */
    ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
    unlink(p);
    snprintf(p, sizeof p, "%s/nul", dir);
    write_file(p, "3 4 | 1\0 2\n", 11);
    ck_assert_int_eq(batch_file_read(p, &bf, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "NUL"));
    remove_dir(dir);
}
END_TEST

/* The loss is the training step's formula (forward without dropout, then
 * smoothed_xent_forward), and the dump holds exactly m->grads. */
START_TEST(test_loss_grad_and_dump) {
    char err[256], dir[64], path[128];
    fresh_dir(dir, sizeof dir, "check_batch_file");
    snprintf(path, sizeof path, "%s/g.safetensors", dir);
    BatchFile bf;
    Batch b;
    Config c = toy_config(0);   /* dropout 0.1: training = 0 must switch it off */
    ck_assert_int_eq(batch_file_parse(EXAMPLE, "example", &bf, err, sizeof err), 0);
    ck_assert_int_eq(batch_pad(&bf, &c, &b, err, sizeof err), 0);
    /* the trainer's shape: B rows of T source and T - 1 target tokens */
    int T = b.Ts > b.Tt + 1 ? b.Ts : b.Tt + 1;
    Model m;
    ck_assert_int_eq(model_build(&m, &c, b.B, T, T - 1, 7, err, sizeof err), 0);
    Trainer t;
    TrainHyper hp = train_hyper_paper();
    ck_assert_int_eq(trainer_init_cap(&t, &m, &hp, b.B, T, b.B * b.Tt, 1, err, sizeof err), 0);
    int n_tokens = 0;
    float loss = train_grad(&t, b.src, b.tgt_in, b.tgt_out, b.B, b.Ts, b.Tt, 0, 0, &n_tokens);
    ck_assert_int_eq(n_tokens, b.n_tokens);
    size_t ng = m.grads.n;
    float *g1 = malloc(ng * sizeof(float));
    memcpy(g1, m.grads.mem, ng * sizeof(float));
    ck_assert_float_eq(train_grad(&t, b.src, b.tgt_in, b.tgt_out, b.B, b.Ts, b.Tt, 0, 0, &n_tokens), loss);
    ck_assert_mem_eq(g1, m.grads.mem, ng * sizeof(float));   /* dropout off: the same bits again */
    float with_dropout = train_grad(&t, b.src, b.tgt_in, b.tgt_out, b.B, b.Ts, b.Tt, 1, 0, &n_tokens);
    ck_assert_msg(with_dropout != loss, "training = 1 gave the loss without dropout, %.9g", loss);
    train_grad(&t, b.src, b.tgt_in, b.tgt_out, b.B, b.Ts, b.Tt, 0, 0, &n_tokens);
    const float *logp = model_forward(&m, b.src, b.tgt_in, b.B, b.Ts, b.Tt, 0);
    float want = smoothed_xent_forward(logp, b.tgt_out, b.B * b.Tt, c.vocab, 0.1f, 0, NULL);
    ck_assert_float_eq(loss, want);
    ck_assert_int_eq(grad_dump_write(&m, &b, 0.1f, loss, path, err, sizeof err), 0);
    /* the last tensor in the file is the last gradient: compare the tail */
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    const NamedTensor *last = &m.grads.tensors[m.grads.n_tensors - 1];
    size_t n = named_tensor_numel(last);
    float *tail = malloc(n * sizeof(float));
    fseek(f, -(long)(n * sizeof(float)), SEEK_END);
    ck_assert_uint_eq(fread(tail, sizeof(float), n, f), n);
    fclose(f);
    ck_assert_mem_eq(tail, last->data, n * sizeof(float));
    double sq = 0;
    for (size_t i = 0; i < m.grads.n; i++) sq += (double)m.grads.mem[i] * m.grads.mem[i];
    ck_assert_msg(sq > 0, "every gradient is zero");
    free(tail), free(g1);
    trainer_free(&t);
    model_free(&m);
    batch_free(&b);
    batch_file_free(&bf);
    remove_dir(dir);
}
END_TEST

START_TEST(test_program) {
    char bin[1024], ch07[1024];
    if (!chapter_binary(bin, sizeof bin, "check_batch_file", "parity_dump")) return;
    if (!chapter_binary(ch07, sizeof ch07, "check_batch_file", "07_transformer")) return;
    char dir[64], p[128];
    fresh_dir(dir, sizeof dir, "check_batch_file");
    ck_assert_int_eq(sh("%s --out %s --save %s/m.ckpt >/dev/null 2>&1", ch07, dir, dir), 0);   /* the toy model */
    snprintf(p, sizeof p, "%s/b.txt", dir);
    write_text(p, "3 4 5 | 1 8 99\n");      /* 99: outside the toy vocabulary of 12 */
    ck_assert_int_eq(sh("%s --load %s/m.ckpt --batch-file %s --grad-dump %s/g.st >/dev/null 2>&1", bin, dir, p, dir), 2);
    snprintf(p, sizeof p, "%s/g.st", dir);
    ck_assert_int_ne(access(p, F_OK), 0);          /* nothing written */
    snprintf(p, sizeof p, "%s/b.txt", dir);
    write_text(p, EXAMPLE);
    ck_assert_int_eq(sh("%s --load %s/m.ckpt --batch-file %s --grad-dump %s/g.st --adam-dump %s/a.st >/dev/null 2>&1",
                        bin, dir, p, dir, dir), 0);
    snprintf(p, sizeof p, "%s/g.st", dir);
    ck_assert_int_eq(access(p, F_OK), 0);
    unlink(p);
    snprintf(p, sizeof p, "%s/a.st", dir);
    ck_assert_int_eq(access(p, F_OK), 0);
    unlink(p);
    /* usage errors: --grad-dump without --batch-file, a batch without --load */
    ck_assert_int_eq(sh("%s --load %s/m.ckpt --grad-dump %s/g.st >/dev/null 2>&1", bin, dir, dir), 2);
    ck_assert_int_eq(sh("%s --batch-file %s/b.txt --grad-dump %s/g.st >/dev/null 2>&1", bin, dir, dir), 2);
    snprintf(p, sizeof p, "%s/g.st", dir);
    ck_assert_int_ne(access(p, F_OK), 0);
    remove_dir(dir);
}
END_TEST

Suite *batch_file_suite(void) {
    Suite *s = suite_create("batch_file");
    suite_case(s, "Core", test_example_pads_and_shifts, test_no_pad_equal_lengths,
               test_loss_grad_and_dump);
    TCase *limits = suite_case(s, "Limits", test_bad_files);
    tcase_add_loop_test(limits, test_bad_batches, 0, (int)(sizeof BAD / sizeof BAD[0]));
    TCase *progs = suite_case(s, "Programs", test_program);
    tcase_set_timeout(progs, 30);
    return s;
}
