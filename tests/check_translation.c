/* check_translation.c - chapter 11 end to end, on a tiny model: a TSV
 * corpus written here trains, evaluates and translates; a resumed run lands
 * on the same weights as one that never stopped; bad input exits with 2 and
 * says what is wrong. Also the token-budget batching on its own, the
 * library's task (task/translate.h: its one max_len rule, its training loop
 * with a per-step callback), typed text in a corpus's form (text/typed.h)
 * and the memory readings chapter 11 prints (core/rss.h).
 *
 * The chapter checks run $BUILD_DIR/11_translation (set by `make test`).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "core/rss.h"
#include "model/train.h"
#include "text/typed.h"
#include "text/batch.h"
#include "text/bpe.h"
#include "text/corpus.h"
#include "model/decode.h"
#include "model/model.h"
#include "task/translate.h"

static char dir[64];   /* the temporary folder of the chapter runs */

START_TEST(test_batches) {
    /* lengths 1..10 twice; budget 20 tokens a side */
    int s[20], t[20];
    for (int i = 0; i < 20; i++) s[i] = t[i] = 1 + i % 10;
    Batches flat, buck;
    char err[128];
    ck_assert_int_eq(batches_make(&flat, s, t, 20, 20, 100, 0, 5, err, sizeof err), 0);
    ck_assert_int_eq(batches_make(&buck, s, t, 20, 20, 100, 1, 5, err, sizeof err), 0);
    /* every pair exactly once, no batch over budget unless it is alone */
    for (int k = 0; k < 2; k++) {
        const Batches *b = k ? &buck : &flat;
        int seen[20] = {0};
        for (int i = 0; i < b->n; i++) {
            ck_assert(b->b[i].n == 1 || b->b[i].n * b->b[i].Ts <= 20);
            for (int j = 0; j < b->b[i].n; j++) seen[b->b[i].idx[j]]++;
        }
        for (int i = 0; i < 20; i++) ck_assert_int_eq(seen[i], 1);
        ck_assert_int_eq(b->real, 2 * 110);
    }
    /* sorted: the first batch holds the shortest pairs: 1,1,2,2,3,3 (6 x 3 = 18) */
    ck_assert_int_eq(buck.b[0].n, 6);
    ck_assert_int_eq(buck.b[0].Ts, 3);
    ck_assert(batches_padding(&buck) < batches_padding(&flat));
    batches_free(&flat);
    batches_free(&buck);
    ck_assert_int_eq(batches_make(&flat, s, t, 20, 0, 100, 1, 5, err, sizeof err), 2);
    ck_assert_int_eq(batches_make(&flat, s, t, 0, 20, 100, 1, 5, err, sizeof err), 2);
}
END_TEST

/* The chapter's default corpus, vocabulary and budget: the padding figures
 * its README quotes (48% of randomly filled batches, 3% of sorted ones,
 * 1.8x fewer batches an epoch). */
START_TEST(test_default_padding) {
    Corpus tr, dv, te;
    char err[256];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 10000, 300, 500, 42, err, sizeof err), 0);
    Bpe b;
    ck_assert_int_eq(bpe_learn(&b, tr.src, tr.n, tr.tgt, tr.n, 800, err, sizeof err), 0);
    int *sl = malloc(sizeof(int) * (size_t)tr.n), *tl = malloc(sizeof(int) * (size_t)tr.n);
    for (int i = 0; i < tr.n; i++) {
        sl[i] = bpe_encode(&b, tr.src[i], NULL, 0) + 1;
        tl[i] = bpe_encode(&b, tr.tgt[i], NULL, 0) + 1;
    }
    Batches flat, buck;
    ck_assert_int_eq(batches_make(&flat, sl, tl, tr.n, 1000, 96, 0, 42, err, sizeof err), 0);
    ck_assert_int_eq(batches_make(&buck, sl, tl, tr.n, 1000, 96, 1, 42, err, sizeof err), 0);
    double pf = batches_padding(&flat), pb = batches_padding(&buck), ratio = (double)flat.n / buck.n;
    ck_assert_msg(pf > 0.475 && pf < 0.485, "random order: %.4f padding", pf);
    ck_assert_msg(pb > 0.025 && pb < 0.035, "sorted: %.4f padding", pb);
    ck_assert_msg(ratio > 1.75 && ratio < 1.85, "ratio %.3f", ratio);
    batches_free(&flat), batches_free(&buck);
    free(sl), free(tl);
    bpe_free(&b);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
}
END_TEST

/* A sentence's translation must not depend on which sentences share its
 * batch: each is decoded to its own length + 50 and stops at its own </s>
 * (translate_split). Six test sentences of different lengths, decoded in
 * one batch and each alone, by a random model (so nothing stops early and
 * every output runs to its own cap) and by the same model after its
 * output bias towards </s> is raised (so outputs end at different steps):
 * greedy and beam, the same strings. */
START_TEST(test_batch_independent) {
    Corpus tr, dv, te;
    char err[256];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 400, 1, 6, 11, err, sizeof err), 0);
    Bpe b;
    ck_assert_int_eq(bpe_learn(&b, tr.src, tr.n, tr.tgt, tr.n, 150, err, sizeof err), 0);
    Encoded e;
    ck_assert_int_eq(encode_split(&e, &te, &b, err, sizeof err), 0);
    Batches one, alone;   /* one batch of all six; six batches of one */
    ck_assert_int_eq(batches_make(&one, e.slen, e.tlen, e.n, 100000, 6, 1, 1, err, sizeof err), 0);
    ck_assert_int_eq(batches_make(&alone, e.slen, e.tlen, e.n, 100000, 1, 1, 1, err, sizeof err), 0);
    ck_assert_int_eq(one.n, 1);
    ck_assert_int_eq(alone.n, 6);
    ck_assert_int_ne(e.slen[0], e.slen[1]);   /* different lengths: different caps */
    Config c = test_config(1, 16, 32, 2, 8, 8, b.vocab, e.max_s + 51, 0.0f);
    c.pad_id = BPE_PAD;
    Model m;
    ck_assert_int_eq(model_build(&m, &c, 6, e.max_s, e.max_s, 3, err, sizeof err), 0);
    DecodeOpts o = decode_opts_paper(BPE_BOS, BPE_EOS);
    char *h1[6] = {0}, *h2[6] = {0};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)   /* </s> likelier: the embedding row of </s> grows, so its logit does */
            for (int j = 0; j < c.d_model; j++) m.params.embed[BPE_EOS * c.d_model + j] *= 3;
        for (int greedy = 1; greedy >= 0; greedy--) {
            ck_assert_int_eq(translate_split(&m, &b, &e, &one, &o, greedy, h1, err, sizeof err), 0);
            ck_assert_int_eq(translate_split(&m, &b, &e, &alone, &o, greedy, h2, err, sizeof err), 0);
            int said = 0;   /* outputs that are not empty */
            for (int i = 0; i < 6; i++) {
                ck_assert_msg(!strcmp(h1[i], h2[i]), "%s, sentence %d: batched \"%s\" but alone \"%s\"",
                              greedy ? "greedy" : "beam", i, h1[i], h2[i]);
                said += h1[i][0] != 0;
                int words = 1;
                for (const char *p = h1[i]; *p; p++) words += *p == ' ';
                /* no more than its own source + 50 tokens (a word is at least one) */
                ck_assert_int_le(words, e.slen[i] + 50);
            }
            ck_assert_int_gt(said, 0);
        }
    }
    for (int i = 0; i < 6; i++) free(h1[i]), free(h2[i]);
    model_free(&m);
    batches_free(&one), batches_free(&alone);
    encoded_free(&e);
    bpe_free(&b);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
}
END_TEST

/* Typed text written as the training text was: the generated corpus's form
 * (bpe.h's tokenised) and a real corpus's (spaces squeezed) */
START_TEST(test_typed_text) {
    char out[256];
    typed_as_generated("the man sees the dog, because it  laughs.", out, sizeof out);
    ck_assert_str_eq(out, "The man sees the dog , because it laughs .");
    typed_as_generated(" \tgroßen\r\nBäumen ", out, sizeof out);
    ck_assert_str_eq(out, "Großen Bäumen .");   /* tabs and line ends are spaces; a final " ." added */
    typed_as_generated("über alles", out, sizeof out);
    ck_assert_str_eq(out, "über alles .");       /* only a-z is capitalised */
    typed_as_generated("Ends with a dot .", out, sizeof out);
    ck_assert_str_eq(out, "Ends with a dot .");
    typed_as_generated("x", out, 6);   /* 3 strlen + 4 bytes are enough */
    ck_assert_str_eq(out, "X .");
    typed_squeeze("  a\t b\r\n  c ", out);
    ck_assert_str_eq(out, "a b c");
    typed_squeeze("", out);
    ck_assert_str_eq(out, "");
}
END_TEST

/* One max_len rule: the longest output of the decoding rule plus its <s>,
 * or the longest target, whichever is longer */
START_TEST(test_max_len_rule) {
    ck_assert_int_eq(trtask_max_len(10, 5, 1, 50), 61);    /* chapter 11: input + 50 (Sec. 6.1) */
    ck_assert_int_eq(trtask_max_len(10, 70, 1, 50), 70);   /* a target longer than any output */
    ck_assert_int_eq(trtask_max_len(12, 11, 2, 7), 32);    /* trtask_bleu_greedy: 2 Ts + 7 */
    TrTask t;
    char err[256];
    ck_assert_msg(trtask_build(&t, 200, 10, 120, 300, 16, 3, err, sizeof err) == 0, "%s", err);
    int T = t.train_b.max_Ts > t.train_b.max_Tt + 1 ? t.train_b.max_Ts : t.train_b.max_Tt + 1;
    if (t.edev.max_s > T) T = t.edev.max_s;
    ck_assert_int_eq(t.max_len, 2 * T + 8);   /* chapter 12's models, as they always were */
    ck_assert_int_eq(t.test.n, 0);             /* scored on dev: no test split, no test batches */
    ck_assert_int_eq(t.test_b.n, 0);
    trtask_free(&t);
}
END_TEST

typedef struct {
    int calls;
    uint64_t last_step;
    long tokens_seen;
    long *tokens;
    Trainer *tr;
} Seen;

static void count_step(void *ctx, const StepStats *st) {
    Seen *s = ctx;
    ck_assert_uint_eq(s->tr->step, s->last_step + 1);   /* once a step, after it */
    s->last_step = s->tr->step;
    s->calls++;
    ck_assert_int_gt(st->n_tokens, 0);
    ck_assert_int_ge(*s->tokens, s->tokens_seen + st->n_tokens);   /* counted before the call */
    s->tokens_seen = *s->tokens;
}

/* The task's training loop: the callback sees every step once, and changes
 * nothing; training in two calls is training in one (resuming, chapter 12's
 * quarters). */
START_TEST(test_train_callback) {
    TrTask t;
    char err[256];
    ck_assert_msg(trtask_build(&t, 200, 10, 120, 300, 16, 3, err, sizeof err) == 0, "%s", err);
    Config c = test_config(1, 16, 32, 2, 8, 8, t.bpe.vocab, t.max_len, 0.1f);
    c.pad_id = BPE_PAD;
    TrainHyper hp = train_hyper_paper();
    float *w[3];
    long tokens[3] = {0};
    for (int k = 0; k < 3; k++) {
        Model m;
        Trainer tr;
        int B = t.train_b.max_B > t.dev_b.max_B ? t.train_b.max_B : t.dev_b.max_B;
        ck_assert_msg(model_build(&m, &c, B, t.max_len, t.max_len - 1, 7, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(trainer_init(&tr, &m, &hp, m.max_B, t.max_len, 8, err, sizeof err) == 0, "%s", err);
        StepStats st = {0};
        Seen seen = {.tokens = &tokens[k], .tr = &tr};
        if (k == 0) ck_assert_int_eq(trtask_train(&tr, &t, 6, 5, &tokens[k], &st, NULL, NULL), TRAIN_OK);
        if (k == 1) ck_assert_int_eq(trtask_train(&tr, &t, 6, 5, &tokens[k], &st, count_step, &seen), TRAIN_OK);
        if (k == 2) {
            ck_assert_int_eq(trtask_train(&tr, &t, 2, 5, &tokens[k], &st, NULL, NULL), TRAIN_OK);
            ck_assert_int_eq(trtask_train(&tr, &t, 6, 5, &tokens[k], &st, NULL, NULL), TRAIN_OK);
        }
        if (k == 1) ck_assert_int_eq(seen.calls, 6);
        ck_assert_uint_eq(tr.step, 6);
        trainer_pull(&tr);
        w[k] = malloc(m.params.n * sizeof(float));
        memcpy(w[k], m.params.mem, m.params.n * sizeof(float));
        if (k) ck_assert_msg(!memcmp(w[0], w[k], m.params.n * sizeof(float)), "run %d: other weights", k);
        if (k) ck_assert_int_eq(tokens[k], tokens[0]);
        trainer_free(&tr);
        model_free(&m);
    }
    for (int k = 0; k < 3; k++) free(w[k]);
    trtask_free(&t);
}
END_TEST

/* What chapter 11's memory lines read: bytes resident now, and the peak */
START_TEST(test_memory_readings) {
    double now = rss_now();
    ck_assert_msg(now > 1e5, "resident %g bytes", now);
    char *block = malloc(64 << 20);
    ck_assert_ptr_nonnull(block);
    /* touched, one byte a page: resident. Volatile stores, so no compiler
     * may drop them with the block it sees freed unread (clang did). */
    volatile char *touch = block;
    for (size_t i = 0; i < (size_t)64 << 20; i += 4096) touch[i] = 1;
    double after = rss_now();
    ck_assert_msg(after >= now + 60e6, "64 MB touched, resident %g -> %g", now, after);
    ck_assert_msg(rss_peak() >= after - 1e6, "peak %g below the resident %g", rss_peak(), after);
    free(block);
}
END_TEST

static char bin[1024];

static char *out;   /* the last run's stdout and stderr (run() frees the one before) */

/* Runs the chapter with args (a shell word list), its output into out;
 * returns the exit status. */
static int run(const char *args) {
    free(out);
    return sh_captured(&out, NULL, "OMP_NUM_THREADS=1 %s %s --no-color", bin, args);
}

static int setup_dir(void) {
    if (!chapter_binary(bin, sizeof bin, "check_translation", "11_translation")) return 0;
    fresh_dir(dir, sizeof dir, "check_translation");
    return 1;
}

static void cleanup_dir(void) { remove_dir(dir); }

/* Fails the test with a short message when cond is false, the run's whole
 * output on stderr first (a Check message holds a few kB at most). */
#define EXPECT(cond, ...)                                                 \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "---- the run's output:\n%s\n----\n", out);   \
            ck_abort_msg(__VA_ARGS__);                                    \
        }                                                                 \
    } while (0)

/* The last run's output holds want. */
static void expect_in(const char *want) { EXPECT(strstr(out, want), "no \"%s\" in the output", want); }

#define TINY "--layers 1 --d-model 32 --heads 2 --d-ff 64 --vocab 300 --dev-size 20 --test-size 20 --tokens 400"


START_TEST(test_tsv_end_to_end) {
    if (!setup_dir()) return;
    Corpus tr, dv, te;
    char err[256], tsv[128], args[1024];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 600, 1, 1, 5, err, sizeof err), 0);
    snprintf(tsv, sizeof tsv, "%s/pairs.tsv", dir);
    ck_assert_int_eq(corpus_save_tsv(&tr, tsv, err, sizeof err), 0);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);

    snprintf(args, sizeof args, "--corpus %s " TINY " --steps 30 --checkpoint-every 10 --out %s/a", tsv, dir);
    int rc = run(args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "read 600 pairs"));
    ck_assert_ptr_nonnull(strstr(out, "last checkpoint, greedy"));
    ck_assert_ptr_nonnull(strstr(out, "average of last 3 checkpoints"));   /* steps 10, 20, 30 */
    ck_assert_ptr_nonnull(strstr(out, "dev ppl"));
    ck_assert_ptr_nonnull(strstr(out, "last checkpoint, beam 4, alpha 0.6"));
    ck_assert_ptr_nonnull(strstr(out, "average of last 3, beam 4, alpha 0.6"));
    assert_lines_fit(out, 100, dir);

    /* section 5's four systems, each with its hypotheses (a line per test sentence) */
    static const char *const hyps[4] = {"test_hyp.txt", "test_hyp_beam.txt", "test_hyp_avg.txt",
                                        "test_hyp_avg_beam.txt"};
    for (int k = 0; k < 4; k++) {
        ck_assert_ptr_nonnull(strstr(out, hyps[k]));
        ck_assert_msg(sh("test $(wc -l < %s/a/%s) -eq 20", dir, hyps[k]) == 0, "%s/a/%s: not 20 lines", dir, hyps[k]);
    }

    /* --translate with the checkpoint just written. A TSV corpus's text is
     * taken as typed: no capital letter or " ." is added */
    snprintf(args, sizeof args, "--out %s/a --translate \"the man sees the dog\"", dir);
    rc = run(args);
    ck_assert_msg(rc == 0, "translate: exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "en: the man sees the dog\n"));
    ck_assert_ptr_nonnull(strstr(out, "de: "));
    assert_lines_fit(out, 100, dir);
    /* a word the corpus never had is spelled from subwords, not refused */
    snprintf(args, sizeof args, "--out %s/a --translate \"The elephant sees the dog .\"", dir);
    rc = run(args);
    ck_assert_msg(rc == 0, "translate elephant: exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "\"elephant\": spelled from the subwords"));
    ck_assert_ptr_nonnull(strstr(out, "en: The elephant sees the dog .\n"));
    /* the averaged checkpoint has its vocabulary beside it too */
    snprintf(args, sizeof args, "--model %s/a/model_avg.ckpt --out %s/a --translate \"the dog sees\"", dir, dir);
    rc = run(args);
    ck_assert_msg(rc == 0, "translate with model_avg.ckpt: exit %d:\n%s", rc, out);
    char longs[3000] = "--out ";
    snprintf(longs + strlen(longs), 200, "%s/a --translate \"the man", dir);
    for (int i = 0; i < 200; i++) strcat(longs, " the man");
    strcat(longs, "\"");
    rc = run(longs);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(out, "subword tokens; this model takes at most"));
    snprintf(args, sizeof args, "--out %s/none --translate \"the man\"", dir);
    ck_assert_int_eq(run(args), 1);   /* no model there: cannot read */
    cleanup_dir();
}
END_TEST

/* A model of the generated corpus writes typed input the corpus's way
 * (capital letter, "," and "." split off, a final " .") and says so in
 * its vocabulary file (format 2, "text tokenised"). */
START_TEST(test_translate_generated_form) {
    if (!setup_dir()) return;
    char args[1024];
    snprintf(args, sizeof args, "--train-size 300 " TINY " --steps 2 --checkpoint-every 0 --out %s/g", dir);
    int rc = run(args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    snprintf(args, sizeof args, "--out %s/g --translate \"the man sees the dog, the woman laughs\"", dir);
    rc = run(args);
    ck_assert_msg(rc == 0, "translate: exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "en: The man sees the dog , the woman laughs .\n"));
    char path[256], head[256] = "";
    snprintf(path, sizeof path, "%s/g/model.ckpt.bpe", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = 0;
    ck_assert_ptr_nonnull(strstr(head, "AIYNBPE 2\n"));
    ck_assert_ptr_nonnull(strstr(head, "\ntext tokenised\n"));
    cleanup_dir();
}
END_TEST

/* --dev and --test FILE replace the splits; with both, the whole corpus
 * trains; with one, the split it replaces goes back to training. */
START_TEST(test_dev_test_files) {
    if (!setup_dir()) return;
    Corpus tr, dv, te;
    char err[256], args[1024], tsv[128], dev[128], test[128];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 300, 10, 12, 9, err, sizeof err), 0);
    snprintf(tsv, sizeof tsv, "%s/pairs.tsv", dir);
    snprintf(dev, sizeof dev, "%s/dev.tsv", dir);
    snprintf(test, sizeof test, "%s/test.tsv", dir);
    ck_assert_int_eq(corpus_save_tsv(&tr, tsv, err, sizeof err), 0);
    ck_assert_int_eq(corpus_save_tsv(&dv, dev, err, sizeof err), 0);
    ck_assert_int_eq(corpus_save_tsv(&te, test, err, sizeof err), 0);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
    snprintf(args, sizeof args, "--corpus %s --dev %s --test %s " TINY " --steps 2 --checkpoint-every 0 --out %s/o",
             tsv, dev, test, dir);
    int rc = run(args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "every pair of it trains"));
    ck_assert_ptr_nonnull(strstr(out, "pairs: train 300, dev 10, test 12"));
    ck_assert_ptr_nonnull(strstr(out, "English sentences also in training: dev 0 of 10, test 0 of 12"));
    /* --test alone: dev is cut off the corpus (TINY: 20), the split's test trains */
    snprintf(args, sizeof args, "--corpus %s --test %s " TINY " --steps 2 --checkpoint-every 0 --out %s/o",
             tsv, test, dir);
    rc = run(args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "pairs: train 280, dev 20, test 12"));
    snprintf(args, sizeof args, "--corpus %s --dev %s/missing.tsv --out %s/o", tsv, dir, dir);
    ck_assert_int_eq(run(args), 1);   /* cannot read it */
    ck_assert_ptr_nonnull(strstr(out, "--dev"));
    snprintf(args, sizeof args, "--ding-phrases --out %s/o", dir);
    ck_assert_int_eq(run(args), 2);
    ck_assert_ptr_nonnull(strstr(out, "--ding-phrases needs --corpus ding"));
    cleanup_dir();
}
END_TEST

/* --corpus ding: the Ding dictionary's sentences (when trans-de-en is
 * installed), every section on real text: no exit after training, a dev
 * sentence in section 6, --translate of lowercase input without a period. */
START_TEST(test_ding_corpus) {
    if (access(DING_PATH, R_OK) != 0) {
        test_skip_missing("check_translation", "trans-de-en", "the Ding run: %s missing (apt-get install trans-de-en)",
                          DING_PATH);
        return;
    }
    if (!setup_dir()) return;
    char args[1024];
    snprintf(args, sizeof args, "--corpus ding --dev-size 20 --test-size 20 --vocab 2000 --layers 1 --d-model 16 "
             "--heads 2 --d-ff 32 --tokens 400 --steps 2 --checkpoint-every 1 --out %s/d", dir);
    int rc = run(args);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "the Ding dictionary (trans-de-en, GPL-2+), read from " DING_PATH
                                      " at run time; fixed split"));
    ck_assert_ptr_nonnull(strstr(out, "dev 20, test 20"));
    /* flags not given take the real-data configuration (main.c's corpus_config) */
    ck_assert_ptr_nonnull(strstr(out, "a real corpus: N=1 d_model=16 d_ff=32 h=2, P_drop 0.30, 2000 BPE symbols, "
                                      "400 tokens a batch,\n2 steps, warmup 800, factor 1"));
    ck_assert_ptr_nonnull(strstr(out, "the dev set's 3 most frequent words"));
    ck_assert_ptr_nonnull(strstr(out, "average of last 2, beam 4, alpha 0.6"));
    ck_assert_ptr_nonnull(strstr(out, "peak resident memory"));
    ck_assert_ptr_nonnull(strstr(out, "6. What the heads learned: one dev sentence"));
    ck_assert_ptr_nonnull(strstr(out, "encoder layer 1: head 1"));
    ck_assert_ptr_null(strstr(out, "verb-final"));   /* the generated sentence's tracing is not run */
    assert_lines_fit(out, 100, dir);
    snprintf(args, sizeof args, "--out %s/d --translate \"don't lose heart\"", dir);
    rc = run(args);
    ck_assert_msg(rc == 0, "translate: exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "en: don't lose heart\n"));
    cleanup_dir();
}
END_TEST

/* 20 steps, then 10 more from the checkpoint == 30 steps straight. */
START_TEST(test_resume_exact) {
    if (!setup_dir()) return;
    char args[1024];
    snprintf(args, sizeof args, "--train-size 500 " TINY " --steps 30 --checkpoint-every 0 --out %s/full", dir);
    ck_assert_int_eq(run(args), 0);
    snprintf(args, sizeof args, "--train-size 500 " TINY " --steps 20 --checkpoint-every 0 --out %s/half", dir);
    ck_assert_int_eq(run(args), 0);
    snprintf(args, sizeof args, "--train-size 500 " TINY " --steps 30 --resume %s/half/model.ckpt --out %s/half",
             dir, dir);
    int rc = run(args);
    ck_assert_msg(rc == 0, "resume: exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "resumed"));
    ck_assert_msg(sh("cmp -s %s/full/model.ckpt %s/half/model.ckpt", dir, dir) == 0, "the resumed run's weights differ from the straight run's");
    /* a different corpus does not fit the checkpoint's vocabulary */
    snprintf(args, sizeof args, "--train-size 500 " TINY " --vocab 280 --steps 40 --resume %s/half/model.ckpt "
             "--out %s/half", dir, dir);
    ck_assert_int_eq(run(args), 2);
    ck_assert_ptr_nonnull(strstr(out, "vocabulary"));
    cleanup_dir();
}
END_TEST

START_TEST(test_bad_input) {
    if (!setup_dir()) return;
    char args[1024], p[128];
    snprintf(p, sizeof p, "%s/bad.tsv", dir);
    write_text(p, "The dog .\tDer Hund .\nThe cat . Die Katze .\n");
    snprintf(args, sizeof args, "--corpus %s --out %s/o", p, dir);
    ck_assert_int_eq(run(args), 2);
    ck_assert_ptr_nonnull(strstr(out, "line 2: no tab"));
    write_text(p, "");
    ck_assert_int_eq(run(args), 2);
    ck_assert_ptr_nonnull(strstr(out, "the corpus is empty"));
    snprintf(args, sizeof args, "--vocab 0 --out %s/o", dir);
    ck_assert_int_eq(run(args), 2);
    ck_assert_ptr_nonnull(strstr(out, "--vocab"));
    snprintf(args, sizeof args, "--train-size 100 --vocab 20 --out %s/o", dir);
    ck_assert_int_eq(run(args), 2);
    ck_assert_ptr_nonnull(strstr(out, "too small"));
    cleanup_dir();
}
END_TEST

/* Issue 34, item 4: --translate with a vocabulary that is not the model's
 * (a .bpe of another run beside the checkpoint) translated garbage with
 * exit 0; a blank sentence became "." and was translated. Both exit 2. */
START_TEST(test_translate_refuses) {
    if (!setup_dir()) return;
    char args[1024];
    snprintf(args, sizeof args, "--train-size 300 " TINY " --steps 2 --checkpoint-every 0 --out %s/a", dir);
    int rc = run(args);
    EXPECT(rc == 0, "exit %d", rc);
    snprintf(args, sizeof args, "--train-size 300 " TINY " --vocab 150 --steps 2 --checkpoint-every 0 --out %s/b",
             dir);
    rc = run(args);
    EXPECT(rc == 0, "exit %d", rc);
    /* blank: refused, whatever the model; empty too (the CLI: "needs a value") */
    static const char *const blank[] = {"\" \"", "\"\"", "\"$(printf ' \\t  ')\""};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "--out %s/a --translate %s", dir, blank[i]);
        rc = run(args);
        EXPECT(rc == 2, "--translate %s: exit %d, want 2", blank[i], rc);
        EXPECT((strstr(out, "--translate: the sentence is blank") || (i == 1 && strstr(out, "needs a value"))) &&
                      !strstr(out, "de: "), "--translate %s: not refused as blank", blank[i]);
    }
    /* b's 150-symbol vocabulary beside a's 300-symbol model */
    ck_assert_int_eq(sh("cp %s/b/model.ckpt.bpe %s/a/model.ckpt.bpe", dir, dir), 0);
    snprintf(args, sizeof args, "--out %s/a --translate \"the man sees the dog\"", dir);
    rc = run(args);
    EXPECT(rc == 2, "a 150-symbol .bpe beside a 300-symbol model: exit %d, want 2", rc);
    expect_in("has 150 symbols, but the model");
    expect_in("was trained with 300");
    ck_assert_ptr_null(strstr(out, "de: "));
    cleanup_dir();
}
END_TEST

/* Issue 34, item 4: on --resume, the average of the last checkpoints took
 * whatever ckpt_STEP.ckpt files --out held when only their parameter count
 * matched. Now a file joins the average only if it is a save of the
 * resumed run: the same config, step, seed and vocabulary; each other one
 * is named with the reason. */
#define SMALL "--train-size 300 --layers 1 --d-model 32 --d-ff 64 --vocab 300 --dev-size 20 --test-size 20 " \
              "--tokens 400 --checkpoint-every 10"
START_TEST(test_average_this_run_only) {
    if (!setup_dir()) return;
    char args[1024], want[512];
    /* X: h 4; Y: h 2, the same number of parameters */
    snprintf(args, sizeof args, SMALL " --heads 4 --steps 20 --out %s/X", dir);
    ck_assert_int_eq(run(args), 0);
    snprintf(args, sizeof args, SMALL " --heads 2 --steps 20 --out %s/Y", dir);
    ck_assert_int_eq(run(args), 0);
    ck_assert_int_eq(sh("cp -r %s/Y %s/Y2", dir, dir), 0);
    /* Y resumed into X's folder: X's two files are another model's */
    snprintf(args, sizeof args, SMALL " --heads 2 --steps 30 --resume %s/Y/model.ckpt --out %s/X", dir, dir);
    int rc = run(args);
    EXPECT(rc == 0, "exit %d", rc);
    for (int s = 10; s <= 20; s += 10) {
        snprintf(want, sizeof want, "not averaged: %s/X/ckpt_%06d.ckpt is not a save of this run: another model "
                 "(h 4, this run's 2)", dir, s);
        expect_in(want);
    }
    EXPECT(!strstr(out, "average of last"), "another run's checkpoints averaged");
    ck_assert_ptr_nonnull(strstr(out, "average: only 1 checkpoint saved"));
    /* Y resumed into its own folder: its own two files join the third */
    snprintf(args, sizeof args, SMALL " --heads 2 --steps 30 --resume %s/Y/model.ckpt --out %s/Y", dir, dir);
    rc = run(args);
    EXPECT(rc == 0, "exit %d", rc);
    ck_assert_ptr_null(strstr(out, "not averaged"));
    ck_assert_ptr_nonnull(strstr(out, "average of last 3 checkpoints"));
    /* a file whose vocabulary is another run's (seed 3's corpus) */
    snprintf(args, sizeof args, SMALL " --heads 2 --seed 3 --steps 10 --out %s/Z", dir);
    ck_assert_int_eq(run(args), 0);
    ck_assert_int_eq(sh("cp %s/Z/ckpt_000010.ckpt.bpe %s/Y2/ckpt_000010.ckpt.bpe", dir, dir), 0);
    snprintf(args, sizeof args, SMALL " --heads 2 --steps 30 --resume %s/Y2/model.ckpt --out %s/Y2", dir, dir);
    rc = run(args);
    EXPECT(rc == 0, "exit %d", rc);
    snprintf(want, sizeof want, "not averaged: %s/Y2/ckpt_000010.ckpt is not a save of this run: its .bpe is "
             "another vocabulary", dir);
    expect_in(want);
    ck_assert_ptr_nonnull(strstr(out, "average of last 2 checkpoints"));
    /* another --seed on the same data: a TSV corpus with --dev and --test
     * files trains on all of it, so the vocabulary and the config are the
     * same whatever the seed; the seed's data RNG tells the runs apart */
    Corpus tr, dv, te;
    char err[256], tsv[128], dev[128], test[128];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 300, 10, 10, 9, err, sizeof err), 0);
    snprintf(tsv, sizeof tsv, "%s/pairs.tsv", dir);
    snprintf(dev, sizeof dev, "%s/dev.tsv", dir);
    snprintf(test, sizeof test, "%s/test.tsv", dir);
    ck_assert_int_eq(corpus_save_tsv(&tr, tsv, err, sizeof err), 0);
    ck_assert_int_eq(corpus_save_tsv(&dv, dev, err, sizeof err), 0);
    ck_assert_int_eq(corpus_save_tsv(&te, test, err, sizeof err), 0);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
    for (int seed = 1; seed <= 2; seed++) {
        snprintf(args, sizeof args, "--corpus %s --dev %s --test %s " SMALL " --heads 2 --seed %d --steps 20 "
                 "--out %s/S%d", tsv, dev, test, seed, dir, seed);
        rc = run(args);
        EXPECT(rc == 0, "seed %d: exit %d", seed, rc);
    }
    snprintf(args, sizeof args, "--corpus %s --dev %s --test %s " SMALL " --heads 2 --seed 2 --steps 30 "
             "--resume %s/S2/model.ckpt --out %s/S1", tsv, dev, test, dir, dir);
    rc = run(args);
    EXPECT(rc == 0, "exit %d", rc);
    snprintf(want, sizeof want, "not averaged: %s/S1/ckpt_000020.ckpt is not a save of this run: another run "
             "(another --seed)", dir);
    expect_in(want);
    EXPECT(!strstr(out, "average of last"), "another seed's checkpoints averaged");
    cleanup_dir();
}
END_TEST

/* Issue 34, item 5: typed words and corpus text reached the terminal raw.
 * An ESC sequence or invalid UTF-8 typed into --translate, and a C1
 * control (U+009B, CSI: valid UTF-8 that starts an escape sequence) in a
 * corpus, print as \xHH; German and Chinese print as they are. */
START_TEST(test_terminal_safe) {
    if (!setup_dir()) return;
    char args[1024], p[128], dev[128], test[128];
    snprintf(p, sizeof p, "%s/pairs.tsv", dir);
    snprintf(dev, sizeof dev, "%s/dev.tsv", dir);
    snprintf(test, sizeof test, "%s/test.tsv", dir);
    Corpus tr, dv, te;
    char err[256];
    ck_assert_int_eq(corpus_generate(&tr, &dv, &te, 300, 10, 10, 9, err, sizeof err), 0);
    ck_assert_int_eq(corpus_save_tsv(&dv, dev, err, sizeof err), 0);
    ck_assert_int_eq(corpus_save_tsv(&te, test, err, sizeof err), 0);
    /* the first training pair (printed in section 1) carries the CSI */
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "the \xc2\x9b" "31m dog 你好 .\tder \xc2\x9b" "31m große Hund .\n");
    for (int i = 0; i < tr.n; i++) fprintf(f, "%s\t%s\n", tr.src[i], tr.tgt[i]);
    fclose(f);
    corpus_free(&tr), corpus_free(&dv), corpus_free(&te);
    snprintf(args, sizeof args, "--corpus %s --dev %s --test %s " TINY " --steps 2 --checkpoint-every 0 --out %s/t",
             p, dev, test, dir);
    int rc = run(args);
    EXPECT(rc == 0, "exit %d", rc);
    EXPECT(!strstr(out, "\xc2\x9b"), "a raw CSI (U+009B) reached the output");
    expect_in("en: the \\xc2\\x9b31m dog 你好 .\n");
    expect_in("de: der \\xc2\\x9b31m große Hund .\n");
    /* typed: an ESC sequence and a byte that is not UTF-8 */
    snprintf(args, sizeof args, "--out %s/t --translate \"$(printf 'the \\033[31mman \\377 größer')\"", dir);
    rc = run(args);
    EXPECT(rc == 0, "translate: exit %d", rc);
    EXPECT(!strchr(out, '\033'), "a raw ESC reached the output");
    EXPECT(!strchr(out, '\377'), "a raw 0xFF reached the output");
    expect_in("en: the \\x1b[31mman \\xff größer\n");
    expect_in("e.g. \"\\x1b[31mman\"");
    cleanup_dir();
}
END_TEST

/* Issue 34, item 6: --corpus (and --dev, --test) given a FIFO or a folder
 * exited 1 where --load and --resume exit 2 for the same: now 2, in the
 * words checkpoint.c's loader uses, and at once (a FIFO is never read). */
START_TEST(test_corpus_not_a_file) {
    if (!setup_dir()) return;
    char args[1024], fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(sh("mkfifo %s", fifo), 0);
    const char *flags[] = {"--corpus", "--dev", "--test"};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) {
            const char *path = k ? dir : fifo;
            if (i == 0) snprintf(args, sizeof args, "--corpus %s --out %s/o", path, dir);
            else snprintf(args, sizeof args, "--train-size 300 %s %s --out %s/o", flags[i], path, dir);
            int rc = run(args);
            EXPECT(rc == 2, "%s %s: exit %d, want 2", flags[i], k ? "a folder" : "a FIFO", rc);
            expect_in(k ? "is not a regular file (it is a folder)" : "is not a regular file (it is a FIFO)");
            ck_assert_ptr_nonnull(strstr(out, flags[i]));
        }
    cleanup_dir();
}
END_TEST

/* The chapter at its defaults (about a minute): BLEU >= 80 for the last and
 * the averaged checkpoint, greedy and beam. The case "Slow", which `make
 * test-slow` runs (AIYN_SLOW_TESTS=1) and CI with it; `make test` leaves it out. */
START_TEST(test_default_run) {
    if (!setup_dir()) return;
    char args[256];
    snprintf(args, sizeof args, "--out %s/default", dir);
    ck_assert_int_eq(run(args), 0);
    double last = 0, avg = 0, whole = 1e9;
    const char *p = strstr(out, "last checkpoint, greedy");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p + strlen("last checkpoint, greedy"), "%lf", &last), 1);
    p = strstr(out, "average of last 5 checkpoints, greedy");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p + strlen("average of last 5 checkpoints, greedy"), "%lf", &avg), 1);
    double beam = 0, beam_avg = 0;
    p = strstr(out, "last checkpoint, beam 4, alpha 0.6");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p + strlen("last checkpoint, beam 4, alpha 0.6"), "%lf", &beam), 1);
    p = strstr(out, "average of last 5, beam 4, alpha 0.6");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p + strlen("average of last 5, beam 4, alpha 0.6"), "%lf", &beam_avg), 1);
    p = strstr(out, "whole run:");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p, "whole run: %lf", &whole), 1);
    fprintf(stderr, "check_translation: default run: BLEU %.2f last, %.2f averaged (greedy); beam %.2f last, "
            "%.2f averaged; %.1f s\n", last, avg, beam, beam_avg, whole);
    ck_assert_msg(last >= 80 && avg >= 80, "BLEU %.2f / %.2f below 80", last, avg);
    ck_assert_msg(beam >= 80 && beam_avg >= 80, "beam BLEU %.2f / %.2f below 80", beam, beam_avg);
    cleanup_dir();
}
END_TEST

Suite *translation_suite(void) {
    Suite *s = suite_create("translation");
    suite_case(s, "Core", test_batches, test_default_padding, test_batch_independent, test_typed_text,
               test_max_len_rule, test_train_callback, test_memory_readings);
    TCase *progs = suite_case(s, "Programs", test_tsv_end_to_end, test_translate_generated_form,
                              test_dev_test_files, test_ding_corpus, test_resume_exact,
                              test_bad_input, test_translate_refuses, test_average_this_run_only,
                              test_terminal_safe, test_corpus_not_a_file);
    tcase_set_timeout(progs, 240);
    const char *slow = getenv("AIYN_SLOW_TESTS");
    if (slow && !strcmp(slow, "1")) tcase_set_timeout(suite_case(s, "Slow", test_default_run), 600);
    return s;
}
