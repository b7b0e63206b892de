/* 11_translation - English to German end to end: Sections 5.1, 6.1, Table 2.
 *
 * The paper's task, in miniature and offline: a parallel corpus generated
 * from a small grammar (common/text/grammar.h: gender, case, adjective endings,
 * plurals, verb second, verb-final subordinate clauses, the perfect) or a
 * real one (the Ding dictionary's example sentences, or a TSV file),
 * byte-pair encoding learned on the training side with one vocabulary for
 * both languages (Sec. 5.1, common/text/bpe.h), batches by length under a token
 * budget (Sec. 5.1, common/text/batch.h), the Transformer of chapters 07-08
 * (post-LN, tied embeddings, Adam with the Sec. 5.3 schedule, label
 * smoothing, dropout), corpus BLEU-4 (Sec. 6.1, common/text/bleu.h) of greedy decoding
 * and of the paper's beam search (beam 4, alpha 0.6; chapter 09's decoder), the average
 * of the last 5 checkpoints (Sec. 6.1), dev perplexity per subword (Table 3),
 * what the run's memory went to, and the cross-attention alignment of a
 * sentence (for the generated corpus one whose verb moves to the end;
 * Figures 3-5), then its encoder self-attention drawn as the paper draws
 * Figures 3-5: lines whose opacity is the weight (common/io/lineview.h).
 *
 *   build/11_translation                          generate, BPE, train, evaluate
 *   build/11_translation --corpus ding            the Ding dictionary's ~14,700 sentence pairs
 *                                                 (apt-get install trans-de-en), a fixed split
 *   build/11_translation --corpus pairs.tsv       the same on your own data
 *   build/11_translation --corpus ding --dev mydev.tsv --test mytest.tsv
 *   build/11_translation --translate "the man sees the big dog"
 *   build/11_translation --resume out/11_translation/model.ckpt --steps 3000
 *   build/11_translation --threads 2              a second thread (the default is 1)
 *   mpirun -np 2 build/11_translation             data parallel (chapter 13): the same flags,
 *                                                 the same training loop; rank 0 prints and saves
 *
 * The chapter's files: translation.h says which file holds which section.
 *
 * Files in --out: model.ckpt (+ model.ckpt.bpe, the vocabulary), the
 * checkpoints ckpt_STEP.ckpt of the last 5 saves, model_avg.ckpt (+ .bpe),
 * the heatmaps as PNG, the test hypotheses of the four systems as text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fail.h"
#include "core/fileio.h"
#include "core/rss.h"
#include "dist/dist.h"
#include "fast/parallel.h"
#include "io/checkpoint.h"
#include "io/cli.h"
#include "io/plot.h"
#include "io/show.h"
#include "text/batch.h"
#include "text/bpe.h"
#include "text/corpus.h"
#include "translation.h"

static int max2(int a, int b) { return a > b ? a : b; }

/* ---- the configuration: one for the generated corpus, one for real text ----------------
 * Flags not given take the corpus's values. The generated corpus keeps
 * the settings tuned for it (chapter 11's README: they still win there).
 * A real corpus (--corpus ding or a file) of some 15,000 short pairs is
 * 1/300 of WMT 2014's 4.5M and far more varied than the grammar's text:
 *   - a wider model, d_model 128 and N = 3 (1.6M parameters with 2000
 *     symbols), held back by dropout 0.3: on so little data overfitting,
 *     not capacity, is what stops a model (Table 3 (D): dropout matters);
 *   - 2000 BPE symbols: a few thousand is what small corpora need (every
 *     symbol must be seen often enough to learn);
 *   - batches of 2000 tokens a side: 164 steps an epoch of the Ding split;
 *   - a checkpoint every 250 steps, so the average of the last 5 (Sec. 6.1)
 *     spans 1250 steps, a quarter of the run, as the generated corpus's
 *     every 50 of 1500 span a sixth;
 *   - 5000 steps (30 epochs), warmup 800 (5 epochs) at factor 1: the
 *     paper's 4000 warmup steps were 4% of its 100K; 800 are 16% here, as
 *     a small corpus's first epochs are noisy.
 * On 2 cores the real-data run takes about 20 minutes (README). */
static void corpus_config(Opts *o) {
    int real = o->corpus != NULL;
    o->generated = !real;
    o->ding = real && !strcmp(o->corpus, "ding");
    if (!o->vocab) o->vocab = real ? 2000 : 800;
    if (!o->tokens) o->tokens = real ? 2000 : 1000;
    if (!o->layers) o->layers = real ? 3 : 2;
    if (!o->d_model) o->d_model = real ? 128 : 64;
    if (!o->d_ff) o->d_ff = real ? 512 : 256;
    if (!o->heads) o->heads = 4;
    if (o->steps < 0) o->steps = real ? 5000 : 1500;
    if (!o->warmup) o->warmup = real ? 800 : 200;
    if (o->factor < 0) o->factor = real ? 1.0f : 0.6f;
    if (o->dropout < 0) o->dropout = real ? 0.3f : 0.1f;
    if (o->ckpt_every < 0) o->ckpt_every = real ? 250 : 50;   /* the last 5 span 1250 steps, 250 */
}

/* ---- section 1: the corpus ------------------------------------------------------- */
static void count_words(const Corpus *c, int side, long *tokens, int *types) {
    Bpe tmp = {0};
    bpe_set_words(&tmp, side ? c->tgt : c->src, c->n);
    *types = tmp.n_words;
    *tokens = 0;
    for (int i = 0; i < c->n; i++) {
        const char *s = side ? c->tgt[i] : c->src[i];
        for (const char *p = s; *p; p++) *tokens += *p == ' ';
        *tokens += 1;
    }
    bpe_free(&tmp);
}

/* Moves every pair of *from to the end of *to; *from is left empty. */
static void append_pairs(Corpus *to, Corpus *from) {
    to->src = xrealloc(to->src, ((size_t)to->n + from->n + 1) * sizeof(char *));
    to->tgt = xrealloc(to->tgt, ((size_t)to->n + from->n + 1) * sizeof(char *));
    memcpy(to->src + to->n, from->src, (size_t)from->n * sizeof(char *));
    memcpy(to->tgt + to->n, from->tgt, (size_t)from->n * sizeof(char *));
    to->n += from->n;
    free(from->src);
    free(from->tgt);
    memset(from, 0, sizeof *from);
}

/* The pairs of a TSV file given to flag, or the file's problem and exit
 * (1: cannot read it, 2: bad content). */
static void load_tsv(Corpus *c, const char *flag, const char *path) {
    char err[512];
    int rc = corpus_load_tsv(c, path, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: error: %s %s\n", PROG, flag, err);
        exit(rc);
    }
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* How many English sentences of c also occur in the training set (a test
 * sentence seen in training measures memory, not translation). */
static int seen_in_training(const Corpus *c, const Corpus *train) {
    char **sorted = xmalloc(((size_t)train->n + 1) * sizeof(char *));
    memcpy(sorted, train->src, (size_t)train->n * sizeof(char *));
    qsort(sorted, (size_t)train->n, sizeof(char *), str_cmp);
    int seen = 0;
    for (int i = 0; i < c->n; i++)
        seen += bsearch(&c->src[i], sorted, (size_t)train->n, sizeof(char *), str_cmp) != NULL;
    free(sorted);
    return seen;
}

/* Where the data come from: the grammar, the Ding dictionary (a fixed
 * split) or a TSV file (a seeded split); --dev / --test FILE replace those
 * splits, and what a split no longer needs trains. */
static void section_corpus(const Opts *o, TrTask *t) {
    char err[512];
    show_section("1. A parallel corpus (stand-in for WMT 2014 English-German, Sec. 5.1)");
    /* dev: 300 pairs of the grammar's or a file's, 500 of the dictionary's */
    int n_dev = o->n_dev ? o->n_dev : o->ding ? 500 : 300, n_test = o->n_test;
    if (o->generated) {
        /* a split a file replaces is generated with one pair and dropped */
        if (corpus_generate(&t->train, &t->dev, &t->test, o->n_train, o->dev ? 1 : n_dev, o->test ? 1 : n_test,
                            o->seed, err, sizeof err))
            cli_fail(PROG, "%s", err);
        printf("generated from a grammar (common/text/grammar.c), seed %llu; every sentence distinct,\n"
               "so train, dev and test share none\n", (unsigned long long)o->seed);
        if (o->dev) corpus_free(&t->dev);
        if (o->test) corpus_free(&t->test);
    } else {
        Corpus all, phrases = {0};
        int rc;
        if (o->ding) {
            rc = corpus_load_ding(&all, o->ding_phrases ? &phrases : NULL, DING_PATH, err, sizeof err);
            if (rc) {
                fprintf(stderr, "%s: error: --corpus ding: %s\n", PROG, err);
                exit(rc);
            }
            printf("the Ding dictionary (trans-de-en, GPL-2+), read from %s at run time; fixed split\n"
                   "%d example sentence pairs; dev and test ranked by a hash of the English sentence\n"
                   "(corpus_split_fixed: the same split on every machine and with every --seed)\n",
                   DING_PATH, all.n);
        } else {
            load_tsv(&all, "--corpus", o->corpus);
            printf("read %d pairs from %s\n", all.n, o->corpus);
        }
        if (o->dev && o->test) {   /* nothing to split off: the whole corpus trains */
            append_pairs(&t->train, &all);
            printf("--dev and --test given: every pair of it trains\n");
        } else {
            rc = o->ding ? corpus_split_fixed(&all, &t->train, &t->dev, &t->test, n_dev, n_test, err, sizeof err)
                         : corpus_split(&all, &t->train, &t->dev, &t->test, n_dev, n_test, o->seed, err, sizeof err);
            corpus_free(&all);
            if (rc) cli_fail(PROG, "--corpus %s: %s", o->corpus, err);
            if (o->dev) append_pairs(&t->train, &t->dev);     /* the file replaces it: back to training */
            if (o->test) append_pairs(&t->train, &t->test);
        }
        if (o->ding_phrases) {
            printf("--ding-phrases: %d word and phrase pairs of the dictionary added to the training\n"
                   "split only (dev and test stay sentences)\n", phrases.n);
            append_pairs(&t->train, &phrases);
        }
    }
    if (o->dev) {
        load_tsv(&t->dev, "--dev", o->dev);
        printf("dev: %d pairs read from %s\n", t->dev.n, o->dev);
    }
    if (o->test) {
        load_tsv(&t->test, "--test", o->test);
        printf("test: %d pairs read from %s\n", t->test.n, o->test);
    }
    long te, tg;
    int ve, vg;
    count_words(&t->train, 0, &te, &ve);
    count_words(&t->train, 1, &tg, &vg);
    printf("pairs: train %d, dev %d, test %d\n", t->train.n, t->dev.n, t->test.n);
    printf("train words: English %ld (%d distinct), German %ld (%d distinct)\n", te, ve, tg, vg);
    if (!o->generated)
        printf("English sentences also in training: dev %d of %d, test %d of %d\n", seen_in_training(&t->dev, &t->train),
               t->dev.n, seen_in_training(&t->test, &t->train), t->test.n);
    for (int i = 0; i < 4 && i < t->train.n; i++) {
        tr_print_wrapped("  en: ", t->train.src[i]);
        tr_print_wrapped("  de: ", t->train.tgt[i]);
    }
}
static long count_unk(const Encoded *e) {
    long n = 0;
    for (int i = 0; i < e->n; i++) {
        for (int j = 0; j < e->slen[i] - 1; j++) n += e->s[i][j] == BPE_UNK;
        for (int j = 0; j < e->tlen[i] - 1; j++) n += e->t[i][j] == BPE_UNK;
    }
    return n;
}

static void section_bpe(const Opts *o, TrTask *t) {
    char err[512];
    show_section("2. Byte-pair encoding, one vocabulary for both languages (Sec. 5.1)");
    if (trtask_learn_bpe(t, o->vocab, err, sizeof err)) cli_fail(PROG, "--vocab: %s", err);
    /* saved with the vocabulary: --translate writes typed input the same way */
    t->bpe.tokenised = o->generated;
    printf("learned on the %d training pairs (both sides):\n%d symbols = 4 special + %d characters "
           "+ %d merges%s\n", t->train.n, t->bpe.vocab, t->bpe.n_chars, t->bpe.n_merges,
           t->bpe.vocab < o->vocab ? " (no pair occurs twice any more: stopped early)" : "");
    printf("first merges (most frequent pair first):");
    for (int i = 0; i < 8 && i < t->bpe.n_merges; i++) {
        const BpeSymbol *s = &t->bpe.sym[BPE_N_SPECIAL + t->bpe.n_chars + i];
        char l[64], r[64], sl[4 * 64], sr[4 * 64];   /* symbols of the corpus: printed escaped */
        bpe_symbol_str(&t->bpe, s->left, l, sizeof l);
        bpe_symbol_str(&t->bpe, s->right, r, sizeof r);
        printf("%s %s+%s", i % 4 == 0 ? "\n " : "", fio_escape(sl, sizeof sl, l, (size_t)-1),
               fio_escape(sr, sizeof sr, r, (size_t)-1));
    }
    printf("\n");
    tr_show_segmentations(t, o->generated);
    if (trtask_encode(t, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        exit(1);
    }
    long ns = 0, nt = 0;
    for (int i = 0; i < t->etrain.n; i++) ns += t->etrain.slen[i] - 1, nt += t->etrain.tlen[i] - 1;
    printf("train subwords per sentence: English %.2f, German %.2f; longest (with </s>): %d, %d\n",
           (double)ns / t->etrain.n, (double)nt / t->etrain.n, t->etrain.max_s, t->etrain.max_t);
    if (!o->generated)
        printf("characters training never saw (each one <unk>, bpe.h): dev %ld, test %ld\n", count_unk(&t->edev),
               count_unk(&t->etest));
}
/* ---- section 3: batches by length under a token budget ------------------------------ */
/* The task's batches (trtask_batch: training sorted by length, dev and
 * test under the same budget), against the same pairs in random order. */
static void section_batches(const Opts *o, TrTask *t) {
    char err[256];
    show_section("3. Batches by approximate length, a token budget per batch (Sec. 5.1)");
    Batches flat;
    const Batches *bs = &t->train_b;
    if (batches_make(&flat, t->etrain.slen, t->etrain.tlen, t->etrain.n, o->tokens, o->max_rows, 0, o->seed, err,
                     sizeof err) ||
        trtask_batch(t, o->tokens, o->max_rows, o->seed, err, sizeof err))
        cli_fail(PROG, "%s", err);
    printf("paper: ~25000 source + 25000 target tokens a batch; here --tokens %d a side\n"
           "(padding counted), at most %d rows a batch\n", o->tokens, o->max_rows);
    printf("  %-22s %8s %10s %10s %9s\n", "", "batches", "rows/batch", "real tok", "padding");
    printf("  %-22s %8d %10.1f %10ld %8.1f%%\n", "random order", flat.n, (double)t->etrain.n / flat.n, flat.real,
           100 * batches_padding(&flat));
    printf("  %-22s %8d %10.1f %10ld %8.1f%%\n", "sorted by length", bs->n, (double)t->etrain.n / bs->n, bs->real,
           100 * batches_padding(bs));
    double ratio = (double)flat.n / bs->n;
    printf("bucketing by length cuts the padding from %.1f%% to %.1f%%: an epoch takes %.2fx %s steps\n",
           100 * batches_padding(&flat), 100 * batches_padding(bs), ratio > 1 ? ratio : 1 / ratio,
           ratio >= 1 ? "fewer" : "more");
    printf("largest batch: src [batch=%d, seq=%d], tgt [batch=%d, seq=%d] (not all at once)\n", bs->max_B,
           bs->max_Ts, bs->max_B, bs->max_Tt);
    batches_free(&flat);
}

/* ---- section 4: training ---------------------------------------------------------------- */

/* model.ckpt and model.ckpt.bpe, written together (each atomically), by
 * rank 0 alone; every rank stops if it could not */
static void save_with_bpe(Run *r, const TrTask *t, const char *path) {
    char err[512] = "", bp[1100];
    snprintf(bp, sizeof bp, "%s.bpe", path);
    int bad = dist_rank() == 0 && (trainer_save(&r->tr, path, err, sizeof err) || bpe_save(&t->bpe, bp, err, sizeof err));
    if (dist_max_int(bad)) dist_exit(1, "%s", bad ? err : "rank 0 could not save a checkpoint");
}

static void remember_ckpt(Run *r, const char *path, int keep) {
    if (r->n_ckpt > 0 && !strcmp(r->ckpt[r->n_ckpt - 1], path)) return;   /* saved again (resume at the end) */
    if (r->n_ckpt == keep) {   /* drop the oldest file and its vocabulary (rank 0's files) */
        char bp[1100];
        snprintf(bp, sizeof bp, "%s.bpe", r->ckpt[0]);
        if (dist_rank() == 0) remove(r->ckpt[0]), remove(bp);
        memmove(r->ckpt[0], r->ckpt[1], sizeof r->ckpt[0] * (size_t)(keep - 1));
        r->n_ckpt--;
    }
    snprintf(r->ckpt[r->n_ckpt++], sizeof r->ckpt[0], "%s", path);
}

/* --resume: the model, the trainer and the step from the checkpoint, which
 * must be this run's (its positional table long enough, the vocabulary
 * beside it this run's), and the checkpoints the earlier run left for the
 * average: the last --average files of the save steps, of this run only. */
static void resume_run(const Opts *o, const TrTask *t, Run *r, const TrainHyper *hp, int Ts, int max_len,
                       int longest_src) {
    char err[512];
    const Batches *bs = &t->train_b;
    if (trainer_resume(&r->tr, &r->m, o->resume, hp, bs->max_B, Ts, bs->max_B, err, sizeof err))
        cli_fail(PROG, "--resume: %s", err);
    if (r->m.cfg.max_len < max_len)   /* now, not after training */
        cli_fail(PROG, "--resume %s: its positional table has %d rows; this run needs %d (the longest\n"
                 "  source, %d tokens, + %d for decoding + 1): it was saved by an older build or for\n"
                 "  other data; train afresh", o->resume, r->m.cfg.max_len, max_len, longest_src, OUT_OFFSET);
    /* the vocabulary saved beside the checkpoint must be this run's, symbol for symbol */
    CkptRun vocab = {.cfg = &r->m.cfg, .bpe = &t->bpe};
    int rc = checkpoint_of_run(o->resume, &vocab, NULL, err, sizeof err);
    if (rc == 1) cli_fail(PROG, "--resume: %s", err);
    if (rc)
        cli_fail(PROG, "--resume %s: its vocabulary (%s.bpe) is not this run's: the corpus, --seed or --vocab "
                 "differ from the run that saved it", o->resume, o->resume);
    r->m.cfg.dropout = o->dropout;
    printf("resumed %s at step %llu\n", o->resume, (unsigned long long)r->tr.step);
    char found[N_AVG_MAX][1024];
    int nf = 0, seen = 0;
    CkptRun run = {.cfg = &r->m.cfg, .bpe = &t->bpe, .state = 1, .data_rng = r->tr.data_rng.state};
    for (uint64_t s = o->ckpt_every > 0 ? r->tr.step / o->ckpt_every * o->ckpt_every : 0;
         o->ckpt_every > 0 && s > 0 && seen < o->n_avg; s -= (uint64_t)o->ckpt_every) {
        char why[700];
        snprintf(found[nf], sizeof found[nf], "%s/ckpt_%06llu.ckpt", o->out, (unsigned long long)s);
        if (access(found[nf], F_OK) != 0) continue;
        seen++;
        run.step = s;
        if (!checkpoint_of_run(found[nf], &run, NULL, why, sizeof why)) nf++;
        else printf("not averaged: %s is not a save of this run: %s\n", found[nf], why);
    }
    while (nf > 0) remember_ckpt(r, found[--nf], o->n_avg);
}

/* A new model of the flags' sizes, and its trainer. The memory goes by the
 * largest BATCH, not by the limits: under a token budget a batch is many
 * short rows or a few long ones, and the most rows of any times the longest
 * of any (model_build's per-dimension block) is a batch that never comes.
 * The activation block is the largest model_acts_floats of every batch that
 * runs, the trainer's loss gradient (rows x vocab) the largest B*Tt. */
static void new_run(const Opts *o, const TrTask *t, Run *r, const TrainHyper *hp, int Ts, int Tt, int max_len) {
    char err[512];
    const Batches *bs = &t->train_b;
    Config c = config_base();
    c.N = o->layers;
    c.d_model = o->d_model;
    c.d_ff = o->d_ff;
    c.h = o->heads;
    c.d_k = c.d_v = o->d_model / o->heads;
    c.vocab = t->bpe.vocab;
    c.max_len = max_len;
    c.dropout = o->dropout;
    c.pad_id = BPE_PAD;
    size_t acts = 0;
    int rows_cap = 1;
    const Batches *runs[3] = {bs, &t->dev_b, &t->test_b};
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < runs[j]->n; k++) {
            const Batch *b = &runs[j]->b[k];   /* test: only the encoder runs (then decode.h's cache) */
            size_t a = model_acts_floats(&c, b->n, b->Ts, j == 2 ? 1 : b->Tt);
            if (a > acts) acts = a;
            if (j == 0) rows_cap = max2(rows_cap, b->n * b->Tt);
        }
    if (model_build_cap(&r->m, &c, bs->max_B, Ts, Tt, acts, o->seed, err, sizeof err) ||
        trainer_init_cap(&r->tr, &r->m, hp, bs->max_B, Tt + 1, rows_cap, o->seed ^ 0xDA7A5EEDull, err, sizeof err))
        cli_fail(PROG, "%s", err);
}

/* Data parallel (chapter 13): every rank has every batch, and each needs a
 * row of the smallest; one rank: nothing to say. */
static void attach_ranks(const Opts *o, const TrTask *t, Run *r) {
    char err[512];
    const Batches *bs = &t->train_b;
    int P = dist_size(), rows = bs->max_B;
    for (int k = 0; k < bs->n; k++) rows = bs->b[k].n < rows ? bs->b[k].n : rows;
    if (rows < P)
        dist_exit(2, "a training batch has only %d sentence pair%s, too few for %d ranks: raise --tokens or run fewer ranks",
                  rows, rows == 1 ? "" : "s", P);
    if (dist_attach(&r->dt, &r->tr, 50, err, sizeof err)) dist_exit(2, "%s", err);
    if (P > 1) {
        int L = train_leaves(o->micro, rows, P);
        printf("data parallel: %d ranks (%s), each on its slice of every batch (chapter 13); %d slices a step,\n", P,
               dist_library(), L);
        if (L == train_leaves(o->micro, rows, 1)) printf("  added as one process adds them: the same bits as one process\n");
        else if (P & (P - 1)) printf("  added in another order than one process: equal to float rounding\n");
        else printf("  added in another order than one process: equal to float rounding (--micro-batches %d: the same bits)\n", P);
    }
}

/* The model and its trainer, new or resumed, sized for every batch the run
 * has; then the ranks of a data-parallel run. */
static void build_model(const Opts *o, const TrTask *t, Run *r) {
    const Batches *bs = &t->train_b;
    char err[512], en[CORPUS_MAX_LINE + 1], de[CORPUS_MAX_LINE + 1];
    /* The positional table (max_len rows) covers every position the run
     * uses: teacher forcing (the longest target of train and dev, <s> y),
     * and decoding, which may write input + 50 tokens (Sec. 6.1) for the
     * longest source of any split or section 6's sentence, + 1 for the <s>
     * ahead of them (an output of full length fed back whole). */
    tr_demo_sentence(t, o->generated, en, sizeof en, de, sizeof de);
    int demo_Ts = bpe_encode(&t->bpe, en, NULL, 0) + 1;
    int longest_src = max2(max2(t->etrain.max_s, t->edev.max_s), max2(t->etest.max_s, demo_Ts));
    int max_len = trtask_max_len(longest_src, max2(t->etrain.max_t, t->edev.max_t), 1, OUT_OFFSET);
    /* What runs through the model's activations: the training batches, the
     * dev batches (perplexity) and the test batches (their encoder, when
     * decoding): never an output of input + 50 tokens, which decoding does
     * in its own cache (decode.h). Each dimension's limit is the longest of
     * any of them; the trainer wants source room for its target + 1
     * (train.h: a copy-task shape, T source and T-1 target tokens). */
    int Tt = max2(bs->max_Tt, t->edev.max_t);
    int Ts = max2(max2(bs->max_Ts, t->edev.max_s), max2(t->etest.max_s, Tt + 1));
    TrainHyper hp = train_hyper_paper();
    hp.eps_ls = o->eps_ls;
    hp.warmup = o->warmup;
    hp.factor = o->factor;
    if (o->resume) resume_run(o, t, r, &hp, Ts, max_len, longest_src);
    else new_run(o, t, r, &hp, Ts, Tt, max_len);
    const Config *c = &r->m.cfg;
    printf("model: N=%d d_model=%d d_ff=%d h=%d d_k=%d vocab=%d (shared: source, target, output; "
           "Sec. 3.4)\n       post-LN, P_drop %.2f, %zu parameters; max_len %d (the longest source, %d\n"
           "       tokens, + %d + 1 for decoding)\n", c->N, c->d_model, c->d_ff, c->h, c->d_k, c->vocab,
           (double)c->dropout, model_param_count(c), c->max_len, longest_src, OUT_OFFSET);
    if (trainer_set_micro(&r->tr, o->micro, err, sizeof err)) cli_fail(PROG, "--micro-batches: %s", err);
    attach_ranks(o, t, r);
}

/* What the training loop does after each step (trtask_train's TrStepFn):
 * the chapter's checkpoints, --eval-every, and the dev-perplexity lines. */
typedef struct {
    const Opts *o;
    TrTask *t;
    Run *r;
    uint64_t first;               /* the step training started at (a resumed run's) */
    int todo, every;              /* steps to take; a progress line every this many */
    double t0, eval_s, eval_cpu;  /* the evaluations in between, left out of training time */
} Progress;

static void after_step(void *ctx, const StepStats *st) {
    Progress *p = ctx;
    const Opts *o = p->o;
    Run *r = p->r;
    int i = (int)(r->tr.step - p->first) - 1;   /* the step just taken, from 0 */
    char path[1100];
    if (dist_rank() == 0) show_progress("step", (long)r->tr.step, o->steps);   /* stderr, only under --section N */
    if (o->ckpt_every > 0 && r->tr.step % (uint64_t)o->ckpt_every == 0 && i != p->todo - 1) {
        snprintf(path, sizeof path, "%s/ckpt_%06llu.ckpt", o->out, (unsigned long long)r->tr.step);
        save_with_bpe(r, p->t, path);
        remember_ckpt(r, path, o->n_avg);
    }
    if (dist_rank() == 0 && o->eval_every > 0 && (r->tr.step % (uint64_t)o->eval_every == 0 || i == p->todo - 1)) {
        double e0 = clock_wall_s(), ec = clock_cpu_s();
        tr_eval_during_training(o, p->t, r, e0 - p->t0 - p->eval_s);
        p->eval_s += clock_wall_s() - e0, p->eval_cpu += clock_cpu_s() - ec;
    }
    if (dist_rank() == 0 && (i == 0 || (i + 1) % p->every == 0 || i == p->todo - 1)) {
        double e0 = clock_wall_s(), ec = clock_cpu_s(), ppl = trtask_perplexity(&r->m, p->t);
        p->eval_s += clock_wall_s() - e0, p->eval_cpu += clock_cpu_s() - ec;
        double el = clock_wall_s() - p->t0 - p->eval_s;
        double eta = el / (i + 1) * (p->todo - i - 1);
        printf("  step %5llu/%d  loss %.3f  dev ppl %6.3f  lr %.2e  %6.0f tok/s  %5.1fs  ETA %5.1fs\n",
               (unsigned long long)r->tr.step, o->steps, st->loss, ppl, st->lr, r->tokens / (el > 0 ? el : 1),
               el, eta);
        fflush(stdout);
    }
}

static void section_train(const Opts *o, TrTask *t, Run *r) {
    show_section("4. Training: Adam, warmup, label smoothing, dropout (Sec. 5.3, 5.4)");
    if (!o->generated)
        printf("a real corpus: N=%d d_model=%d d_ff=%d h=%d, P_drop %.2f, %d BPE symbols, %d tokens a batch,\n"
               "%d steps, warmup %d, factor %g (corpus_config in main.c says why; flags override)\n", o->layers,
               o->d_model, o->d_ff, o->heads, (double)o->dropout, o->vocab, o->tokens, o->steps, o->warmup,
               (double)o->factor);
    r->rss_before = rss_now();
    build_model(o, t, r);
    Progress p = {.o = o, .t = t, .r = r, .first = r->tr.step};
    p.todo = (uint64_t)o->steps > p.first ? o->steps - (int)p.first : 0;
    p.every = p.todo / 8 > 1 ? p.todo / 8 : 1;
    printf("%d steps (%llu to %d), %d batches an epoch; warmup %d, factor %g, eps_ls %.2f\n", p.todo,
           (unsigned long long)p.first, o->steps, t->train_b.n, o->warmup, (double)o->factor, (double)o->eps_ls);
    /* Training time leaves out the evaluations in between (dev perplexity,
     * --eval-every's translations): eval_s and eval_cpu are theirs. */
    double c0 = clock_cpu_s();
    p.t0 = clock_wall_s();
    StepStats st = {0};
    char path[1100];
    /* the library's loop (task/translate.h), the batches in the order of --seed;
     * under mpirun each rank trains its slice, gradients summed (dist.h) */
    TrainStatus ts = trtask_train(&r->tr, t, p.first + (uint64_t)p.todo, o->seed, &r->tokens, &st, after_step, &p);
    if (ts != TRAIN_OK)   /* the global loss and gradients: every rank meets it at the same step */
        dist_exit(1, "training stopped at step %llu: %s; try a smaller --factor", (unsigned long long)r->tr.step + 1,
                  train_status_str(ts));
    r->train_s = clock_wall_s() - p.t0 - p.eval_s;
    double train_cpu = clock_cpu_s() - c0 - p.eval_cpu;
    snprintf(path, sizeof path, "%s/ckpt_%06llu.ckpt", o->out, (unsigned long long)r->tr.step);
    save_with_bpe(r, t, path);
    remember_ckpt(r, path, o->n_avg);
    snprintf(path, sizeof path, "%s/model.ckpt", o->out);
    save_with_bpe(r, t, path);
    printf("trained %d steps in %.1f s (%.0f target tokens/s), last loss %.9f\nsaved %s (+ .bpe)\n", p.todo,
           r->train_s, r->tokens / (r->train_s > 0 ? r->train_s : 1), st.loss, path);
    printf("training CPU time %.1f s (all threads; %.1f s of evaluation in between left out)\n", train_cpu,
           p.eval_s);
}

int main(int argc, char **argv) {
    /* vocab .. dropout left 0 (steps, factor, dropout -1): the corpus's configuration (corpus_config) */
    Opts o = {.n_train = 10000, .n_dev = 0, .n_test = 500, .max_rows = 96, .ckpt_every = -1, .n_avg = 5,
              .threads = 1, .micro = 1, .steps = -1, .factor = -1, .eps_ls = 0.1f, .dropout = -1, .seed = 42,
              .out = "out/11_translation"};
    int quick = 0;
    if (cli_given(argc, argv, "--quick"))
        o.n_train = 300, o.n_dev = 10, o.n_test = 10, o.steps = 4, o.layers = 1, o.d_model = 16, o.heads = 2,
        o.d_ff = 32, o.vocab = 200, o.tokens = 300, o.ckpt_every = 2;
    CliOption opts[] = {
        {"--train-size", CLI_INT, &o.n_train, "generated training pairs", 1, 2000000},
        {"--dev-size", CLI_INT, &o.n_dev, "dev pairs (perplexity); default 300, or 500 with --corpus ding", 0, 100000},
        {"--test-size", CLI_INT, &o.n_test, "test pairs (BLEU)", 1, 100000},
        {"--corpus", CLI_STRING, &o.corpus, "a TSV file (source<TAB>target, UTF-8), or ding: the Ding dictionary", 0, 0},
        {"--ding-phrases", CLI_FLAG, &o.ding_phrases, "with --corpus ding: train on its word/phrase pairs too", 0, 0},
        {"--dev", CLI_STRING, &o.dev, "dev pairs from this TSV file instead of a split", 0, 0},
        {"--test", CLI_STRING, &o.test, "test pairs from this TSV file instead of a split", 0, 0},
        {"--vocab", CLI_INT, &o.vocab, "BPE vocabulary size, shared (paper: 37000); default 800 generated, 2000 a real corpus", 1, 1000000},
        {"--tokens", CLI_INT, &o.tokens, "token budget per batch and side (paper: 25000); default 1000 generated, 2000 real", 1, 10000000},
        {"--max-rows", CLI_INT, &o.max_rows, "at most this many sentence pairs per batch", 1, 100000},
        {"--layers", CLI_INT, &o.layers, "N (paper 6); default 2 generated, 3 real", 1, 64},
        {"--d-model", CLI_INT, &o.d_model, "d_model (paper 512); default 64 generated, 128 real", 2, 4096},
        {"--d-ff", CLI_INT, &o.d_ff, "d_ff (paper 2048); default 256 generated, 512 real", 1, 16384},
        {"--heads", CLI_INT, &o.heads, "h; must divide d_model (paper 8); default 4", 1, 256},
        {"--steps", CLI_INT, &o.steps, "train until this many steps in total; default 1500 generated, 5000 real", 0, 100000000},
        {"--warmup", CLI_INT, &o.warmup, "warmup_steps of Sec. 5.3 (paper 4000); default 200 generated, 800 real", 1, 100000000},
        {"--factor", CLI_FLOAT, &o.factor, "multiplies the Sec. 5.3 learning rate; default 0.6 generated, 1 real", 1e-6, 1e6},
        {"--label-smoothing", CLI_FLOAT, &o.eps_ls, "eps_ls (paper 0.1)", 0, 0.99},
        {"--dropout", CLI_FLOAT, &o.dropout, "P_drop (paper 0.1); default 0.1 generated, 0.3 real", 0, 0.95},
        {"--checkpoint-every", CLI_INT, &o.ckpt_every, "save every K steps (0: only at the end); default 50 generated, 250 real", 0, 100000000},
        {"--average", CLI_INT, &o.n_avg, "average the last this many checkpoints (paper 5)", 1, N_AVG_MAX},
        {"--resume", CLI_STRING, &o.resume, "continue the run saved in this checkpoint", 0, 0},
        {"--translate", CLI_STRING, &o.translate, "translate this English sentence with --model", 0, 0},
        {"--model", CLI_STRING, &o.model, "checkpoint for --translate (default OUT/model.ckpt)", 0, 0},
        {"--threads", CLI_INT, &o.threads, "threads of the pool (1: steadiest on a shared machine)", 1, 256},
        {"--micro-batches", CLI_INT, &o.micro, "G slices per step, gradients added as a fixed tree: mpirun -np P (P dividing G) gives one process's bits (chapter 13)", 1, TRAIN_MAX_MICRO},
        {"--seed", CLI_U64, &o.seed, "seed for the corpus, weights, batches, dropout", 0, 0},
        {"--out", CLI_STRING, &o.out, "output folder", 0, 0},
        {"--eval-every", CLI_INT, &o.eval_every, "every K steps: dev PPL and greedy test BLEU, hypotheses saved (0: off)", 0, 100000000},
        {"--dump-data", CLI_STRING, &o.dump, "also write the encoded splits and batches to this folder (make bench-translate)", 0, 0},
        {"--quick", CLI_FLAG, &quick, "a short run: 300 pairs, 4 steps of a 1-layer d_model 16 model (make smoke)", 0, 0},
    };
    setvbuf(stdout, NULL, _IOLBF, 0);   /* errors (stderr) land after what was printed */
    dist_init(&argc, &argv, PROG);      /* one rank unless started by mpirun (chapter 13) */
    cli_parse(argc, argv, PROG, "English->German translation end to end (Sec. 5.1, 6.1, Table 2)", opts,
              CLI_COUNT(opts));
    show_lecture_sections(7);   /* its banners: "1." .. "7." */
    corpus_config(&o);
    if (o.d_model % o.heads) cli_fail(PROG, "--d-model (%d) must be divisible by --heads (%d)", o.d_model, o.heads);
    if (o.ding_phrases && !(o.corpus && !strcmp(o.corpus, "ding"))) cli_fail(PROG, "--ding-phrases needs --corpus ding");
    if (o.translate && dist_size() > 1) dist_exit(2, "--translate runs as one process, not under mpirun");
    dist_quiet_others();                /* rank 0 alone prints and writes */
    if (dist_max_int(dist_rank() == 0 && plot_mkdir(o.out))) dist_exit(1, "cannot create the output folder --out %s", o.out);
    parallel_set_threads(o.threads);
    if (o.translate) {
        int rc = tr_run_translate(&o);
        dist_finalize();
        return rc;
    }
    double t0 = clock_wall_s();
    TrTask t = {0};   /* the corpus, its BPE, the encoded splits, the batches */
    Run r = {0};
    section_corpus(&o, &t);
    section_bpe(&o, &t);
    section_batches(&o, &t);
    if (o.dump && dist_rank() == 0) tr_dump_data(o.dump, &t);
    section_train(&o, &t, &r);
    dist_detach(&r.dt);
    trainer_free(&r.tr);                /* Adam's moments and the loss gradient: training is over */
    if (dist_rank() == 0) {             /* the others trained; evaluation is rank 0's */
        tr_section_evaluate(&o, &t, &r);
        tr_section_attention(&o, &r, &t);
        printf("\nwhole run: %.1f s\n", clock_wall_s() - t0);
    }
    model_free(&r.m);
    trtask_free(&t);
    dist_finalize();
    return 0;
}
