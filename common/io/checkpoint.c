/* checkpoint.c - saving and loading a Model, and a training run (format
 * in checkpoint.h).
 *
 * Two promises:
 *   - A save never destroys the previous file and never writes a bad one:
 *     it refuses weights or Adam moments that are NaN or infinite, writes a
 *     uniquely named temporary in the same folder (fileio.h: mkstemp, so a
 *     planted symlink is never followed and two runs never share it),
 *     checks every write, fsyncs, and only then renames it over path.
 *   - A load never trusts the file, and reads it once. In order:
 *       1. it is a regular file (a FIFO would block forever);
 *       2. magic, version, and the size the header declares against the
 *          size on disk (truncation, trailing bytes);
 *       3. flags, the config (config_validate, plus CKPT_MAX_PE_FLOATS for
 *          what the file makes us allocate besides its own numbers), and the
 *          file is big enough for the config's parameters - all before
 *          anything is allocated;
 *       4. the model is built, and the exact size its config implies must
 *          be the declared size, and the tensor count its count - so a 72-byte
 *          header stretched to 32 GiB is refused without reading on;
 *       5. one pass over the rest: TrainState and tensors go straight into
 *          the arrays sized in step 4 (never by a number read later), every
 *          name and shape is compared, every float checked finite, and the
 *          CRC-32 is accumulated on the way and compared at the end.
 *     A refusal in 3-5 from a file whose checksum does not match is
 *     reported as corruption (the checksum is computed for that message
 *     only for files up to CKPT_DIAG_CRC_BYTES, so the cost stays bounded).
 * Numbers are written byte by byte in little-endian order, so a file is the
 * same on every machine.
 */
#include "io/checkpoint.h"
#include "core/fileio.h"
#include "model/backend_cpu.h"
#include "model/model.h"
#include "model/train.h"
#include "core/tensor.h"
#include "core/fail.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- Config's fields, listed once ---------------------------------------- */
const ConfigField CONFIG_FIELDS[CONFIG_N_FIELDS] = {
    {"N", offsetof(Config, N), CFG_I32},
    {"d_model", offsetof(Config, d_model), CFG_I32},
    {"d_ff", offsetof(Config, d_ff), CFG_I32},
    {"h", offsetof(Config, h), CFG_I32},
    {"d_k", offsetof(Config, d_k), CFG_I32},
    {"d_v", offsetof(Config, d_v), CFG_I32},
    {"vocab", offsetof(Config, vocab), CFG_I32},
    {"max_len", offsetof(Config, max_len), CFG_I32},
    {"dropout", offsetof(Config, dropout), CFG_F32},
    {"pre_ln", offsetof(Config, pre_ln), CFG_I32},
    {"pad_id", offsetof(Config, pad_id), CFG_I32},
    {"pos", offsetof(Config, pos), CFG_FLAG},   /* CKPT_FLAG_LEARNED_PE: newer than the block */
    {"arch", offsetof(Config, arch), CFG_FLAG}, /* CKPT_FLAG_DECODER */
    {"norm", offsetof(Config, norm), CFG_FLAG}, /* CKPT_FLAG_RMSNORM */
    {"ffn", offsetof(Config, ffn), CFG_FLAG},   /* CKPT_FLAG_SWIGLU */
};

int config_field_int(const Config *c, const ConfigField *f) {
    assert(f->kind != CFG_F32);
    int v;
    memcpy(&v, (const char *)c + f->offset, sizeof v);
    return v;
}

int config_differs(const Config *a, const Config *b, char *why, size_t cap) {
    for (int i = 0; i < CONFIG_N_FIELDS; i++) {
        const ConfigField *f = &CONFIG_FIELDS[i];
        if (f->kind == CFG_F32) continue;   /* dropout */
        int va = config_field_int(a, f), vb = config_field_int(b, f);
        if (va != vb) {
            snprintf(why, cap, "%s %d, this run's %d", f->name, va, vb);
            return 1;
        }
    }
    return 0;
}

/* The config block: the fields before pos, 4 bytes each, in the table's order. */
static void config_encode(uint8_t b[44], const Config *c) {
    for (int i = 0; i < 11; i++) {
        const ConfigField *f = &CONFIG_FIELDS[i];
        uint32_t u;
        memcpy(&u, (const char *)c + f->offset, 4);   /* an int's or dropout's bits */
        put_u32(b + 4 * i, u);
    }
}
static void config_decode(Config *c, const uint8_t b[44]) {
    for (int i = 0; i < 11; i++) {
        uint32_t u = get_u32(b + 4 * i);
        memcpy((char *)c + CONFIG_FIELDS[i].offset, &u, 4);
    }
}

/* The CFG_FLAG fields, each a bit of the flags word: set only where the
 * model departs from the 2017 one, so a file of the paper's model has the
 * flags (and so the bytes) it always had, and an older file (bit clear)
 * loads as the paper's model. */
#define CONFIG_FLAGS (CKPT_FLAG_LEARNED_PE | CKPT_FLAG_DECODER | CKPT_FLAG_RMSNORM | CKPT_FLAG_SWIGLU)
static uint32_t config_flags(const Config *c) {
    return (c->pos == POS_LEARNED ? CKPT_FLAG_LEARNED_PE : 0) | (c->arch == ARCH_DECODER ? CKPT_FLAG_DECODER : 0) |
           (c->norm == NORM_RMS ? CKPT_FLAG_RMSNORM : 0) | (c->ffn == FFN_SWIGLU ? CKPT_FLAG_SWIGLU : 0);
}
static void config_from_flags(Config *c, uint32_t flags) {
    c->pos = (flags & CKPT_FLAG_LEARNED_PE) ? POS_LEARNED : POS_SINUSOID;
    c->arch = (flags & CKPT_FLAG_DECODER) ? ARCH_DECODER : ARCH_ENC_DEC;
    c->norm = (flags & CKPT_FLAG_RMSNORM) ? NORM_RMS : NORM_LAYER;
    c->ffn = (flags & CKPT_FLAG_SWIGLU) ? FFN_SWIGLU : FFN_RELU;
}

/* ============================================================================
 * Finite numbers only
 * ========================================================================== */

/* The tensor of p holding flat parameter i (Params.mem order), and the
 * offset inside it; "?" if none does. */
static const char *param_at(const Params *p, size_t i, size_t *within) {
    for (int k = 0; k < p->n_tensors; k++) {
        const NamedTensor *t = &p->tensors[k];
        size_t off = (size_t)(t->data - p->mem), n = named_tensor_numel(t);
        if (i >= off && i < off + n) {
            *within = i - off;
            return t->name;
        }
    }
    *within = 0;
    return "?";
}

typedef struct {
    uint64_t count;     /* non-finite values seen                        */
    const char *array;  /* where the first one was: "weights", "adam_m", ... */
    size_t index;       /* its flat index in that array                  */
    float value;
} NonFinite;

static void scan_finite(NonFinite *nf, const char *array, const float *x, size_t n, size_t base) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            if (!nf->count++) nf->array = array, nf->index = base + i, nf->value = x[i];
        }
}

/* "adam_v holds 137 non-finite values (the first: adam_v[5], element 5 of
 * 'embed', is inf)" */
static void describe_nonfinite(char *buf, size_t cap, const NonFinite *nf, const Params *p) {
    size_t within;
    const char *name = param_at(p, nf->index, &within);
    snprintf(buf, cap, "%llu non-finite value%s (the first: %s[%zu], element %zu of '%s', is %s)",
             (unsigned long long)nf->count, nf->count == 1 ? "" : "s", nf->array, nf->index, within, name,
             isnan(nf->value) ? "nan" : nf->value > 0 ? "inf" : "-inf");
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
    errno = 0;
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

/* Bytes the file will have: known before writing, stored in the header.
 * The loader computes the same number from the config it reads. */
static uint64_t file_size(const Model *m, int with_ts) {
    uint64_t n = CKPT_HEADER_BYTES + 4;
    if (with_ts) n += 32 + 8 * (uint64_t)m->params.n;
    for (int i = 0; i < m->params.n_tensors; i++) {
        const NamedTensor *t = &m->params.tensors[i];
        n += 4 + strlen(t->name) + 4 + 4 * (uint64_t)t->ndim + 4 * (uint64_t)named_tensor_numel(t);
    }
    return n;
}

int model_save(const Model *m, const char *path, const TrainState *ts, char *err, size_t errlen) {
    /* A checkpoint is what a run goes back to when something went wrong, so
     * it must never hold NaN or inf - in the weights or in Adam's moments
     * (v = beta2 v + (1 - beta2) g^2 overflows for |g| > 1.8e19 while the
     * weights still look fine). */
    NonFinite nf = {0};
    scan_finite(&nf, "weights", m->params.mem, m->params.n, 0);
    if (ts) {
        scan_finite(&nf, "adam_m", ts->adam_m, m->params.n, 0);
        scan_finite(&nf, "adam_v", ts->adam_v, m->params.n, 0);
    }
    if (nf.count) {
        char why[256];
        describe_nonfinite(why, sizeof why, &nf, &m->params);
        return fail(err, errlen, "not saving '%s': the state holds %s; '%s' was left as it was", path, why, path);
    }

    FioWriter fw;
    if (fio_create(&fw, path, err, errlen)) return 1;
    Writer w = {fw.f, 0, 0, 0};
    uint8_t cfg[44];
    config_encode(cfg, &m->cfg);
    w_bytes(&w, CKPT_MAGIC, 8);
    w_u32(&w, CKPT_VERSION);
    w_u64(&w, file_size(m, ts != NULL));
    w_u32(&w, config_flags(&m->cfg) | (ts ? CKPT_FLAG_TRAIN : 0));
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
    if (w.failed) {
        fio_abort(&fw);
        snprintf(err, errlen, "writing '%s' failed: %s; '%s' was left as it was", path, strerror(w.failed), path);
        return 1;
    }
    return fio_commit(&fw, err, errlen);   /* flush, fsync, close, rename, fsync the folder */
}

/* ============================================================================
 * Loading
 * ========================================================================== */

/* Reads the file front to back, once, keeping the CRC of what it read. */
typedef struct {
    FILE *f;
    uint32_t crc;
    uint64_t pos;       /* bytes read so far                             */
    int short_read;     /* the file ended early (or changed under us)    */
} Reader;

static void r_bytes(Reader *r, void *p, size_t n) {
    if (!r->short_read && fread(p, 1, n, r->f) == n) {
        r->crc = crc32_update(r->crc, p, n);
        r->pos += n;
        return;
    }
    r->short_read = 1;
    memset(p, 0, n);
}
static uint32_t r_u32(Reader *r) {
    uint8_t b[4];
    r_bytes(r, b, 4);
    return get_u32(b);
}
static uint64_t r_u64(Reader *r) {
    uint8_t b[8];
    r_bytes(r, b, 8);
    return get_u64(b);
}
/* n floats into x (NULL: read and drop them), checking each is finite */
static void r_floats(Reader *r, float *x, size_t n, NonFinite *nf, const char *array) {
    uint8_t buf[4096 * 4];
    float tmp[4096];
    for (size_t done = 0; done < n && !r->short_read;) {
        size_t k = n - done < 4096 ? n - done : 4096;
        r_bytes(r, buf, 4 * k);
        float *dst = x ? x + done : tmp;
        for (size_t i = 0; i < k; i++) dst[i] = bits_float(get_u32(buf + 4 * i));
        scan_finite(nf, array, dst, k, done);
        done += k;
    }
}
/* reads (and checksums) everything up to byte `to` */
static void r_skip_to(Reader *r, uint64_t to) {
    uint8_t buf[1 << 14];
    while (r->pos < to && !r->short_read) {
        uint64_t k = to - r->pos < sizeof buf ? to - r->pos : sizeof buf;
        r_bytes(r, buf, (size_t)k);
    }
}

/* For a refusal before the single pass (steps 3-4): is the real reason a
 * damaged file? Computes the CRC of a file of at most CKPT_DIAG_CRC_BYTES
 * and, if it does not match, replaces the message. */
static int blame_corruption(FILE *f, const char *path, uint64_t size, char *err, size_t errlen) {
    if (size < CKPT_HEADER_BYTES + 4 || size > CKPT_DIAG_CRC_BYTES || fseek(f, 0, SEEK_SET)) return 2;
    Reader r = {f, 0, 0, 0};
    r_skip_to(&r, size - 4);
    uint32_t computed = r.crc, stored = r_u32(&r);
    if (!r.short_read && stored != computed)
        fail(err, errlen, "'%s' is corrupted: its CRC-32 checksum is 0x%08x but the bytes give 0x%08x",
             path, stored, computed);
    return 2;
}

/* One tensor's record, checked against what the config says it must be.
 * Returns 0, or 2 with the inconsistency described in why. */
static int read_tensor(Reader *r, const NamedTensor *t, int i, NonFinite *nf, char *why, size_t cap) {
    char name[64] = {0}, shown[200];
    uint32_t len = r_u32(r);
    if (len >= sizeof t->name) {
        snprintf(why, cap, "tensor %d's name is %u bytes long (at most %zu)", i, len, sizeof t->name - 1);
        return 2;
    }
    r_bytes(r, name, len);
    uint32_t ndim = r_u32(r), shape[2] = {0, 0};
    fio_escape(shown, sizeof shown, name, len);   /* the file's bytes: printed escaped */
    if (ndim < 1 || ndim > 2) {
        snprintf(why, cap, "tensor '%s' has %u dimensions", shown, ndim);
        return 2;
    }
    for (uint32_t d = 0; d < ndim; d++) shape[d] = r_u32(r);
    int same = len == strlen(t->name) && !memcmp(name, t->name, len) && (int)ndim == t->ndim &&
               shape[0] == (uint32_t)t->shape[0] && (ndim == 1 || shape[1] == (uint32_t)t->shape[1]);
    if (r->short_read) return 0;   /* reported as a short read by the caller */
    if (!same) {
        char want[32], have[32];
        if (t->ndim == 1) snprintf(want, sizeof want, "[%d]", t->shape[0]);
        else snprintf(want, sizeof want, "[%d, %d]", t->shape[0], t->shape[1]);
        if (ndim == 1) snprintf(have, sizeof have, "[%u]", shape[0]);
        else snprintf(have, sizeof have, "[%u, %u]", shape[0], shape[1]);
        snprintf(why, cap, "tensor %d is '%s' %s in the file, but its config says '%s' %s",
                 i, shown, have, t->name, want);
        return 2;
    }
    r_floats(r, t->data, named_tensor_numel(t), nf, "weights");
    return 0;
}

/* The loader behind model_load and model_load_train. own_ts: allocate
 * ts->adam_m / adam_v here (sized by the validated config). */
static int load(Model *m, const char *path, int max_B, int max_Ts, int max_Tt,
                TrainState *ts, int own_ts, int *has_train_state, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    if (has_train_state) *has_train_state = 0;
    if (own_ts) ts->adam_m = ts->adam_v = NULL;

    /* 1. a regular file, or nothing */
    long long fsize = 0;
    FILE *f = fio_open_read(path, &fsize, err, errlen);
    if (!f) return 2;
    if (checkpoint_test_hook) checkpoint_test_hook(path);
    uint64_t size = (uint64_t)fsize;

    /* 2. the header: magic, version, declared size */
    Reader r = {f, 0, 0, 0};
    uint8_t head[CKPT_HEADER_BYTES];
    size_t got = fread(head, 1, sizeof head, f);
    r.crc = crc32_update(0, head, got);
    r.pos = got;
    int rc = 2;
    if (memcmp(head, CKPT_MAGIC, got < 8 ? got : 8) != 0) {
        fail(err, errlen, "'%s' is not a checkpoint of this program (its first bytes are not \"%s\")",
             path, CKPT_MAGIC);
        goto out;
    }
    if (got < CKPT_HEADER_BYTES) {
        fail(err, errlen, "'%s' is truncated: %zu bytes, shorter than the %d-byte header", path, got,
             CKPT_HEADER_BYTES);
        goto out;
    }
    uint32_t version = get_u32(head + CKPT_OFF_VERSION);
    if (version != CKPT_VERSION) {
        fail(err, errlen, "'%s' is checkpoint format version %u; this program reads version %u", path, version,
             CKPT_VERSION);
        goto out;
    }
    uint64_t declared = get_u64(head + CKPT_OFF_SIZE);
    if (size < declared) {
        fail(err, errlen, "'%s' is truncated: %llu bytes of the %llu its header declares", path,
             (unsigned long long)size, (unsigned long long)declared);
        goto out;
    }
    if (size > declared) {
        fail(err, errlen, "'%s' has %llu bytes after the end its header declares (%llu bytes)", path,
             (unsigned long long)(size - declared), (unsigned long long)declared);
        goto out;
    }

    /* 3. flags and config, before allocating anything */
    uint32_t flags = get_u32(head + CKPT_OFF_FLAGS);
    uint32_t n_tensors = get_u32(head + CKPT_OFF_NTENSORS);
    int with_ts = (flags & CKPT_FLAG_TRAIN) != 0;
    Config cfg;
    config_decode(&cfg, head + CKPT_OFF_CONFIG);
    /* the config's 11 fields predate learned PE: a flags bit carries it, so
     * every older file (bit clear) still loads, as sinusoids */
    config_from_flags(&cfg, flags);
    char why[512];
    if (flags & ~(CKPT_FLAG_TRAIN | CONFIG_FLAGS)) {
        fail(err, errlen, "'%s' has unknown flags 0x%x", path, flags);
        goto refused;
    }
    if (config_validate(&cfg, why, sizeof why)) {
        fail(err, errlen, "'%s' holds an invalid config: %s", path, why);
        goto refused;
    }
    /* The PE table is the one allocation a config asks for that the file
     * does not pay for in bytes: cap it as the flags are capped. */
    double pe = (double)cfg.max_len * cfg.d_model;
    if (pe > CKPT_MAX_PE_FLOATS) {
        fail(err, errlen, "'%s' asks for max_len %d x d_model %d = %.3g positional-encoding values (%.3g GB); "
             "a checkpoint may ask for at most %.3g (Table 3's models use max_len 512)", path, cfg.max_len,
             cfg.d_model, pe, pe * 4 / 1e9, (double)CKPT_MAX_PE_FLOATS);
        goto refused;
    }
    size_t n = model_param_count(&cfg);
    uint64_t least = CKPT_HEADER_BYTES + 4 + 4 * (uint64_t)n + (with_ts ? 32 + 8 * (uint64_t)n : 0);
    if (least > size) {
        fail(err, errlen, "'%s' is inconsistent: its config has %zu parameters, which need at least %llu bytes, "
             "but the file has %llu", path, n, (unsigned long long)least, (unsigned long long)size);
        goto refused;
    }

    /* 4. build (its memory is bounded by the file's size and the caps), then
     * the exact layout the config implies */
    rc = model_build(m, &cfg, max_B, max_Ts, max_Tt, 0, err, errlen);
    if (rc) goto out;
    rc = 2;
    if (n_tensors != (uint32_t)m->params.n_tensors) {
        fail(err, errlen, "'%s' is inconsistent: it has %u tensors, its config needs %d", path, n_tensors,
             m->params.n_tensors);
        goto refused;
    }
    uint64_t expect = file_size(m, with_ts);
    if (expect != declared) {
        fail(err, errlen, "'%s' is inconsistent: its config implies a file of %llu bytes, but it declares %llu",
             path, (unsigned long long)expect, (unsigned long long)declared);
        goto refused;
    }
    int want_ts = ts && (own_ts || (ts->adam_m && ts->adam_v));
    if (own_ts && with_ts) {
        /* they become a trainer's moments (trainer_resume): big pages,
         * untouched until the read below writes them */
        ts->adam_m = calloc_big(n + 1, sizeof(float), 0);
        ts->adam_v = calloc_big(n + 1, sizeof(float), 0);
        if (!ts->adam_m || !ts->adam_v) {
            fail(err, errlen, "out of memory for the optimizer state of '%s' (%zu parameters)", path, n);
            goto out;
        }
    }

    /* 5. one pass: TrainState and tensors into arrays sized above; the first
     * inconsistency is kept and the rest only checksummed, so that damage
     * is reported as damage */
    NonFinite nf = {0};
    int bad = 0;
    TrainState got_ts = {0};
    if (with_ts) {
        got_ts.step = r_u64(&r);
        got_ts.rng_state[0] = r_u64(&r);
        got_ts.rng_state[1] = r_u64(&r);
        uint64_t nfile = r_u64(&r);
        if (nfile != n && !r.short_read) {
            snprintf(why, sizeof why, "its optimizer state has %llu parameters, its config %zu",
                     (unsigned long long)nfile, n);
            bad = 1;
        }
        if (!bad) {
            r_floats(&r, want_ts ? ts->adam_m : NULL, n, &nf, "adam_m");
            r_floats(&r, want_ts ? ts->adam_v : NULL, n, &nf, "adam_v");
        }
    }
    for (int i = 0; i < m->params.n_tensors && !bad && !r.short_read; i++)
        bad = read_tensor(&r, &m->params.tensors[i], i, &nf, why, sizeof why) != 0;
    if (!bad && !r.short_read && r.pos != size - 4) {
        snprintf(why, sizeof why, "its tensors do not end where the checksum begins");
        bad = 1;
    }
    r_skip_to(&r, size - 4);
    uint32_t computed = r.crc, stored = r_u32(&r);
    if (r.short_read) {
        fail(err, errlen, "'%s' changed while it was being read (it ended before its %llu bytes)", path,
             (unsigned long long)size);
        goto out;
    }
    if (stored != computed) {
        fail(err, errlen, "'%s' is corrupted: its CRC-32 checksum is 0x%08x but the bytes give 0x%08x", path,
             stored, computed);
        goto out;
    }
    if (bad) {
        fail(err, errlen, "'%s' is inconsistent: %s", path, why);
        goto out;
    }
    if (nf.count) {
        describe_nonfinite(why, sizeof why, &nf, &m->params);
        fail(err, errlen, "'%s' holds %s: a checkpoint must hold finite numbers only", path, why);
        goto out;
    }
    if (ts && with_ts) {
        ts->step = got_ts.step;
        ts->rng_state[0] = got_ts.rng_state[0];
        ts->rng_state[1] = got_ts.rng_state[1];
    }
    if (has_train_state) *has_train_state = with_ts;
    rc = 0;
    goto out;
refused:
    blame_corruption(f, path, size, err, errlen);
out:
    fclose(f);
    if (rc) {
        model_free(m);
        if (own_ts) {
            free(ts->adam_m);
            free(ts->adam_v);
            ts->adam_m = ts->adam_v = NULL;
        }
    }
    return rc;
}

void (*checkpoint_test_hook)(const char *path);

int model_load(Model *m, const char *path, int max_B, int max_Ts, int max_Tt,
               TrainState *ts, int *has_train_state, char *err, size_t errlen) {
    return load(m, path, max_B, max_Ts, max_Tt, ts, 0, has_train_state, err, errlen);
}

int model_load_train(Model *m, const char *path, int max_B, int max_Ts, int max_Tt, TrainState *ts,
                     char *err, size_t errlen) {
    int has = 0;
    int rc = load(m, path, max_B, max_Ts, max_Tt, ts, 1, &has, err, errlen);
    if (rc) return rc;
    if (!has) {
        model_free(m);
        return fail(err, errlen, "%s holds weights only, no training state (step, RNGs, Adam): "
                    "it cannot be resumed", path);
    }
    return 0;
}

/* ============================================================================
 * Is a file a save of this run?
 * ========================================================================== */

/* 1 if a and b are one vocabulary, symbol for symbol */
static int same_vocab(const Bpe *a, const Bpe *b) {
    int same = a->vocab == b->vocab && a->n_chars == b->n_chars;
    for (int i = 0; same && i < a->vocab; i++)
        same = !strcmp(a->sym[i].text, b->sym[i].text) && a->sym[i].eow == b->sym[i].eow;
    return same;
}

int checkpoint_of_run(const char *path, const CkptRun *run, Model *out, char *why, size_t cap) {
    char diff[96], bp[1100];
    Model local, *m = out ? out : &local;   /* built in place: a Model is not moved */
    TrainState ts = {0};   /* adam_m/v NULL: the step and RNGs only */
    int has = 0;
    if (model_load(m, path, 1, 1, 1, &ts, &has, why, cap)) return 1;
    int rc = 2;
    if (config_differs(&m->cfg, run->cfg, diff, sizeof diff))
        snprintf(why, cap, "another model (%s)", diff);
    else if (run->state && !has)
        snprintf(why, cap, "weights only, no training state");
    else if (run->state && ts.step != run->step)
        snprintf(why, cap, "it was saved at step %llu, not %llu", (unsigned long long)ts.step,
                 (unsigned long long)run->step);
    else if (run->state && ts.rng_state[0] != run->data_rng)
        snprintf(why, cap, "another run (another --seed)");
    else rc = 0;
    if (!rc && run->bpe) {
        Bpe saved;
        snprintf(bp, sizeof bp, "%s.bpe", path);
        if (bpe_load(&saved, bp, why, cap)) rc = 1;
        else {
            if (!same_vocab(&saved, run->bpe) || m->cfg.vocab != saved.vocab)
                rc = 2, snprintf(why, cap, "its .bpe is another vocabulary (another corpus, --seed or --vocab)");
            bpe_free(&saved);
        }
    }
    if (rc || !out) model_free(m);
    return rc;
}

/* ============================================================================
 * Training runs: a model plus where its training stands
 * ========================================================================== */

int trainer_save(Trainer *t, const char *path, char *err, size_t errlen) {
    /* Everything the next step depends on: the weights (in the model), the
     * step (for the learning rate and Adam's bias correction), Adam's m and
     * v, and where both random streams are; first brought to the host. */
    trainer_pull(t);
    TrainState ts = {
        .step = t->step,
        .rng_state = {t->data_rng.state, t->model->dropout_rng.state},
        .adam_m = t->adam_m,
        .adam_v = t->adam_v,
    };
    return model_save(t->model, path, &ts, err, errlen);
}

int trainer_resume(Trainer *t, Model *m, const char *path, const TrainHyper *hp,
                   int B, int T, int max_B, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    if (max_B < B) max_B = B;
    /* One read: model_load_train validates the whole file and hands back
     * the model and Adam's moments, both sized by the file's checked config.
     * (Reading it twice - once for the sizes, once for the data - would trust
     * that nobody replaced the file in between.) */
    TrainState ts = {0};
    if (model_load_train(m, path, max_B, T, T - 1, &ts, err, errlen)) return 2;
    int rc = 0;
    if (m->cfg.max_len < T) {
        snprintf(err, errlen, "%s: the model's max_len (%d) is shorter than the copy sequences (%d)",
                 path, m->cfg.max_len, T);
        rc = 2;
    } else if (m->cfg.vocab < 3) {
        snprintf(err, errlen, "%s: vocabulary %d is too small for the copy task (needs padding, "
                 "start and at least one word)", path, m->cfg.vocab);
        rc = 2;
    } else {
        /* the loaded moments (m->params.n floats each, the n the trainer
         * uses) become the trainer's: no second copy (on the CPU backend,
         * where a loaded model starts, the step's buffers share them) */
        long rows = (long)B * (T - 1);
        rc = trainer_init_adopt(t, m, hp, B, T, rows > 0 && rows <= INT_MAX ? (int)rows : INT_MAX, ts.adam_m,
                                ts.adam_v, err, errlen);
        ts.adam_m = ts.adam_v = NULL;
    }
    if (rc) {
        free(ts.adam_m);
        free(ts.adam_v);
        model_free(m);
        return rc;
    }
    assert(t->n == m->params.n && t->be->host_memory);
    t->step = ts.step;
    t->data_rng.state = ts.rng_state[0];
    model_set_dropout(m, (Rng){ts.rng_state[1]}, 0);
    return 0;
}
