/* dump_data.c - chapter 11's --dump-data: the run's data as plain text, for
 * an independent model (make bench-translate's PyTorch reference trains on exactly these ids
 * and batches). In DIR: vocab.tsv (id, symbol, 1 if it ends a word),
 * {train,dev,test}.ids (a pair a line: source ids, a tab, target ids; no
 * <s> or </s>), {dev,test}.{en,de} (the text), train_batches.txt (a batch a
 * line: the row numbers of train.ids, as section 3 cut them). */
#include <stdio.h>

#include "io/cli.h"
#include "io/plot.h"
#include "translation.h"

static FILE *dump_open(const char *dir, const char *name) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) cli_fail(PROG, "--dump-data: cannot write %s", path);
    return f;
}

static void dump_close(FILE *f, const char *dir) {
    if (ferror(f) | fclose(f)) cli_fail(PROG, "--dump-data: could not write to %s (disk full?)", dir);
}

void tr_dump_data(const char *dir, const TrTask *t) {
    const Batches *bs = &t->train_b;
    if (plot_mkdir(dir)) cli_fail(PROG, "--dump-data: cannot create %s", dir);
    FILE *f = dump_open(dir, "vocab.tsv");
    for (int i = 0; i < t->bpe.vocab; i++) fprintf(f, "%d\t%s\t%d\n", i, t->bpe.sym[i].text, t->bpe.sym[i].eow);
    dump_close(f, dir);
    const Encoded *e[3] = {&t->etrain, &t->edev, &t->etest};
    const Corpus *c[3] = {&t->train, &t->dev, &t->test};
    const char *name[3] = {"train", "dev", "test"};
    for (int k = 0; k < 3; k++) {
        char fn[64];
        snprintf(fn, sizeof fn, "%s.ids", name[k]);
        f = dump_open(dir, fn);
        for (int i = 0; i < e[k]->n; i++) {
            for (int j = 0; j < e[k]->slen[i] - 1; j++) fprintf(f, "%s%d", j ? " " : "", e[k]->s[i][j]);
            fputc('\t', f);
            for (int j = 0; j < e[k]->tlen[i] - 1; j++) fprintf(f, "%s%d", j ? " " : "", e[k]->t[i][j]);
            fputc('\n', f);
        }
        dump_close(f, dir);
        for (int side = 0; side < 2 && k > 0; side++) {
            snprintf(fn, sizeof fn, "%s.%s", name[k], side ? "de" : "en");
            f = dump_open(dir, fn);
            for (int i = 0; i < c[k]->n; i++) fprintf(f, "%s\n", side ? c[k]->tgt[i] : c[k]->src[i]);
            dump_close(f, dir);
        }
    }
    f = dump_open(dir, "train_batches.txt");
    for (int k = 0; k < bs->n; k++)
        for (int r = 0; r < bs->b[k].n; r++) fprintf(f, "%d%c", bs->b[k].idx[r], r + 1 < bs->b[k].n ? ' ' : '\n');
    dump_close(f, dir);
    printf("wrote the vocabulary, the encoded splits and the %d training batches to %s/\n", bs->n, dir);
}
