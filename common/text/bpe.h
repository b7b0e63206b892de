/* bpe.h - byte-pair encoding, one vocabulary shared by source and target
 * (Sec. 5.1: "Sentences were encoded using byte-pair encoding [3], which has
 * a shared source-target vocabulary of about 37000 tokens").
 *
 * Learning (Sennrich, Haddow & Birch 2016, Algorithm 1):
 *   - split every training sentence (both sides) on spaces into words and
 *     count them;
 *   - write each word as its characters (UTF-8 code points), the last one
 *     marked as ending the word: "Hund" -> H u n d</w>. The marker keeps
 *     "d" inside a word apart from "d" at its end, and is what lets decoding
 *     put the spaces back;
 *   - repeat: count every pair of adjacent symbols over all words (times the
 *     word's count), merge the most frequent pair into one new symbol
 *     everywhere; ties go to the pair whose symbols come first in byte order
 *     (left, then right), so the merges do not depend on hash order;
 *   - stop when the vocabulary has the requested size or no pair occurs
 *     twice. A pair whose text would be longer than BPE_MAX_SYMBOL_BYTES
 *     is not merged (below).
 * Encoding a word applies the learned merges in the order they were learned.
 *
 * Ids: 0 <pad>, 1 <s>, 2 </s>, 3 <unk>, then the characters (sorted by byte
 * order; each as inner and as end-of-word symbol), then one id per merge.
 *
 * Any text encodes: a word training never saw is spelled from the subwords
 * it has (the learned merges apply to any word), down to single characters
 * where no merge applies, and decodes back to itself. Only a character training
 * never saw (in that place: inside a word, or ending one) has no symbol; it
 * becomes <unk>, one per character. We chose <unk> over a byte fallback
 * (256 byte symbols): the model never sees such a symbol in training either
 * (every training character has its own), so bytes would only give it more
 * ids with untrained embeddings, and one <unk> keeps the ids of every other
 * symbol where they were. <unk> carries no end-of-word mark, so decoding
 * joins it to the next word. Bytes that are not valid UTF-8 count as one
 * character each.
 *
 * Saved beside the checkpoint as a text file (MODEL.ckpt.bpe), written to
 * a temporary file and renamed; see bpe_save for the format.
 */
#ifndef BPE_H
#define BPE_H

#include <stddef.h>
#include <stdint.h>

#define BPE_PAD 0
#define BPE_BOS 1
#define BPE_EOS 2
#define BPE_UNK 3
#define BPE_N_SPECIAL 4
#define BPE_MAX_VOCAB (1 << 20)
/* No symbol is longer than this many bytes. Learning never merges past it
 * (real words are far shorter: the Ding dictionary's longest is 71 bytes,
 * so only a long word seen twice, e.g. a run of one letter, ever reaches
 * it), and loading refuses a file whose merges would: without the bound,
 * 40 merges of a 4 kB file, each joining the last symbol to itself, would
 * spell 2^40 bytes. With it, a file of n bytes makes at most ~43 n bytes
 * of symbol text (n/6 merge lines of at most 257 bytes each). */
#define BPE_MAX_SYMBOL_BYTES 256

typedef struct {
    char *text;     /* UTF-8 characters of the symbol, NUL-terminated     */
    int eow;        /* 1: ends a word (printed with a trailing "</w>")    */
    int left, right;/* the merge that made it, or -1 for a character     */
} BpeSymbol;

typedef struct {
    BpeSymbol *sym;     /* [vocab] id -> symbol (specials have eow 0)     */
    int vocab;          /* symbols in all                                  */
    int n_chars;        /* ids BPE_N_SPECIAL .. BPE_N_SPECIAL+n_chars-1    */
    int n_merges;       /* merges, in the order learned (ids after chars)  */
    /* lookup tables, built from sym */
    uint64_t *pair_key; /* open-addressing hash: (left<<32|right)+1 -> id  */
    int *pair_id;
    size_t pair_cap;
    /* the training corpus's source words, to say which input words are new */
    char **words;
    int n_words;
    /* How the training text was written, so that typed input can be
     * written the same way (chapter 11's --translate):
     *   1: tokenised like chapter 11's generated corpus (a capital first
     *      letter, "," and "." as words of their own, a final " .");
     *   0: as the corpus had it (bpe_learn's default).                     */
    int tokenised;
} Bpe;

/* Learns a vocabulary of at most `vocab` symbols from n_a + n_b sentences
 * (the source and the target sides of the training set). Returns 0, or 2
 * with a message: vocab below BPE_N_SPECIAL + the number of distinct
 * characters (which it names), above BPE_MAX_VOCAB, or no words at all. */
int bpe_learn(Bpe *b, char *const *a, int n_a, char *const *bside, int n_b, int vocab,
              char *err, size_t errlen);
void bpe_free(Bpe *b);   /* no-op on a zeroed or freed Bpe */

/* Records the distinct words of these sentences (the source side) so that
 * bpe_unknown_word can name a word training never saw. */
void bpe_set_words(Bpe *b, char *const *sent, int n);
/* The first word of sentence s not among b->words, copied into buf; 0 if
 * every word is known (or no words were recorded), 1 otherwise. (A new
 * word still encodes: this only says which one is new.) */
int bpe_unknown_word(const Bpe *b, const char *s, char *buf, size_t len);
/* How many characters of s encode as <unk> (training never saw them in
 * that place). buf gets each distinct one once, separated by spaces, in
 * the order they first occur, cut to fit len. */
int bpe_unknown_chars(const Bpe *b, const char *s, char *buf, size_t len);

/* Encodes a sentence into ids (no <s> or </s>): words split on spaces,
 * each spelled as above. Never fails. Writes at most cap ids and returns
 * how many the whole sentence needs (so a return > cap means it did not
 * fit). */
int bpe_encode(const Bpe *b, const char *s, int *ids, int cap);
/* Decodes ids back to text: symbols concatenated, a space after each
 * end-of-word symbol (none at the very end); <pad>, <s> stop nothing and
 * print nothing; </s> ends the text; <unk> prints "<unk>". Returns the
 * length it needs; writes at most len-1 bytes and a NUL. */
size_t bpe_decode(const Bpe *b, const int *ids, int n, char *out, size_t len);
/* "Hund</w>", "<s>", ...: a symbol as printed in segmentations. */
void bpe_symbol_str(const Bpe *b, int id, char *buf, size_t len);

/* Text format, version 2:
 *   AIYNBPE 2
 *   vocab V chars C merges M words W
 *   text tokenised | text as-is            Bpe.tokenised (1 | 0)
 *   C lines  "c\t<eow 0|1>\t<text>"       the characters, in id order
 *   M lines  "m\t<left id>\t<right id>"   the merges, in id order
 *   W lines  "w\t<word>"                  the source words
 *   end <CRC-32 of every byte before this line, 8 hex digits>
 * bpe_save writes a unique temporary beside path (fileio.h) and renames it
 * over path once complete. Returns 0, or 1 with err. */
int bpe_save(const Bpe *b, const char *path, char *err, size_t errlen);
/* Reads version 2, and version 1 (no "text" line) as tokenised = 1: the
 * programs that wrote version 1 always wrote --translate input the
 * generated corpus's way, so that is what those files keep doing.
 * Returns 0, 1 (cannot open: the caller may say how to train one) or 2
 * with a message that ends in what to do about it: not a regular file,
 * not a BPE file, CRLF line endings (dos2unix), another version,
 * truncated, checksum mismatch, counts the file's size cannot hold,
 * inconsistent ids, a symbol longer than BPE_MAX_SYMBOL_BYTES. Nothing is
 * allocated for a count before the file is known to hold that many lines. */
int bpe_load(Bpe *b, const char *path, char *err, size_t errlen);

#endif
