/* batch.h - batches by approximate length under a token budget (Sec. 5.1).
 *
 * "Sentence pairs were batched together by approximate sequence length.
 * Each training batch contained a set of sentence pairs containing
 * approximately 25000 source tokens and 25000 target tokens."
 *
 * A batch is a (B, T) rectangle: every row is padded to the longest
 * sentence in it. Filling batches in random order wastes much of the
 * rectangle on padding; sorting by length first (bucketing) puts sentences
 * of similar length together, so the same budget carries more real tokens.
 *
 * The budget counts padded slots: a batch takes pairs while
 * rows * longest source <= budget and rows * longest target <= budget
 * (and rows <= max_rows). A pair longer than the budget gets a batch alone.
 */
#ifndef BATCH_H
#define BATCH_H

#include <stdint.h>

typedef struct {
    int *idx;      /* [n] pair indices (into the arrays given to batches_make) */
    int n;         /* rows B                                                  */
    int Ts, Tt;    /* longest source / target in the batch                    */
} Batch;

typedef struct {
    Batch *b;
    int n;                    /* batches                                       */
    int *mem;                 /* every idx, one allocation                     */
    int max_B, max_Ts, max_Tt;
    long real, padded;        /* source+target tokens: real, and with padding  */
} Batches;

/* Groups n pairs (src_len[i], tgt_len[i] tokens) into batches. bucket = 1:
 * sorted by (target length, source length), ties in a seeded random order;
 * bucket = 0: in a seeded random order. Returns 0, or 2 with a message
 * (budget or max_rows below 1, no pairs). */
int batches_make(Batches *out, const int *src_len, const int *tgt_len, int n, int budget,
                 int max_rows, int bucket, uint64_t seed, char *err, int errlen);
void batches_free(Batches *bs);   /* no-op on a zeroed or freed Batches */

/* Fraction of the padded rectangles that is padding: 1 - real / padded. */
double batches_padding(const Batches *bs);

#endif
