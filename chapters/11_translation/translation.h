/* translation.h - what chapter 11's files share: the run's settings, the
 * training run, and the functions one file of the chapter calls in another.
 *
 *   main.c           the table of contents; sections 1-4 (corpus, BPE,
 *                    batches, training)
 *   words.c          sentences and subwords on the terminal, wrapped and escaped
 *   evaluate.c       section 5: greedy and beam BLEU, averaging, memory
 *   alignment.c      sections 6-7: the attention of one sentence
 *   translate_cli.c  --translate: one sentence through a saved model
 *   dump_data.c      --dump-data: the run's ids and batches as text
 *
 * The task itself (corpus, BPE, encoded splits, batches, the training loop)
 * is the library's: task/translate.h's TrTask, which chapter 12 trains too.
 * Functions shared between the files carry tr_ (the program links alone,
 * but the test runner links every chapter's files together). */
#ifndef TRANSLATION_H
#define TRANSLATION_H

#include <stdint.h>
#include "dist/dist.h"
#include "model/model.h"
#include "model/train.h"
#include "task/translate.h"

#define PROG "11_translation"
#define N_AVG_MAX 16
/* Sec. 6.1: "maximum output length to input length + 50" */
#define OUT_OFFSET 50

/* ---- the run's settings ------------------------------------------------------ */
typedef struct {
    int n_train, n_dev, n_test, vocab, tokens, max_rows;
    int layers, d_model, d_ff, heads, steps, warmup, ckpt_every, n_avg, threads, micro, ding_phrases, eval_every;
    float factor, eps_ls, dropout;
    uint64_t seed;
    const char *corpus, *dev, *test, *resume, *translate, *model, *out, *dump;
    int generated;      /* 1: the grammar's corpus (tokenised, structure known); 0: read (--corpus) */
    int ding;           /* 1: --corpus ding                                                       */
} Opts;

/* ---- the training run ----------------------------------------------------------- */
typedef struct {
    Model m;
    Trainer tr;
    DistTrainer dt;               /* data parallel under mpirun (dist.h); one rank: inert */
    char ckpt[N_AVG_MAX][1024];   /* the last saved checkpoints, oldest first */
    int n_ckpt;
    double train_s;
    long tokens;
    double rss_before;            /* bytes resident before the model was built */
} Run;

/* words.c */
void tr_print_wrapped(const char *label, const char *raw);
void tr_print_ids(const Bpe *b, const char *raw_label, const int *ids, int n);
void tr_print_segmentation(const Bpe *b, const char *label, const char *s);
void tr_show_segmentations(const TrTask *t, int generated);

/* evaluate.c */
void tr_section_evaluate(const Opts *o, TrTask *t, Run *r);
void tr_eval_during_training(const Opts *o, TrTask *t, Run *r, double train_s);

/* alignment.c */
void tr_demo_sentence(const TrTask *t, int generated, char *en, size_t enlen, char *de, size_t delen);
void tr_section_attention(const Opts *o, Run *r, const TrTask *t);
void tr_model_for_one(Model *dst, const Model *src, int Ts, int Tt);
void tr_show_alignment(Model *m, const Bpe *bpe, const char *en, int generated_demo, int heads, const char *out,
                       const char *name);

/* translate_cli.c */
int tr_run_translate(const Opts *o);

/* dump_data.c */
void tr_dump_data(const char *dir, const TrTask *t);

#endif
