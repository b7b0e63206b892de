/* batch_file.h - a batch of (source, target) id sequences from a text file.
 *
 * The file (documented with an example in chapters/07_transformer/README.md):
 *
 *     # lines starting with '#' and blank lines are ignored
 *     # one example per line: source ids | target ids
 *     3 4 5 6 3 7 2 | 1 8 9 10 11 2
 *     3 4 2         | 1 8 2
 *
 * The target line holds the whole target, start symbol first: the decoder
 * reads tgt[0 .. n-2] (the target "shifted right", Sec. 3.1) and is scored
 * on predicting tgt[1 .. n-1]. Sequences may have different lengths; the
 * batch is padded to the longest with the model's pad id, and padded target
 * positions count for nothing in the loss. A model without a pad id
 * (pad_id = -1) cannot pad, so there every source must have the same
 * length, and every target too.
 *
 * Two steps, because the model's config is known only after the checkpoint
 * is loaded, and the checkpoint is loaded with capacity for this batch:
 *   batch_file_read  the syntax: integers, '|', at least 1 source and 2
 *                    target tokens per line (needs no model)
 *   batch_pad        the meaning, against a Config: ids in [0, vocab), no
 *                    pad id inside a sequence, lengths within max_len,
 *                    ragged lengths only with a pad id; then the padded arrays
 * Each returns 0, 1 for an I/O failure, 2 for bad input, with a one-line
 * message naming the file, line and token.
 */
#ifndef BATCH_FILE_H
#define BATCH_FILE_H

#include <stddef.h>
#include "model/model.h"

#define BATCH_MAX_EXAMPLES 4096
#define BATCH_MAX_TOKENS   (1 << 22)    /* ids in the whole file */

typedef struct {
    int n;                  /* examples (lines)                                  */
    int *src_len, *tgt_len; /* (n) tokens on each side                           */
    int *src_off, *tgt_off; /* (n) where each sequence starts in ids             */
    int *ids;               /* every id in file order                            */
    int max_src, max_tgt;   /* longest sequences                                 */
    char path[256];         /* for messages                                      */
} BatchFile;

typedef struct {
    int B, Ts, Tt;          /* examples, padded source and decoder lengths       */
    int *src;               /* (B,Ts)  source ids, padded                        */
    int *tgt_in;            /* (B,Tt)  tgt[0..n-2]: what the decoder reads       */
    int *tgt_out;           /* (B,Tt)  tgt[1..n-1]: what it must predict         */
    int n_tokens;           /* non-padding entries of tgt_out                    */
} Batch;

/* Reads and checks the syntax of path; *bf is freed on failure. */
int batch_file_read(const char *path, BatchFile *bf, char *err, size_t errlen);
/* Parses text already in memory (what the tests call); name is for messages. */
int batch_file_parse(const char *text, const char *name, BatchFile *bf, char *err, size_t errlen);
void batch_file_free(BatchFile *bf);

/* Checks bf against c and builds the padded batch (*b owns its arrays; freed
 * on failure). */
int batch_pad(const BatchFile *bf, const Config *c, Batch *b, char *err, size_t errlen);
void batch_free(Batch *b);

#endif
