/* copy_task.c - training on copy batches and exact-match accuracy
 * (copy_task.h). */
#include "task/copy_task.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

TrainStatus copy_train_step(Trainer *t, CopyBatch *cb, StepStats *st) {
    assert(cb->B <= t->B && cb->T <= t->T);
    /* the whole global batch on every rank, from the one data stream: the
     * data do not depend on how many ranks share them */
    copy_batch_draw(cb, t->model->cfg.vocab, &t->data_rng);
    return train_step_global(t, cb->src, cb->tgt_in, cb->tgt_out, cb->B, cb->T, cb->T - 1, st);
}

int copy_greedy(Model *m, int *ys, const int *src, int B, int T, char *err, size_t errlen) {
    /* |x| = T tokens (no padding in a copy problem) + offset -1: the T-1
     * after the start symbol; no end symbol, so always all of them */
    DecodeOpts o = decode_opts_paper(COPY_START, -1);
    o.beam = 1, o.offset = -1;
    Decoder d;
    int rc = decoder_new(&d, m, B, 1, T, T - 1, err, errlen);
    if (!rc) rc = decode_greedy(&d, &o, src, B, T, err, errlen);
    for (int b = 0; b < B && !rc; b++) {
        ys[(size_t)b * T] = COPY_START;
        memcpy(ys + (size_t)b * T + 1, d.out + (size_t)b * d.max_T, (size_t)(T - 1) * sizeof(int));
    }
    decoder_free(&d);
    return rc;
}

double copy_exact_match(Model *m, int n, int T, uint64_t eval_seed, double *token_acc) {
    assert(n >= 1 && T >= 2);
    int mb = m->max_B;
    int *src = calloc((size_t)mb * T, sizeof(int));
    int *tgt_in = calloc((size_t)mb * (T - 1), sizeof(int));
    int *tgt_out = calloc((size_t)mb * (T - 1), sizeof(int));
    int *ys = calloc((size_t)mb * T, sizeof(int));
    char err[256];
    if (!src || !tgt_in || !tgt_out || !ys) {
        free(src), free(tgt_in), free(tgt_out), free(ys);
        return -1.0;
    }
    Rng rng;
    rng_seed(&rng, eval_seed);
    long exact = 0, tokens = 0;
    int rc = 0;
    /* copy_batch draws row after row, so the n problems are the same
     * whatever the chunk size */
    for (int done = 0; done < n && !rc; done += mb) {
        int nb = n - done < mb ? n - done : mb;
        copy_batch(src, tgt_in, tgt_out, nb, T, m->cfg.vocab, &rng);
        rc = copy_greedy(m, ys, src, nb, T, err, sizeof err);
        for (int b = 0; b < nb && !rc; b++) {
            int right = 0;
            for (int j = 1; j < T; j++) right += ys[(size_t)b * T + j] == src[(size_t)b * T + j];
            tokens += right;
            exact += right == T - 1;
        }
    }
    free(src);
    free(tgt_in);
    free(tgt_out);
    free(ys);
    if (rc) return -1.0;
    if (token_acc) *token_acc = (double)tokens / ((double)n * (T - 1));
    return (double)exact / n;
}
