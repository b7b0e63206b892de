/* copy_task.h - the copy task as an experiment: a model trained on copy
 * batches (text/copy_data.h) and scored on held-out ones (chapters 08, 09,
 * 13). The trainer (model/train.h) takes whatever batch it is given; this
 * is where the copy task's batches are drawn for it, from the trainer's own
 * data stream (Trainer.data_rng), so that a checkpoint of the run holds
 * where the data are and a resumed run draws the same next batch.
 */
#ifndef COPY_TASK_H
#define COPY_TASK_H

#include <stdint.h>
#include "model/decode.h"
#include "model/model.h"
#include "model/train.h"
#include "text/copy_data.h"

/* One training step on the next copy batch: cb (cb->B rows of cb->T tokens,
 * the trainer's t->B and t->T) is filled from t->data_rng, then
 * train_step_global trains on the whole batch (the same global batch on
 * every rank: the data do not depend on how many ranks share them). */
TrainStatus copy_train_step(Trainer *t, CopyBatch *cb, StepStats *st);

/* Greedy decoding of B copy problems src (B,T) with decode.h's decoder
 * (decode_greedy: Sec. 6.1 with beam size 1; the KV cache): ys (B,T) = the
 * start symbol, then the T-1 tokens after it (no end symbol: always T-1).
 * The model must hold B sequences of T tokens. Returns 0, or 2 with a
 * message (out of memory, sizes beyond the model's). */
int copy_greedy(Model *m, int *ys, const int *src, int B, int T, char *err, size_t errlen);

/* Exact-match accuracy on n held-out copy problems drawn from eval_seed
 * (a stream of its own, never the training data's): the fraction whose
 * greedy decode equals the source token for token. *token_acc (may be NULL)
 * gets the fraction of the n*(T-1) decoded tokens that are right. Decodes in
 * batches of m->max_B (copy_greedy). Returns -1 when out of memory. */
double copy_exact_match(Model *m, int n, int T, uint64_t eval_seed, double *token_acc);

#endif
