/* batch.c - token-budget batching by length (see batch.h). */
#include "text/batch.h"
#include "core/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int i, key1, key2, rank;
} SortItem;

static int item_cmp(const void *pa, const void *pb) {
    const SortItem *a = pa, *b = pb;
    if (a->key1 != b->key1) return a->key1 < b->key1 ? -1 : 1;
    if (a->key2 != b->key2) return a->key2 < b->key2 ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

int batches_make(Batches *out, const int *src_len, const int *tgt_len, int n, int budget,
                 int max_rows, int bucket, uint64_t seed, char *err, int errlen) {
    memset(out, 0, sizeof *out);
    if (n < 1) return snprintf(err, (size_t)errlen, "no sentence pairs to batch"), 2;
    if (budget < 1) return snprintf(err, (size_t)errlen, "token budget %d: it must be at least 1", budget), 2;
    if (max_rows < 1) return snprintf(err, (size_t)errlen, "max rows %d: it must be at least 1", max_rows), 2;
    SortItem *it = malloc((size_t)n * sizeof *it);
    out->mem = malloc((size_t)n * sizeof(int));
    out->b = calloc((size_t)n, sizeof(Batch));
    if (!it || !out->mem || !out->b) {
        free(it);
        batches_free(out);
        return snprintf(err, (size_t)errlen, "out of memory batching %d pairs", n), 2;
    }
    /* a random rank for every pair (Fisher-Yates on 0..n-1) */
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < n; i++) it[i] = (SortItem){i, 0, 0, i};
    for (int i = n - 1; i > 0; i--) {
        int j = rng_int(&r, i + 1), t = it[i].rank;
        it[i].rank = it[j].rank;
        it[j].rank = t;
    }
    for (int i = 0; i < n; i++) {
        it[i].key1 = bucket ? tgt_len[i] : 0;
        it[i].key2 = bucket ? src_len[i] : 0;
    }
    qsort(it, (size_t)n, sizeof *it, item_cmp);

    int k = 0;
    for (int i = 0; i < n;) {
        Batch *b = &out->b[out->n++];
        b->idx = out->mem + k;
        b->n = 0;
        b->Ts = b->Tt = 0;
        while (i < n && b->n < max_rows) {
            int p = it[i].i;
            int ts = src_len[p] > b->Ts ? src_len[p] : b->Ts, tt = tgt_len[p] > b->Tt ? tgt_len[p] : b->Tt;
            if (b->n > 0 && ((long)(b->n + 1) * ts > budget || (long)(b->n + 1) * tt > budget)) break;
            b->idx[b->n++] = p;
            b->Ts = ts;
            b->Tt = tt;
            out->real += src_len[p] + tgt_len[p];
            i++;
            k++;
        }
        out->padded += (long)b->n * (b->Ts + b->Tt);
        if (b->n > out->max_B) out->max_B = b->n;
        if (b->Ts > out->max_Ts) out->max_Ts = b->Ts;
        if (b->Tt > out->max_Tt) out->max_Tt = b->Tt;
    }
    free(it);
    return 0;
}

void batches_free(Batches *bs) {
    if (!bs) return;
    free(bs->b);
    free(bs->mem);
    memset(bs, 0, sizeof *bs);
}

double batches_padding(const Batches *bs) {
    return bs->padded > 0 ? 1.0 - (double)bs->real / (double)bs->padded : 0.0;
}
