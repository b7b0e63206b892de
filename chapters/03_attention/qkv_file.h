/* qkv_file.h - read Q, K and V for one attention head from a plain-text file.
 *
 * The format (chapter 03's --input), one item per line:
 *
 *     # anything after '#' is a comment; blank lines are ignored
 *     tokens: the cat sat on the mat     labels for the rows of Q AND K (self-attention)
 *     q_tokens: ...                      labels for Q's rows only (cross-attention)
 *     k_tokens: ...                      labels for K's (and V's) rows only
 *     Q                                  a section header: Q, K or V alone on its line
 *     1 0 1 0                            one row per query: d_k numbers
 *     ...
 *     K                                  one row per key: d_k numbers (same d_k as Q)
 *     ...
 *     V                                  one row per key: d_v numbers
 *     ...
 *
 * Every section must appear exactly once, in any order; all rows of a
 * section have the same number of columns; K and V have the same number of
 * rows (one value per key). Token lines are optional and may repeat (their
 * words are appended); if given, their count must match the rows they label.
 * Limits: QKV_MAX_ROWS rows and QKV_MAX_COLS numbers per row, QKV_MAX_BYTES
 * of a regular file (a FIFO or device is refused), and numbers small enough
 * that every score q.k (bounded by sum |q_c||k_c|) and every value stays
 * within QKV_MAX_MAGNITUDE: inputs near 1e20 would make q.k overflow float32
 * to inf and the weights NaN, so they are refused naming the rows.
 * Tokens are stored escaped for printing (fio_escape: a control byte or
 * invalid UTF-8 becomes \xHH), so "a\x1b[31m" is what the terminal shows.
 *
 * Errors name the file and line and say what was expected:
 *     "my.qkv:7: row has 3 numbers, expected 4 like the first row of K (line 5)"
 */
#ifndef QKV_FILE_H
#define QKV_FILE_H

#include <stddef.h>

#define QKV_MAX_ROWS 256
#define QKV_MAX_COLS 256
#define QKV_MAX_BYTES (4L << 20)
#define QKV_MAX_MAGNITUDE 1e37   /* a tenth of float32's largest, 3.4e38 */

typedef struct {
    int Tq, Tk, d_k, d_v;  /* queries, keys, query/key width, value width */
    float *Q;              /* (Tq,d_k) */
    float *K;              /* (Tk,d_k) */
    float *V;              /* (Tk,d_v) */
    char **q_tokens;       /* (Tq) labels of Q's rows, or NULL if none given */
    char **k_tokens;       /* (Tk) labels of K's rows, or NULL if none given */
} QkvFile;

/* Parses text (NUL-terminated) as if read from a file called name. Returns
 * 0 and fills *f (caller frees with qkv_free), or returns 2 with
 * "name:LINE: what was expected" in err and *f left empty. */
int qkv_parse(QkvFile *f, const char *text, const char *name, char *err, size_t errlen);

/* Reads the file at path and parses it. Same returns as qkv_parse; a file
 * that cannot be opened or is too big is reported in err too. */
int qkv_load(QkvFile *f, const char *path, char *err, size_t errlen);

/* Frees what qkv_parse / qkv_load filled in; f == NULL or an empty
 * QkvFile is fine. Leaves *f empty. */
void qkv_free(QkvFile *f);

#endif
