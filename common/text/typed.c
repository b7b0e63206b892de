/* typed.c - typed text in a corpus's form (typed.h). */
#include "text/typed.h"

#include <string.h>

void typed_squeeze(const char *in, char *out) {
    char *w = out;
    int sp = 1;   /* drops leading spaces */
    for (const char *p = in; *p; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            if (!sp) *w++ = ' ';
            sp = 1;
        } else *w++ = *p, sp = 0;
    }
    if (w > out && w[-1] == ' ') w--;
    *w = 0;
}

void typed_as_generated(const char *in, char *out, size_t len) {
    size_t o = 0;
    for (const char *p = in; *p && o + 4 < len; p++) {
        if (*p == ',' || *p == '.') {   /* the grammar writes them apart: "dog ." */
            out[o++] = ' ';
            out[o++] = *p;
            out[o++] = ' ';
        } else {
            out[o++] = *p;
        }
    }
    out[o] = 0;
    typed_squeeze(out, out);
    if (out[0] >= 'a' && out[0] <= 'z') out[0] = (char)(out[0] - 'a' + 'A');
    size_t n = strlen(out);
    if ((n < 2 || strcmp(out + n - 2, " .")) && n + 3 < len) strcat(out, n ? " ." : ".");
}
