/* copy_data.h - the copy task's data: random sequences a model learns to copy.
 *
 * The paper trains on WMT translation; a classroom cannot. The Annotated
 * Transformer's stand-in keeps every piece of Section 5 and needs no data:
 * learn to copy a random sequence.
 *
 *   vocabulary 11:  0 = padding, 1 = start symbol, 2..10 = "words"
 *   src     = [1, x1, x2, ..., x9]            (B,T)    T = 10
 *   tgt_in  = [1, x1, ..., x8]                (B,T-1)  the target shifted right
 *   tgt_out = [x1, x2, ..., x9]               (B,T-1)  what each position predicts
 *
 * Batches come from an Rng, row after row, so a seed fixes every batch and
 * the same rows come out whatever the batch size. Training on them and
 * scoring a model on them (a model and this data together) is
 * task/copy_task.h.
 */
#ifndef COPY_DATA_H
#define COPY_DATA_H

#include "core/rng.h"

#define COPY_VOCAB 11
#define COPY_LEN   10    /* T: the start symbol plus 9 random tokens */
#define COPY_PAD   0
#define COPY_START 1

/* A batch of B random copy problems from rng: every row of src is
 * [COPY_START, x_1..x_{T-1}] with x uniform in [2, vocab); the target is
 * the same sequence. src (B,T), tgt_in (B,T-1) = src[:, :T-1] (shifted
 * right: it starts with the start symbol), tgt_out (B,T-1) = src[:, 1:]. */
void copy_batch(int *src, int *tgt_in, int *tgt_out, int B, int T, int vocab, Rng *rng);

/* The arrays of one copy batch, for a caller that draws batch after batch. */
typedef struct {
    int B, T;              /* B sequences of T tokens                         */
    int *src;              /* (B,T)                                           */
    int *tgt_in, *tgt_out; /* (B,T-1) each                                    */
} CopyBatch;

/* Allocates the arrays for B sequences of T tokens (B >= 1, T >= 2).
 * Returns 0, or -1 out of memory (cb is then freed). */
int copy_batch_alloc(CopyBatch *cb, int B, int T);
void copy_batch_free(CopyBatch *cb);   /* no-op on a zeroed or freed CopyBatch */
/* The next batch from rng into cb (copy_batch over its B rows of T). */
void copy_batch_draw(CopyBatch *cb, int vocab, Rng *rng);

#endif
