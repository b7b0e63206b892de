/* safetensors.c - the safetensors writer (format in safetensors.h).
 *
 * Two passes: first the JSON header is built in memory (so its length N,
 * which comes first in the file, is known), then the header and every
 * tensor's bytes are streamed to a unique temporary beside path (FioWriter,
 * fileio.h), renamed over path only when every byte is on disk.
 */
#include "io/safetensors.h"
#include "core/fail.h"
#include "core/fileio.h"
#include "core/strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* A JSON string we can write without escapes: printable ASCII, no '"' or '\'. */
static int plain_string(const char *s) {
    if (!s || !*s) return 0;
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\') return 0;
    return 1;
}

static void put_u64le(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* float32 or int32 -> 4 little-endian bytes each, whatever the host's byte order */
static int write_words(FILE *f, const void *data, size_t n) {
    const unsigned char *x = data;
    unsigned char buf[4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + 4 * i, 4);
        for (int j = 0; j < 4; j++) buf[k++] = (unsigned char)(u >> (8 * j));
        if (k == sizeof buf) {
            if (fwrite(buf, 1, k, f) != k) return -1;
            k = 0;
        }
    }
    return k && fwrite(buf, 1, k, f) != k ? -1 : 0;
}

int safetensors_write(const char *path, const SafeTensor *t, int n, const char *const *meta, int n_meta,
                      char *err, size_t errlen) {
    if (n < 0 || n_meta < 0) return fail_rc(2, err, errlen, "safetensors: negative tensor or metadata count");
    /* ---- check everything before touching the disk ---- */
    for (int i = 0; i < n; i++) {
        if (!plain_string(t[i].name) || !strcmp(t[i].name, "__metadata__"))
            return fail_rc(2, err, errlen, "safetensors: tensor %d has an unusable name", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(t[i].name, t[j].name))
                return fail_rc(2, err, errlen, "safetensors: the name '%s' is used twice", t[i].name);
        if (t[i].dtype != SAFETENSORS_F32 && t[i].dtype != SAFETENSORS_I32)
            return fail_rc(2, err, errlen, "safetensors: '%s' has an unknown dtype", t[i].name);
        if (t[i].ndim < 0 || t[i].ndim > SAFETENSORS_MAX_DIMS)
            return fail_rc(2, err, errlen, "safetensors: '%s' has %d dimensions", t[i].name, t[i].ndim);
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            if (t[i].shape[d] < 0 || (t[i].shape[d] > 0 && numel > (UINT64_MAX / 8) / (uint64_t)t[i].shape[d]))
                return fail_rc(2, err, errlen, "safetensors: '%s' has an unusable shape", t[i].name);
            numel *= (uint64_t)t[i].shape[d];
        }
        if (numel && !t[i].data) return fail_rc(2, err, errlen, "safetensors: '%s' has no data", t[i].name);
    }
    for (int i = 0; i < 2 * n_meta; i++)
        if (!plain_string(meta[i]) && !(i % 2 == 1 && meta[i] && !*meta[i]))
            return fail_rc(2, err, errlen, "safetensors: metadata entry %d is not a plain string", i / 2);

    /* ---- the JSON header ---- */
    StrBuf h = {0};   /* the JSON header (core/strbuf.h) */
    strbuf_printf(&h, "{");
    if (n_meta > 0) {
        strbuf_printf(&h, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++)
            strbuf_printf(&h, "%s\"%s\":\"%s\"", i ? "," : "", meta[2 * i], meta[2 * i + 1]);
        strbuf_printf(&h, "}%s", n ? "," : "");
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t numel = 1;
        strbuf_printf(&h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t[i].name,
                      t[i].dtype == SAFETENSORS_I32 ? "I32" : "F32");
        for (int d = 0; d < t[i].ndim; d++) {
            strbuf_printf(&h, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
            numel *= (uint64_t)t[i].shape[d];
        }
        /* back to back: this tensor begins where the last one ended */
        strbuf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                      (unsigned long long)(off + 4 * numel));
        off += 4 * numel;
    }
    strbuf_printf(&h, "}");
    /* pad with spaces so the byte buffer starts 8-byte aligned */
    while (!h.oom && (8 + h.len) % 8 != 0) strbuf_printf(&h, " ");
    if (h.oom) {
        strbuf_free(&h);
        return fail_rc(1, err, errlen, "safetensors: out of memory building the header");
    }

    /* ---- write a unique temporary, then rename (core/fileio.h) ---- */
    FioWriter w;
    if (fio_create(&w, path, err, errlen)) {
        strbuf_free(&h);
        return 1;
    }
    unsigned char len8[8];
    put_u64le(len8, (uint64_t)h.len);
    int bad = fwrite(len8, 1, 8, w.f) != 8 || fwrite(h.s, 1, h.len, w.f) != h.len;
    for (int i = 0; i < n && !bad; i++) {
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
        bad = write_words(w.f, t[i].data, numel) != 0;
    }
    strbuf_free(&h);
    /* fio_commit checks every write above (the stream's error flag), then
     * flushes, fsyncs and renames; on failure path is left as it was */
    if (fio_commit(&w, err, errlen)) return 1;
    return 0;
}
