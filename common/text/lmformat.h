/* lmformat.h - does a text have the form of its training text? Chapter
 * 14's two measures of what its language model writes (issue 43, item 3),
 * each a rule in code, applied alike to the real text, to the model's
 * samples and to random text of the training distribution
 * (lmtext_random_ids), so the sentence "the samples look like entries"
 * stands on a number and a baseline.
 *
 * The Devil's Dictionary: the share of entries that open with a headword
 * and a part of speech. Bierce's entries read
 *     ABASEMENT, n.  A decent and customary mental attitude ...
 *     ACCUSE, v.t.  To affirm another's guilt or unworth ...
 *     BOTTLE-NOSED, adj.  Having a nose created in the image of ...
 *     KING'S EVIL, n.  A malady that was formerly cured by ...
 *   An entry is a paragraph: a line that follows a blank line (empty, or
 *   spaces and tabs only), or the text's first line, and does not itself
 *   start with a space, a tab or a newline (the book's indented verses
 *   and signatures are not entries). It opens with a headword and a part
 *   of speech (lmtext_entry_head, lmtext.h) when it starts with
 *     - one or more words separated by single spaces, each an upper-case
 *       letter A-Z followed by upper-case letters, '-' and '\'';
 *     - then ", " (a comma and one space);
 *     - then one of Bierce's parts of speech, n. n.pl. v. v.t. v.i. adj.
 *       adv. pro. pron. pp. p.p. x. (his "HASH, x.") or prep. conj.
 *       interj., followed by a space or a newline.
 *   On the book's 1,003 paragraphs that are entries by this definition,
 *   982 open so (97.9%); the 21 that do not are Bierce's own exceptions
 *   ("ABRACADABRA.", "BABE or BABY, n.", "IMPOSTOR n.", "R.I.P.",
 *   "I is the first letter ...") and two paragraphs inside entries.
 *
 * The 300 Tang poems: the share of verse lines of five or seven
 *   characters. A verse line is a run of Han characters (CJK unified
 *   ideographs, their extensions and compatibility forms) ended by any
 *   other character (a punctuation mark such as '，' or '。', a newline),
 *   in a line of text that is not a title (starting with '《') or an
 *   author line (starting with "作者："). Among the real poems' 3,262
 *   verse lines, 3,095 have five or seven characters (94.9%).
 *
 * Text cut off at its end (a sample's last line) is not judged: an entry
 * whose opening ends before the rule decides, and a run of Han characters
 * that the text's end cuts, count neither way.
 */
#ifndef LMFORMAT_H
#define LMFORMAT_H

#include <stddef.h>

#include "core/rng.h"

typedef struct {
    long hits;    /* units that have the form   */
    long total;   /* units judged (hits of total) */
} LmShare;

/* Entries (paragraphs, above) of text[0..n) and how many open with a
 * headword and a part of speech. */
LmShare lmformat_entries(const char *text, size_t n);
/* Verse lines (runs of Han characters, above) of text[0..n) and how many
 * have five or seven characters. */
LmShare lmformat_verse_lines(const char *text, size_t n);
/* 1 for a Han character (U+3400-4DBF, U+4E00-9FFF, U+F900-FAFF,
 * U+20000-2FA1F) */
int lmformat_is_han(unsigned cp);

/* The baseline: measure (lmformat_entries or lmformat_verse_lines) applied
 * to n tokens of random text of t's training distribution
 * (lmtext_random_ids with r, decoded). A million characters of the
 * dictionary's distribution hold about 500 paragraphs, none of them an
 * entry (0 of 503 with seed 1); of the poems', 13.1% of the verse lines
 * have five or seven characters (22,871 of 174,572). */
struct LmText;
LmShare lmformat_random_share(const struct LmText *t, LmShare (*measure)(const char *, size_t), size_t n,
                              Rng *r);

#endif
