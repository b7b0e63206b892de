/* lmtext.h - the text a language model reads (chapter 14): real text from
 * Debian packages or a user's file, its characters as tokens, a fixed
 * train/validation split, and the batches a training step and an
 * evaluation read.
 *
 * A language model learns p(next token | the tokens before it) from one
 * long text. Nothing of that text is copied into this project: it is read
 * at run time from a Debian package (tools/deps.sh installs them), or from
 * any UTF-8 file the user names.
 *
 *   "devil"    Ambrose Bierce's The Devil's Dictionary (1911, public
 *              domain), package dict-devil: /usr/share/dictd/devil.dict.dz,
 *              dictzip, which zlib reads as gzip (383,656 bytes once
 *              decompressed). dictd keeps its own entries, named
 *              00-database-*, in that file: four before Bierce's first entry (the format's version, the
 *              source's URL, a short name, and the Internet Wiretap
 *              edition's notice with the book's title page and preface)
 *              and one after his last (the alphabet line
 *              " abcdefghijklmnopqrstuvwxyz"). We keep the dictionary's
 *              entries alone: from the first paragraph that opens an entry
 *              (lmtext_entry_head: "ABASEMENT, n.  A decent ...") to the
 *              end, without a final alphabet line: 380,684 characters
 *              (all ASCII; the 2,944 bytes before the first entry and the
 *              28 of the alphabet line are dropped), 83 distinct (the
 *              whole file's 85 less '/' and '@', which only dictd's URL
 *              and the Wiretap notice's e-mail address hold). Split:
 *              342,615 train, 38,069 validation.
 *   "tang300"  the 300 Tang poems of fortunes-zh:
 *              /usr/share/games/fortunes/tang300, UTF-8. Each poem is a
 *              title line in green (ANSI "ESC[32m《...》ESC[m"), an author
 *              line in yellow ("作者：..."), its verses, and a line "%"
 *              that ends it (fortune's separator). We strip the colour
 *              codes and write a blank line between poems instead of the
 *              "%" lines (the last one dropped): 29,577 characters, 2,579
 *              distinct (with the "%" lines: 29,891 and 2,580). Split:
 *              26,619 train, 2,958 validation.
 *   a path     any UTF-8 text file, kept byte for byte (a file that is
 *              named devil or tang300 is read by writing ./devil).
 *
 * Refused, each with a message and status 2 (never a crash): a missing
 * file (for a package, the message says how to install it), a folder, FIFO
 * or device (fio_open_read, before a byte is read), a file over
 * LMTEXT_MAX_BYTES (from its size, before it is read), an empty text, a
 * NUL byte or invalid UTF-8 (the message names the byte offset in the file
 * as read, after decompression), a text of one distinct character (nothing
 * to predict). A read error of the disk is status 1.
 *
 * Tokens are characters: UTF-8 code points. The vocabulary is the text's
 * distinct code points sorted by value, token id = rank, so "\n" (U+000A)
 * is id 0 in most texts and the ids are the same on every machine.
 *
 * The split: the last tenth of the characters is validation, the rest
 * trains (n_val = ceil(n / 10): at least one character). It depends on the
 * text alone, never on a seed.
 *
 * BPE instead of characters (lmtext_use_bpe): chapter 11's byte-pair
 * encoding (bpe.h), learned on the train split alone, then both splits
 * encoded. bpe.h spells words and puts single spaces between them, which
 * would lose this text's line breaks, double spaces and indentation, so
 * here whitespace is kept as tokens of its own: a word is a run of
 * characters other than ' ' and '\n' (cut into pieces of at most
 * LMTEXT_BPE_MAX_WORD characters, so that a language written without
 * spaces still makes words of a sane length), each word is BPE-encoded,
 * and every ' ' and '\n' is one token: ids 0 .. bpe->vocab-1 are bpe.h's
 * (specials, characters, merges), id bpe->vocab is ' ', bpe->vocab+1 is
 * '\n'. Decoding gives the text back byte for byte, except a character
 * the train split never had in that place, which becomes <unk>.
 */
#ifndef LMTEXT_H
#define LMTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "text/bpe.h"

#define LMTEXT_DEVIL_PATH "/usr/share/dictd/devil.dict.dz"
#define LMTEXT_TANG300_PATH "/usr/share/games/fortunes/tang300"
/* The largest text read, in bytes (the file's size, and for the dictionary
 * its size after decompression too): 256 MiB of characters is 1 GiB of
 * token ids. Larger files are refused from their size, before a read. */
#define LMTEXT_MAX_BYTES ((long long)256 << 20)

typedef enum {
    LMTEXT_FILE,      /* a user's UTF-8 file, as it is          */
    LMTEXT_DEVIL,     /* dictd's devil.dict.dz: entries only    */
    LMTEXT_TANG300,   /* fortune's tang300: colours stripped    */
} LmSource;

typedef struct LmText {
    LmSource source;
    char *text;         /* [n_bytes + 1] the kept text, UTF-8, NUL-terminated */
    size_t n_bytes;
    size_t n_read;      /* bytes of the file as read (after decompression)   */
    int *tokens;        /* [n] the text as token ids                         */
    size_t n;           /* tokens (characters, unless bpe)                   */
    int V;              /* the model's vocabulary: ids 0 .. V-1              */
    size_t n_train;     /* tokens [0, n_train) train, [n_train, n) validate  */
    size_t n_chars;     /* characters of the text                            */
    size_t n_train_chars; /* characters of the train split                   */
    int n_cp;           /* distinct characters                               */
    uint32_t *vocab;    /* [n_cp] code points, ascending: character tokens'
                           id -> code point                                   */
    Bpe *bpe;           /* NULL: character tokens; else BPE pieces (below)   */
} LmText;

/* ---- reading --------------------------------------------------------------- */

/* Reads the text named by name: "devil", "tang300" or a path (above).
 * Returns 0; 2 with a message in err for bad input; 1 for a read error.
 * On failure t is left empty (lmtext_free is still safe). */
int lmtext_load(LmText *t, const char *name, char *err, size_t errlen);
/* The same for a file read as source says (the tests give the dictionary's
 * and the poems' readers files of their own). */
int lmtext_load_as(LmText *t, LmSource source, const char *path, char *err, size_t errlen);
/* A text already in memory (n bytes, checked as a file's are; a NUL
 * inside is refused). */
int lmtext_from_bytes(LmText *t, const char *bytes, size_t n, char *err, size_t errlen);
void lmtext_free(LmText *t);   /* no-op on a zeroed or freed LmText */

/* Replaces the character tokens of t with BPE pieces: learns a vocabulary
 * of at most `vocab` bpe.h symbols (specials, characters, merges) from the
 * train split, encodes the train and validation splits each on their own
 * (the split stays at the same character), and sets tokens, n, n_train and
 * V = bpe->vocab + 2. Returns 0, or 2 with bpe_learn's message (a vocab
 * too small for the train split's characters, or one over BPE_MAX_VOCAB),
 * or when t already uses BPE. */
#define LMTEXT_BPE_MAX_WORD 32
int lmtext_use_bpe(LmText *t, int vocab, char *err, size_t errlen);
/* BPE: the id of ' ' and of '\n' (-1 with character tokens) */
int lmtext_bpe_space(const LmText *t);
int lmtext_bpe_newline(const LmText *t);

/* "devil", "tang300" or "FILE": what was read, for printing. */
const char *lmtext_source_name(LmSource s);

/* ---- tokens ------------------------------------------------------------------ */

/* The character token of code point cp, or -1 when the text never has it
 * (or t uses BPE). */
int lmtext_id(const LmText *t, uint32_t cp);
/* Encodes the UTF-8 string s (a prompt) into ids[0..cap). Returns 0 with
 * *n the number of tokens (when *n > cap only cap were written), or 2
 * with a message: invalid UTF-8, or a character the vocabulary never saw
 * (with BPE: never saw in that place of a word), named with its byte
 * offset and code point. */
int lmtext_encode(const LmText *t, const char *s, int *ids, size_t cap, size_t *n, char *err,
                  size_t errlen);
/* Writes the characters of ids[0..n) as UTF-8 into out (cap bytes, NUL-
 * terminated, cut at a character boundary). Returns the bytes the whole
 * text needs, without the NUL (so a return >= cap means it was cut). */
size_t lmtext_decode(const LmText *t, const int *ids, size_t n, char *out, size_t cap);
/* A printable label of token id, as heatmaps and tables show it: the
 * character itself, except newline "⏎", space "␣", tab "⇥", and any other
 * control character as "\xHH" (fio_escape). A BPE piece is its text, with
 * a '·' after a piece that continues into the next (as plot.c draws
 * chapter 11's pieces): "laugh·" "s"; <unk> and the other specials as
 * bpe.h names them. */
const char *lmtext_label(const LmText *t, int id, char *buf, size_t cap);

/* ---- batches ------------------------------------------------------------------ */

/* B windows of T+1 tokens of the train split, each starting at a position
 * drawn uniformly by r (one rng_int per window, in order):
 *   x [B, T] = window[0..T), y [B, T] = window[1..T+1)
 * so y[b][t] is the token after x[b][t]. Returns 0, or 2 with a message
 * when B or T is below 1 or T+1 is longer than the train split. */
int lmtext_batch(const LmText *t, Rng *r, int B, int T, int *x, int *y, char *err, size_t errlen);

/* The validation split as consecutive windows of T+1 tokens that overlap
 * by one: window k is validation tokens [kT, kT + T + 1), so every
 * validation token after the first is a target exactly once, and the last
 * (n_val - 1) mod T targets, which fill no whole window, are left out.
 * lmtext_eval_windows says how many there are (0 when n_val < T+1);
 * lmtext_eval_batch fills x, y [B, T] with windows first.. first+B-1 (at
 * most those that exist) and returns how many it filled. */
size_t lmtext_eval_windows(const LmText *t, int T);
int lmtext_eval_batch(const LmText *t, int T, size_t first, int B, int *x, int *y);

/* n ids drawn i.i.d. from the train split's character frequencies (the
 * unigram distribution): each is the token at a uniformly drawn train
 * position. Random text of the training distribution, the baseline the
 * chapter's format measures are compared with. */
void lmtext_random_ids(const LmText *t, Rng *r, int *ids, size_t n);

/* ---- UTF-8 ----------------------------------------------------------------------- */

/* The code point at s[0..n) into *cp; returns its length (1-4), or 0 when
 * the bytes there are not valid UTF-8 (overlong, surrogate, past U+10FFFF,
 * cut short). */
int lmtext_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
/* cp written as UTF-8 into out (4 bytes room); its length. */
int lmtext_utf8_put(uint32_t cp, char *out);

/* The Devil's Dictionary's headword rule, applied to the text s[0..n) that
 * starts an entry ("ABASEMENT, n.  A decent ..."): 1 it opens with a
 * headword and a part of speech, 0 it does not, -1 the text ends before the
 * rule can tell. The "devil" source starts at the first entry it finds, and
 * lmformat.h counts generated entries with it. */
int lmtext_entry_head(const char *s, size_t n);

#endif
