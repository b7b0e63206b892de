/* fuzz_qkv.c - libFuzzer target for chapter 03's Q/K/V parser.
 *
 * Every input is parsed as a file's text (up to its first NUL, as qkv_load
 * refuses NUL bytes). The parser must return 0 or 2 with a "name:LINE:"
 * message, never crash, leak or overflow; what it accepts must be
 * consistent (K and V rows agree, every number finite and within
 * QKV_MAX_MAGNITUDE, labels printable). Run by `make fuzz`.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "03_attention/qkv_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    QkvFile f;
    char err[512];
    int rc = qkv_parse(&f, text, "fuzz.qkv", err, sizeof err);
    if (rc == 0) {
        if (f.Tq < 1 || f.Tk < 1 || f.d_k < 1 || f.d_v < 1) abort();
        for (int i = 0; i < f.Tk * f.d_v; i++)
            if (!isfinite(f.V[i]) || fabsf(f.V[i]) > QKV_MAX_MAGNITUDE) abort();
        for (int i = 0; i < f.Tq && f.q_tokens; i++)
            for (const char *p = f.q_tokens[i]; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f) abort();   /* a raw control byte kept */
        qkv_free(&f);
    } else if (rc != 2 || strncmp(err, "fuzz.qkv:", 9) != 0 || f.Q) {
        abort();
    }
    free(text);
    return 0;
}
