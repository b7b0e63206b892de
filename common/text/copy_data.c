/* copy_data.c - the copy task's batches (copy_data.h). */
#include "text/copy_data.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

void copy_batch(int *src, int *tgt_in, int *tgt_out, int B, int T, int vocab, Rng *rng) {
    assert(B >= 1 && T >= 2 && vocab >= 3);
    for (int b = 0; b < B; b++) {
        int *s = src + (size_t)b * T;
        s[0] = COPY_START;
        /* ids 0 (padding) and 1 (start) never appear inside a sequence */
        for (int t = 1; t < T; t++) s[t] = 2 + rng_int(rng, vocab - 2);
        /* The decoder sees the target shifted right by one (Sec. 3.1: "the
         * output embeddings are offset by one position"), so position i is
         * fed tokens < i+1 and must predict token i+1. */
        for (int t = 0; t < T - 1; t++) {
            tgt_in[(size_t)b * (T - 1) + t] = s[t];
            tgt_out[(size_t)b * (T - 1) + t] = s[t + 1];
        }
    }
}

int copy_batch_alloc(CopyBatch *cb, int B, int T) {
    assert(B >= 1 && T >= 2);
    memset(cb, 0, sizeof *cb);
    cb->B = B, cb->T = T;
    cb->src = calloc((size_t)B * T, sizeof(int));
    cb->tgt_in = calloc((size_t)B * (T - 1), sizeof(int));
    cb->tgt_out = calloc((size_t)B * (T - 1), sizeof(int));
    if (!cb->src || !cb->tgt_in || !cb->tgt_out) {
        copy_batch_free(cb);
        return -1;
    }
    return 0;
}

void copy_batch_free(CopyBatch *cb) {
    if (!cb) return;
    free(cb->src);
    free(cb->tgt_in);
    free(cb->tgt_out);
    memset(cb, 0, sizeof *cb);
}

void copy_batch_draw(CopyBatch *cb, int vocab, Rng *rng) {
    copy_batch(cb->src, cb->tgt_in, cb->tgt_out, cb->B, cb->T, vocab, rng);
}
