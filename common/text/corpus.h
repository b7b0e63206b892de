/* corpus.h - parallel English->German corpora for chapter 11: generated,
 * read from a TSV file, or read from a real dictionary.
 *
 * The paper trains on WMT 2014 English-German (Sec. 5.1). Offline, in a
 * minute, we need something smaller that still asks a model what real
 * translation asks. corpus_generate draws sentence pairs from a small
 * grammar (grammar.h), deterministic by seed:
 *
 *   The man sees the big dog .    ->  Der Mann sieht den großen Hund .
 *
 * The grammar's text is tokenised the way WMT systems see it after the
 * Moses tokenizer, and English determines German uniquely, so a perfect
 * model scores BLEU 100 (grammar.h says what a model must learn from it).
 *
 * Splits are disjoint by sentence: every generated English sentence is
 * distinct, and train, dev and test are cut from one shuffled list.
 *
 * A user's own corpus: corpus_load_tsv reads "source<TAB>target" lines.
 *
 * Real English and German: the Ding dictionary (corpus_load_ding).
 * Frank Richter's German-English dictionary of TU Chemnitz, shipped by
 * Debian as the package trans-de-en at /usr/share/trans/de-en (GPL-2+).
 * Its licence is not this project's, so not a line of it is copied here:
 * it is read at run time (apt-get install trans-de-en), and the tests use
 * a fixture written in its format (tests/data/ding_sample.txt). An entry:
 *
 *   Hund {m} | Hunde {pl} :: dog | dogs
 *   Er kommt morgen. | Sie kommt heute. :: He comes tomorrow. | She comes today.
 *
 * German left of "::", English right; the k-th '|' part of each side
 * translate each other. Among the headwords sit example sentences, and
 * those are the corpus: about 14,700 real pairs, 8 English words on average
 * (the paper's WMT 2014 has 4.5 million). corpus_load_ding says which parts
 * count as sentences; every other aligned part gives a shorter "phrase
 * pair" (over 350,000) a user may add as extra training data.
 *
 * The Ding corpus comes with no split, and a split drawn by seed would
 * differ from run to run. corpus_split_fixed cuts one that depends on the
 * text alone: pairs ranked by a hash of the English sentence, dev the first
 * n_dev, test the next n_test, the rest trains. The same on every machine
 * and every --seed, and a sentence with two translations never sits on two
 * sides of a cut.
 */
#ifndef CORPUS_H
#define CORPUS_H

#include <stddef.h>
#include <stdint.h>

/* ---- a corpus: sentence pairs ---------------------------------------------- */
typedef struct {
    char **src, **tgt;  /* [n] each an owned UTF-8 string, space-tokenised   */
    int n;
} Corpus;

void corpus_free(Corpus *c);   /* no-op on a zeroed or freed Corpus */

/* Generates n_train + n_dev + n_test distinct pairs from seed with the
 * grammar (corpus_random_sentence, grammar.h) and splits them. Returns 0,
 * or 2 with a message when the grammar cannot give that many distinct
 * sentences in a reasonable number of draws. */
int corpus_generate(Corpus *train, Corpus *dev, Corpus *test, int n_train, int n_dev,
                    int n_test, uint64_t seed, char *err, size_t errlen);

/* Reads "source<TAB>target" lines (UTF-8; a final newline optional, CRLF
 * accepted). Runs of spaces collapse to one and ends are trimmed. Errors
 * name the line and the problem: no tab, more than one tab, an empty side,
 * invalid UTF-8 (with the byte offset), a control character, a line longer
 * than CORPUS_MAX_LINE bytes; an empty file is an error too. Returns 0, 1
 * (cannot read the file: missing, unreadable) or 2 (bad content, or not a
 * file at all: a folder, a FIFO or a device, refused as a checkpoint's
 * loader refuses them: "'x' is not a regular file (it is a FIFO)"). */
#define CORPUS_MAX_LINE 4096
int corpus_load_tsv(Corpus *c, const char *path, char *err, size_t errlen);

/* Splits all into train / dev / test: pairs are shuffled by seed, then
 * n_dev and n_test are taken off the end (each at most a tenth of the
 * distinct pairs and at least 1; the rest trains).
 * Identical pairs are kept once, so the splits are disjoint by sentence.
 * Returns 0, or 2 when fewer than 3 distinct pairs remain. The strings are
 * copied; all is unchanged. */
int corpus_split(const Corpus *all, Corpus *train, Corpus *dev, Corpus *test, int n_dev,
                 int n_test, uint64_t seed, char *err, size_t errlen);

/* ---- the Ding dictionary: real sentences, read at run time ----------------- */
#define DING_PATH "/usr/share/trans/de-en"
/* Lines longer than this are skipped whole (the 2023 file's longest entry
 * is 9,539 bytes): a bound on memory, not on the dictionary's content. */
#define DING_MAX_LINE 65536

/* Reads the Ding dictionary at path (normally DING_PATH) once.
 *
 * sent gets its example sentences, src = English, tgt = German, in file
 * order, each distinct (English, German) pair once, runs of spaces collapsed
 * and ends trimmed. A pair of aligned parts (the k-th '|' part of each
 * side) is a sentence pair when both sides
 *   - end in '.', '!' or '?',
 *   - have three words or more,
 *   - contain none of { } [ ] ( ) / ; (markup, alternatives, synonyms)
 *     and no tab or control character.
 * Lines starting with '#' are comments; a line without "::" is not an
 * entry; an entry whose sides have different numbers of '|' parts cannot
 * be aligned and is skipped; CRLF and a missing final newline are fine.
 *
 * phrases (NULL: not collected) gets every other aligned part as a phrase
 * pair: on each side the first synonym (up to a ';' that is not inside
 * brackets), with {...}, [...] and (...) removed and spaces collapsed;
 * kept when neither side is empty or still holds '/', a bracket or a
 * control character. Each distinct pair once.
 *   "Hund {m} | Hunde {pl} :: dog | dogs" -> (dog, Hund), (dogs, Hunde)
 *
 * Returns 0; 1 when the file cannot be read (missing: the message says
 * "install it: apt-get install trans-de-en"); 2 for a folder, FIFO or device
 * (refused before a byte is read, as corpus_load_tsv does) and for bad
 * content: invalid UTF-8 or a NUL byte (the message names the line) or no
 * sentence pair at all. On an error sent and phrases
 * are left empty. The strings are owned by sent / phrases (corpus_free). */
int corpus_load_ding(Corpus *sent, Corpus *phrases, const char *path, char *err, size_t errlen);

/* A split that needs no seed, for corpora that come without one (Ding):
 * the distinct pairs of all are ranked by the 64-bit FNV-1a hash of the
 * English side (ties: by the English text, then the German); dev takes the
 * first n_dev in that order, test the next n_test, train the rest. A cut
 * never falls between two pairs with the same English sentence: it moves
 * on past them, so dev or test may hold a pair more than asked, and the
 * splits are disjoint by English sentence. Each split keeps file order.
 * The hash is of the text alone, so the split is the same on every machine
 * and with every --seed (a new version of the dictionary moves the cuts).
 * Returns 0, or 2 when n_dev or n_test < 1 or train would hold fewer pairs
 * than dev and test together. The strings are copied; all is unchanged. */
int corpus_split_fixed(const Corpus *all, Corpus *train, Corpus *dev, Corpus *test, int n_dev, int n_test,
                       char *err, size_t errlen);

/* Copies src into dst (a fresh corpus; the caller frees both). */
void corpus_copy(Corpus *dst, const Corpus *src);

/* Checks s is valid UTF-8 (no overlong forms, no surrogates, <= U+10FFFF).
 * Returns -1 if it is, else the byte offset of the first bad byte. */
long utf8_invalid_at(const char *s, size_t n);

/* Writes c as TSV, atomically (FioWriter, core/fileio.h: complete or not
 * there). 0, or 1 with err. */
int corpus_save_tsv(const Corpus *c, const char *path, char *err, size_t errlen);

#endif
