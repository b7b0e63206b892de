/* translate.h - the English-German translation task as library calls:
 * chapter 11 shows each step and trains one model through it, chapter 12
 * trains many on it (Table 3).
 *
 *   corpus (corpus.h) -> BPE (bpe.h) -> ids (Encoded) -> length-bucketed
 *   batches under a token budget (batch.h) -> train N steps -> dev
 *   perplexity per subword and dev BLEU (greedy).
 *
 * A pair is encoded as: src = BPE ids + </s>; the target
 * keeps its BPE ids, and a batch turns them into tgt_in = <s> y and
 * tgt_out = y </s> (teacher forcing, Sec. 3.1's "shifted right").
 */
#ifndef TRANSLATE_H
#define TRANSLATE_H

#include <stddef.h>
#include <stdint.h>
#include "text/batch.h"
#include "text/bleu.h"
#include "text/bpe.h"
#include "text/corpus.h"
#include "model/decode.h"
#include "model/model.h"
#include "model/train.h"

/* ---- a split, encoded: src = BPE ids + </s>; tgt = BPE ids (no <s>, </s>) ---- */
typedef struct {
    int n;
    int **s, **t;         /* [n] ids                                          */
    int *slen, *tlen;     /* [n] source tokens (with </s>), target tokens + 1 */
    int max_s, max_t;
} Encoded;

/* Encodes every pair of c with b. Returns 0, or 1 (out of memory) with a
 * message; e is then safe to encoded_free. */
int encode_split(Encoded *e, const Corpus *c, const Bpe *b, char *err, size_t errlen);
void encoded_free(Encoded *e);   /* no-op on a zeroed or freed Encoded */

/* Pads the pairs of batch b into src (B,Ts), tgt_in (B,Tt), tgt_out (B,Tt). */
void fill_batch(const Encoded *e, const Batch *b, int *src, int *tin, int *tout);

/* The batch for a step: epoch e = step / batches, in an order drawn from
 * (seed, e) alone, so a resumed run draws exactly what an unbroken one
 * does. perm is bs->n ints of scratch. */
const Batch *batch_for_step(const Batches *bs, uint64_t step, uint64_t seed, int *perm);

/* ---- the task: a corpus, its BPE, the encoded splits, batches ---------------- */
typedef struct {
    Corpus train, dev, test;  /* test: empty where the task is scored on dev      */
    Bpe bpe;
    Encoded etrain, edev, etest;
    Batches train_b;          /* sorted by length, in an order drawn from seed    */
    Batches dev_b, test_b;    /* the same budget, sorted, at most train_b's rows  */
    int max_len;              /* PE rows trtask_bleu_greedy's decoding needs      */
                              /* (trtask_max_len)                                 */
    int *src, *tin, *tout;    /* (max_B, max T) batch buffers                     */
    int *perm;                /* (train_b.n) batch order scratch                  */
} TrTask;

/* The rows of the positional table a model of the task needs, one rule:
 * room to decode the longest source of longest_src tokens, whose output
 * may run to out_mul x longest_src + out_add tokens with the <s> ahead of
 * them fed back whole, and to teach the longest target of longest_tgt
 * tokens (<s> y). Chapter 11's beam search writes input + 50 (Sec. 6.1:
 * 1, 50); trtask_bleu_greedy's 2 Ts + 7 (2, 7). */
int trtask_max_len(int longest_src, int longest_tgt, int out_mul, int out_add);

/* Generates n_train + n_dev pairs from seed, learns a BPE of `vocab`
 * symbols on the training side, encodes, and batches under `tokens` a side
 * (at most max_rows rows). Returns 0, or 2 (bad sizes) / 1 (memory) with a
 * message; t is then safe to trtask_free. */
int trtask_build(TrTask *t, int n_train, int n_dev, int vocab, int tokens, int max_rows, uint64_t seed,
                 char *err, size_t errlen);
/* The same on splits the caller made (a TSV file split by corpus_split,
 * the Ding dictionary by corpus_split_fixed): train and dev are copied (the
 * caller keeps and frees its own); seed breaks the batching's ties.
 * trtask_build generates a corpus and calls this, which calls the three
 * steps below in turn. */
int trtask_build_from(TrTask *t, const Corpus *train, const Corpus *dev, int vocab, int tokens, int max_rows,
                      uint64_t seed, char *err, size_t errlen);
/* The steps, for a caller that fills t->train, t->dev and t->test itself
 * (a zeroed TrTask; it owns them now) and shows each step's result:
 *   1. learns a BPE of `vocab` symbols on both sides of the training split
 *      and its English words (bpe_set_words); 0, or bpe_learn's 2 or 1;
 *   2. encodes the three splits; 0, or 1 (out of memory);
 *   3. cuts the batches (train sorted by length and seeded, dev and test
 *      sorted under the same budget and train's largest batch), sets
 *      max_len and allocates the scratch; 0, or 2 / 1 with a message.
 * On a failure t is safe to trtask_free. */
int trtask_learn_bpe(TrTask *t, int vocab, char *err, size_t errlen);
int trtask_encode(TrTask *t, char *err, size_t errlen);
int trtask_batch(TrTask *t, int tokens, int max_rows, uint64_t seed, char *err, size_t errlen);
void trtask_free(TrTask *t);

/* Called by trtask_train after each step (tr->step counts it already, the
 * step's target tokens are in *tokens): a chapter's checkpoints, evaluation
 * and progress lines, in its own code; ctx is the chapter's. */
typedef void (*TrStepFn)(void *ctx, const StepStats *st);

/* Training steps tr->step .. to-1 on the task's training batches (order
 * from seed, as batch_for_step); adds the target tokens seen to *tokens,
 * leaves the last step's numbers in *st, calls each(ctx, st) after every
 * step (each may be NULL). TRAIN_OK, or the first failure (tr->step is
 * then the step before it). */
TrainStatus trtask_train(Trainer *tr, TrTask *t, uint64_t to, uint64_t seed, long *tokens, StepStats *st,
                         TrStepFn each, void *ctx);

/* Perplexity per subword (Table 3's PPL column is per wordpiece): exp of
 * the mean negative log-likelihood of every target token of e, </s>
 * included, under teacher forcing, no dropout, no label smoothing, batched
 * as bs. src, tin, tout: (bs->max_B, max T) scratch. */
double perplexity_of(Model *m, const Encoded *e, const Batches *bs, int *src, int *tin, int *tout);
/* ... of the task's dev set */
double trtask_perplexity(Model *m, TrTask *t);

/* Corpus BLEU-4 (bleu.h, sacreBLEU's 13a tokenizer: on the generated corpus,
 * tokenised already, the same as 'none') of greedy translations of the dev set against its
 * references: decode.h's decode_greedy, each batch's sentences to at most
 * 2 Ts + 7 tokens (Ts the batch's longest source; DecodeOpts.max_out).
 * Returns 0, or 1 (out of memory). */
int trtask_bleu_greedy(Model *m, TrTask *t, Bleu *out);

/* ---- translating a split ------------------------------------------------------
 * Translates every pair of e into hyp[i] (an owned string, in e's order;
 * an old hyp[i] is freed), the sentences decoded batch by batch as bs cuts
 * them, with the KV-cached decoder of decode.h: greedy (decode_greedy)
 * when greedy = 1, else beam search with o (decode_beam; o->beam beams).
 * Either way each sentence may write at most ITS OWN source length +
 * o->offset tokens (Sec. 6.1; within the model's max_len) and stops at its
 * own end symbol; the padding token is never chosen. So a translation does
 * not depend on which sentences share its batch (tests/check_translation.c).
 * o's start_id and end_id are the BPE's <s> and </s>. The encoder runs in
 * m's activations: bs->max_B and bs->max_Ts must fit them. Returns 0, or 2
 * with a message (sizes beyond the model's, out of memory). */
int translate_split(Model *m, const Bpe *bpe, const Encoded *e, const Batches *bs, const DecodeOpts *o,
                    int greedy, char **hyp, char *err, size_t errlen);

#endif
