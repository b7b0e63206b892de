/* strbuf.c - a string that grows as printf writes into it (see strbuf.h). */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_printf(StrBuf *b, const char *fmt, ...) {
    if (b->oom) return;
    /* try to print into the room left; when it does not fit, grow and
     * print again (vsnprintf says how much it needed) */
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = 1; return; }
        if (b->s && b->len + (size_t)k < b->cap) { b->len += (size_t)k; return; }
        size_t cap = (b->cap ? 2 * b->cap : 4096) + (size_t)k;
        char *s = realloc(b->s, cap);
        if (!s) { b->oom = 1; return; }
        b->s = s, b->cap = cap;
    }
}

void strbuf_free(StrBuf *b) {
    if (!b) return;
    free(b->s);
    memset(b, 0, sizeof *b);
}
