/* checkpoint.c - saving and loading a Model (format in checkpoint.h).
 *
 * Two promises:
 *   - A save never destroys the previous file: we write "path.tmp", flush
 *     it to the disk (fflush + fsync), and only then rename it over path.
 *     rename() within one directory is atomic on POSIX file systems, so
 *     path is always either the old file or the complete new one.
 *   - A load never trusts the file: it checks the magic, the version, the
 *     size the header declares against the size on disk (truncation), the
 *     CRC-32 (corruption), the config (validity), that the config's
 *     parameter count fits the file (before allocating anything), and every
 *     tensor's name and shape against what the config implies.
 * Numbers are written byte by byte in little-endian order, so a file is the
 * same on every machine.
 */
#include "checkpoint.h"
#include "model.h"
#include "fail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- CRC-32 ----------------------------------------------------------------
 * Bit-reflected CRC with polynomial 0xEDB88320, one table lookup per byte.
 * The table is 256 entries computed once; the check value is in the header. */
static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
    crc_ready = 1;
}

uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    if (!crc_ready) crc_init();
    const uint8_t *p = data;
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return ~c;
}

/* ---- little-endian encoding ---------------------------------------------- */
static void put_u32(uint8_t *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static uint64_t get_u64(const uint8_t *b) {
    return (uint64_t)get_u32(b) | (uint64_t)get_u32(b + 4) << 32;
}
static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The Config as 11 four-byte fields, in the order of the struct. */
static void config_encode(uint8_t b[44], const Config *c) {
    const int32_t v[8] = {c->N, c->d_model, c->d_ff, c->h, c->d_k, c->d_v, c->vocab, c->max_len};
    for (int i = 0; i < 8; i++) put_u32(b + 4 * i, (uint32_t)v[i]);
    put_u32(b + 32, float_bits(c->dropout));
    put_u32(b + 36, (uint32_t)c->pre_ln);
    put_u32(b + 40, (uint32_t)c->pad_id);
}
static void config_decode(Config *c, const uint8_t b[44]) {
    int32_t v[8];
    for (int i = 0; i < 8; i++) v[i] = (int32_t)get_u32(b + 4 * i);
    c->N = v[0], c->d_model = v[1], c->d_ff = v[2], c->h = v[3];
    c->d_k = v[4], c->d_v = v[5], c->vocab = v[6], c->max_len = v[7];
    c->dropout = bits_float(get_u32(b + 32));
    c->pre_ln = (int32_t)get_u32(b + 36);
    c->pad_id = (int32_t)get_u32(b + 40);
}

/* ============================================================================
 * Saving
 * ========================================================================== */

typedef struct {
    FILE *f;
    uint32_t crc;
    uint64_t bytes;
    int failed;
} Writer;

static void w_bytes(Writer *w, const void *p, size_t n) {
    if (w->failed) return;
    if (fwrite(p, 1, n, w->f) != n) w->failed = errno ? errno : EIO;
    w->crc = crc32_update(w->crc, p, n);
    w->bytes += n;
}
static void w_u32(Writer *w, uint32_t v) {
    uint8_t b[4];
    put_u32(b, v);
    w_bytes(w, b, 4);
}
static void w_u64(Writer *w, uint64_t v) {
    uint8_t b[8];
    put_u64(b, v);
    w_bytes(w, b, 8);
}
static void w_floats(Writer *w, const float *x, size_t n) {
    uint8_t buf[4096 * 4];
    while (n > 0 && !w->failed) {
        size_t k = n < 4096 ? n : 4096;
        for (size_t i = 0; i < k; i++) put_u32(buf + 4 * i, float_bits(x[i]));
        w_bytes(w, buf, 4 * k);
        x += k, n -= k;
    }
}

/* Bytes the file will have: known before writing, stored in the header. */
static uint64_t file_size(const Model *m, int with_ts) {
    uint64_t n = CKPT_HEADER_BYTES + 4;
    if (with_ts) n += 32 + 8 * (uint64_t)m->params.n;
    for (int i = 0; i < m->params.n_tensors; i++) {
        const NamedTensor *t = &m->params.tensors[i];
        n += 4 + strlen(t->name) + 4 + 4 * (uint64_t)t->ndim + 4 * (uint64_t)named_tensor_numel(t);
    }
    return n;
}

/* fsync the folder holding path, so the rename itself survives a power cut
 * (best effort: some file systems refuse, which is harmless here). */
static void sync_dir(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int model_save(const Model *m, const char *path, const TrainState *ts, char *err, size_t errlen) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return fail(err, errlen, "checkpoint path '%s' is too long", path);
    Writer w = {fopen(tmp, "wb"), 0, 0, 0};
    if (!w.f) return fail(err, errlen, "cannot create '%s': %s", tmp, strerror(errno));

    uint8_t cfg[44];
    config_encode(cfg, &m->cfg);
    w_bytes(&w, CKPT_MAGIC, 8);
    w_u32(&w, CKPT_VERSION);
    w_u64(&w, file_size(m, ts != NULL));
    w_u32(&w, ts ? CKPT_FLAG_TRAIN : 0);
    w_bytes(&w, cfg, sizeof cfg);
    w_u32(&w, (uint32_t)m->params.n_tensors);
    if (ts) {
        w_u64(&w, ts->step);
        w_u64(&w, ts->rng_state[0]);
        w_u64(&w, ts->rng_state[1]);
        w_u64(&w, m->params.n);
        w_floats(&w, ts->adam_m, m->params.n);
        w_floats(&w, ts->adam_v, m->params.n);
    }
    for (int i = 0; i < m->params.n_tensors; i++) {
        const NamedTensor *t = &m->params.tensors[i];
        uint32_t len = (uint32_t)strlen(t->name);
        w_u32(&w, len);
        w_bytes(&w, t->name, len);
        w_u32(&w, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) w_u32(&w, (uint32_t)t->shape[d]);
        w_floats(&w, t->data, named_tensor_numel(t));
    }
    w_u32(&w, w.crc);   /* the CRC of everything before it */

    /* fwrite may only fill the stdio buffer: the disk-full error often shows
     * up at fflush, and fsync makes the bytes durable before the rename. */
    if (!w.failed && fflush(w.f) != 0) w.failed = errno ? errno : EIO;
    if (!w.failed && fsync(fileno(w.f)) != 0 && errno != EINVAL && errno != EROFS) w.failed = errno;
    if (fclose(w.f) != 0 && !w.failed) w.failed = errno ? errno : EIO;
    if (w.failed) {
        remove(tmp);
        return fail(err, errlen, "writing '%s' failed: %s; '%s' was left as it was",
                    tmp, strerror(w.failed), path);
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return fail(err, errlen, "cannot rename '%s' to '%s': %s; '%s' was left as it was",
                    tmp, path, strerror(e), path);
    }
    sync_dir(path);
    return 0;
}

/* ============================================================================
 * Loading
 * ========================================================================== */

typedef struct {
    FILE *f;
    const char *path;
    int eof;
} Reader;

static int r_bytes(Reader *r, void *p, size_t n) {
    if (r->eof) return -1;
    if (fread(p, 1, n, r->f) != n) {
        r->eof = 1;
        return -1;
    }
    return 0;
}
static uint32_t r_u32(Reader *r) {
    uint8_t b[4] = {0};
    r_bytes(r, b, 4);
    return get_u32(b);
}
static uint64_t r_u64(Reader *r) {
    uint8_t b[8] = {0};
    r_bytes(r, b, 8);
    return get_u64(b);
}
static void r_floats(Reader *r, float *x, size_t n) {
    uint8_t buf[4096 * 4];
    while (n > 0) {
        size_t k = n < 4096 ? n : 4096;
        if (r_bytes(r, buf, 4 * k)) return;
        if (x) {
            for (size_t i = 0; i < k; i++) x[i] = bits_float(get_u32(buf + 4 * i));
            x += k;
        }
        n -= k;
    }
}

/* CRC-32 of the first n bytes of f (from the start). */
static int crc_of_file(FILE *f, uint64_t n, uint32_t *crc) {
    static uint8_t buf[1 << 16];
    uint32_t c = 0;
    if (fseek(f, 0, SEEK_SET)) return -1;
    while (n > 0) {
        size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
        if (fread(buf, 1, k, f) != k) return -1;
        c = crc32_update(c, buf, k);
        n -= k;
    }
    *crc = c;
    return 0;
}

/* Everything before the tensors: returns 0 with the config and flags, or 2. */
static int read_header(Reader *r, uint64_t size, Config *cfg, uint32_t *flags, uint32_t *n_tensors,
                       char *err, size_t errlen) {
    const char *path = r->path;
    uint8_t head[CKPT_HEADER_BYTES];
    size_t got = fread(head, 1, sizeof head, r->f);
    size_t cmp = got < 8 ? got : 8;
    if (memcmp(head, CKPT_MAGIC, cmp) != 0)
        return fail(err, errlen, "'%s' is not a checkpoint of this program (its first bytes are not \"%s\")",
                    path, CKPT_MAGIC);
    if (got < CKPT_HEADER_BYTES)
        return fail(err, errlen, "'%s' is truncated: %zu bytes, shorter than the %d-byte header",
                    path, got, CKPT_HEADER_BYTES);
    uint32_t version = get_u32(head + CKPT_OFF_VERSION);
    if (version != CKPT_VERSION)
        return fail(err, errlen, "'%s' is checkpoint format version %u; this program reads version %u",
                    path, version, CKPT_VERSION);
    uint64_t declared = get_u64(head + CKPT_OFF_SIZE);
    if (size < declared)
        return fail(err, errlen, "'%s' is truncated: %llu bytes of the %llu its header declares",
                    path, (unsigned long long)size, (unsigned long long)declared);
    if (size > declared)
        return fail(err, errlen, "'%s' has %llu bytes after the end its header declares (%llu bytes)",
                    path, (unsigned long long)(size - declared), (unsigned long long)declared);
    uint32_t stored = 0, computed = 0;
    uint8_t tail[4];
    if (crc_of_file(r->f, size - 4, &computed) || fread(tail, 1, 4, r->f) != 4)
        return fail(err, errlen, "cannot read '%s': %s", path, strerror(errno));
    stored = get_u32(tail);
    if (stored != computed)
        return fail(err, errlen, "'%s' is corrupted: its CRC-32 checksum is 0x%08x but the bytes give 0x%08x",
                    path, stored, computed);
    if (fseek(r->f, CKPT_HEADER_BYTES, SEEK_SET))
        return fail(err, errlen, "cannot read '%s': %s", path, strerror(errno));

    *flags = get_u32(head + CKPT_OFF_FLAGS);
    if (*flags & ~CKPT_FLAG_TRAIN)
        return fail(err, errlen, "'%s' has unknown flags 0x%x", path, *flags);
    config_decode(cfg, head + CKPT_OFF_CONFIG);
    char why[200];
    if (config_validate(cfg, why, sizeof why))
        return fail(err, errlen, "'%s' holds an invalid config: %s", path, why);
    *n_tensors = get_u32(head + CKPT_OFF_NTENSORS);
    return 0;
}

int model_load(Model *m, const char *path, int max_B, int max_Ts, int max_Tt,
               TrainState *ts, int *has_train_state, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    if (has_train_state) *has_train_state = 0;
    Reader r = {fopen(path, "rb"), path, 0};
    if (!r.f) return fail(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(r.f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(r.f);
        return fail(err, errlen, "'%s' is not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    Config cfg;
    uint32_t flags = 0, n_tensors = 0;
    int rc = read_header(&r, size, &cfg, &flags, &n_tensors, err, errlen);
    if (rc) {
        fclose(r.f);
        return rc;
    }

    /* The checksum matched, so from here on a mismatch means the file was
     * written for another layout. Sizes are checked against the file BEFORE
     * allocating: a config claiming a billion parameters in a 1 kB file is
     * refused here, not by the out-of-memory killer. */
    size_t n = model_param_count(&cfg);
    int with_ts = (flags & CKPT_FLAG_TRAIN) != 0;
    uint64_t least = CKPT_HEADER_BYTES + 4 + 4 * (uint64_t)n + (with_ts ? 32 + 8 * (uint64_t)n : 0);
    if (least > size) {
        fclose(r.f);
        return fail(err, errlen, "'%s' is inconsistent: its config has %zu parameters, which need at least "
                    "%llu bytes, but the file has %llu", path, n, (unsigned long long)least,
                    (unsigned long long)size);
    }
    TrainState tmp_ts = {0};
    if (with_ts) {
        tmp_ts.step = r_u64(&r);
        tmp_ts.rng_state[0] = r_u64(&r);
        tmp_ts.rng_state[1] = r_u64(&r);
        uint64_t nfile = r_u64(&r);
        if (nfile != n) {
            fclose(r.f);
            return fail(err, errlen, "'%s' is inconsistent: its optimizer state has %llu parameters, "
                        "its config %zu", path, (unsigned long long)nfile, n);
        }
        /* Adam's moments go straight to the caller's arrays (or are skipped). */
        int want = ts && ts->adam_m && ts->adam_v;
        r_floats(&r, want ? ts->adam_m : NULL, n);
        r_floats(&r, want ? ts->adam_v : NULL, n);
    }

    rc = model_build(m, &cfg, max_B, max_Ts, max_Tt, 0, err, errlen);
    if (rc) {
        fclose(r.f);
        return rc;
    }
    if (n_tensors != (uint32_t)m->params.n_tensors) {
        rc = fail(err, errlen, "'%s' is inconsistent: it has %u tensors, its config needs %d",
                  path, n_tensors, m->params.n_tensors);
        goto out;
    }
    for (int i = 0; i < m->params.n_tensors; i++) {
        const NamedTensor *t = &m->params.tensors[i];
        char name[64] = {0};
        uint32_t len = r_u32(&r);
        if (len >= sizeof t->name) {
            rc = fail(err, errlen, "'%s' is inconsistent: tensor %d's name is %u bytes long (at most %zu)",
                      path, i, len, sizeof t->name - 1);
            goto out;
        }
        r_bytes(&r, name, len);
        uint32_t ndim = r_u32(&r), shape[2] = {0, 0};
        if (ndim < 1 || ndim > 2) {
            rc = fail(err, errlen, "'%s' is inconsistent: tensor '%s' has %u dimensions", path, name, ndim);
            goto out;
        }
        for (uint32_t d = 0; d < ndim; d++) shape[d] = r_u32(&r);
        int same = !strcmp(name, t->name) && (int)ndim == t->ndim && shape[0] == (uint32_t)t->shape[0]
                   && (ndim == 1 || shape[1] == (uint32_t)t->shape[1]);
        if (r.eof) break;
        if (!same) {
            char want[32], have[32];
            if (t->ndim == 1) snprintf(want, sizeof want, "[%d]", t->shape[0]);
            else snprintf(want, sizeof want, "[%d, %d]", t->shape[0], t->shape[1]);
            if (ndim == 1) snprintf(have, sizeof have, "[%u]", shape[0]);
            else snprintf(have, sizeof have, "[%u, %u]", shape[0], shape[1]);
            rc = fail(err, errlen, "'%s' is inconsistent: tensor %d is '%s' %s in the file, but its config "
                      "says '%s' %s", path, i, name, have, t->name, want);
            goto out;
        }
        r_floats(&r, t->data, named_tensor_numel(t));
    }
    if (r.eof || ftell(r.f) != (long)(size - 4)) {
        rc = fail(err, errlen, "'%s' is inconsistent: its tensors do not end where the checksum begins", path);
        goto out;
    }
    if (ts) {
        ts->step = tmp_ts.step;
        ts->rng_state[0] = tmp_ts.rng_state[0];
        ts->rng_state[1] = tmp_ts.rng_state[1];
    }
    if (has_train_state) *has_train_state = with_ts;
out:
    fclose(r.f);
    if (rc) model_free(m);
    return rc;
}
