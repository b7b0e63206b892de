/* strbuf.h - a string that grows as printf writes into it.
 *
 * For files built in memory before they are written (a BPE vocabulary, the
 * JSON header of a safetensors file): whole, so that a checksum or a length
 * can be put in front of them.
 *
 *   StrBuf b = {0};
 *   strbuf_printf(&b, "vocab %d\n", v);
 *   ...
 *   if (b.oom) ...report...;   (one check at the end, not one per call)
 *   use b.s, b.len; strbuf_free(&b);
 */
#ifndef STRBUF_H
#define STRBUF_H

#include <stddef.h>

typedef struct {
    char *s;        /* [cap] the text so far, NUL-terminated (NULL: empty)  */
    size_t len;     /* bytes of text, without the NUL                       */
    size_t cap;
    int oom;        /* 1 once memory ran out (or printf failed): cut short  */
} StrBuf;

/* Appends printf(fmt, ...) to b. Out of memory sets b->oom, and from then
 * on every call does nothing. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void strbuf_printf(StrBuf *b, const char *fmt, ...);

/* Frees the text and zeroes b; strbuf_free on a zeroed StrBuf does nothing. */
void strbuf_free(StrBuf *b);

#endif
