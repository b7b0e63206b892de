/* typed.h - a sentence a user typed, written the way a corpus's training
 * text is, so the BPE learned on it segments the typed words the same way
 * (chapter 11's --translate; bpe.h's `tokenised` says which form). */
#ifndef TYPED_H
#define TYPED_H

#include <stddef.h>

/* The generated corpus's form (text/grammar.h): "," and "." tokens of their
 * own, tabs and line ends spaces, runs of spaces one, a capital first
 * letter, a final " .". out: at least 3 strlen(in) + 4 bytes (len). */
void typed_as_generated(const char *in, char *out, size_t len);
/* A real corpus's form (corpus_load_tsv's rule): tabs and line ends are
 * spaces, runs of spaces one, no space at either end. out: strlen(in) + 1
 * bytes. */
void typed_squeeze(const char *in, char *out);

#endif
