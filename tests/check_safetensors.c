/* check_safetensors.c - the safetensors writer against the format's rules.
 *
 * The rules (huggingface/safetensors, "Format"): 8 bytes of little-endian
 * u64 N, then N bytes of a UTF-8 JSON object (padded at the end with
 * spaces), then the byte buffer; each tensor's "data_offsets" are [begin,
 * end) relative to the buffer, end - begin = element size x product(shape),
 * and the tensors cover the buffer exactly, with no holes and no overlaps.
 * Writers align the buffer to 8 bytes. This test reads the file back with
 * its own small parser of exactly that, independent of the writer.
 *
 * Core    a file with a matrix, a vector, a scalar, an I32 tensor and
 *         metadata obeys every rule and holds the same bytes; the model
 *         export names every tensor as the checkpoint does.
 * Torch   the export in torch.nn.Transformer's layout (io/torch_export.h):
 *         exactly the names and shapes a load_state_dict(strict=True)
 *         wants, in_proj_weight = [W^Q^T; W^K^T; W^V^T], every Linear
 *         weight [out, in], zero attention biases, the post-LN last norms
 *         moved to the stack's final norm, pre-LN's copied; a model
 *         nn.MultiheadAttention cannot hold is refused (2, nothing
 *         written); parity_dump --export-torch writes it, and refuses
 *         the file it loads as its output.
 * Limits  a duplicate or unusable name is refused (2) with nothing written;
 *         an unwritable folder gives 1 and leaves the old file as it was.
 */
#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "parity/grad_dump.h"
#include "io/safetensors.h"
#include "io/torch_export.h"
#include "testutil.h"

static char dir[64], path[128];

static void setup(void) {
    fresh_dir(dir, sizeof dir, "check_safetensors");
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
}

static void teardown(void) { remove_dir(dir); }

/* One entry of the header: "name":{"dtype":"..","shape":[..],"data_offsets":[b,e]} */
typedef struct {
    char dtype[8];
    int ndim;
    long long shape[8];
    unsigned long long begin, end;
} Entry;

static int find_entry(const char *json, const char *name, Entry *e) {
    char key[128];
    snprintf(key, sizeof key, "\"%s\":{", name);
    const char *p = strstr(json, key);
    if (!p) return 0;
    p += strlen(key);
    if (sscanf(p, "\"dtype\":\"%7[A-Z0-9]\"", e->dtype) != 1) return 0;
    p = strstr(p, "\"shape\":[");
    if (!p) return 0;
    p += 9;
    e->ndim = 0;
    while (*p != ']') {
        char *q;
        e->shape[e->ndim++] = strtoll(p, &q, 10);
        p = *q == ',' ? q + 1 : q;
        if (e->ndim == 8) return 0;
    }
    p = strstr(p, "\"data_offsets\":[");
    return p && sscanf(p, "\"data_offsets\":[%llu,%llu]", &e->begin, &e->end) == 2;
}

/* Reads the file at p and checks the file-level rules. Returns its bytes
 * (malloc'd, the caller frees), the JSON header as a string in *json
 * (malloc'd, the caller frees) and the byte buffer in *data, *data_len. */
static unsigned char *read_layout(const char *p, char **json_out, const unsigned char **data, size_t *data_len) {
    size_t size;
    unsigned char *buf = read_file_or_fail(p, &size);
    ck_assert_uint_ge(size, 8);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)buf[i] << (8 * i);   /* little-endian u64 */
    ck_assert_msg(8 + n <= size, "header length %llu runs past the end (%zu bytes)", (unsigned long long)n, size);
    ck_assert_msg((8 + n) % 8 == 0, "the byte buffer starts at %llu, not 8-byte aligned", (unsigned long long)(8 + n));
    const char *json = (const char *)buf + 8;
    ck_assert_int_eq(json[0], '{');
    size_t last = n;
    while (last > 0 && json[last - 1] == ' ') last--;        /* trailing padding: spaces only */
    ck_assert_msg(last > 0 && json[last - 1] == '}', "the header does not end with '}' and spaces");
    for (size_t i = 0; i < n; i++) ck_assert_msg(json[i] >= 0x20 && json[i] < 0x7f, "byte %zu of the header", i);
    *data = buf + 8 + n;
    *data_len = size - 8 - n;
    *json_out = strndup(json, n);   /* a string for strstr */
    ck_assert_ptr_nonnull(*json_out);
    return buf;
}

START_TEST(test_rules_and_bytes) {
    float mat[6] = {1, -2, 3.5f, 1e-30f, -0.0f, 7};
    float vec[3] = {0.25f, 0.5f, 0.75f};
    float scalar = 42;
    int32_t ids[4] = {0, 1, -3, 2147483647};
    SafeTensor t[] = {
        {"w", SAFETENSORS_F32, mat, 2, {2, 3}},
        {"layer.0.b", SAFETENSORS_F32, vec, 1, {3}},
        {"s", SAFETENSORS_F32, &scalar, 0, {0}},
        {"ids", SAFETENSORS_I32, ids, 2, {2, 2}},
    };
    const char *meta[] = {"format", "test", "empty", ""};
    char err[256];
    ck_assert_int_eq(safetensors_write(path, t, 4, meta, 2, err, sizeof err), 0);
    char *json;
    const unsigned char *data;
    size_t data_len;
    unsigned char *buf = read_layout(path, &json, &data, &data_len);
    ck_assert_ptr_nonnull(strstr(json, "\"__metadata__\":{\"format\":\"test\",\"empty\":\"\"}"));

    /* every tensor: dtype, shape, size; sorted by offset they tile the buffer */
    const int sizes[4][3] = {{2, 2, 3}, {1, 3, 0}, {0, 0, 0}, {2, 2, 2}};
    unsigned long long begin[4], end[4];
    for (int i = 0; i < 4; i++) {
        Entry e;
        ck_assert_msg(find_entry(json, t[i].name, &e), "no header entry for %s", t[i].name);
        ck_assert_str_eq(e.dtype, t[i].dtype == SAFETENSORS_I32 ? "I32" : "F32");
        ck_assert_int_eq(e.ndim, sizes[i][0]);
        unsigned long long numel = 1;
        for (int d = 0; d < e.ndim; d++) {
            ck_assert_int_eq(e.shape[d], sizes[i][1 + d]);
            numel *= (unsigned long long)e.shape[d];
        }
        ck_assert_uint_eq(e.end - e.begin, 4 * numel);
        ck_assert_uint_le(e.end, data_len);
        begin[i] = e.begin, end[i] = e.end;
        /* the bytes: little-endian float32 / int32, exactly what was given */
        for (unsigned long long k = 0; k < numel; k++) {
            uint32_t u = 0, want;
            for (int j = 0; j < 4; j++) u |= (uint32_t)data[e.begin + 4 * k + j] << (8 * j);
            memcpy(&want, (const char *)t[i].data + 4 * k, 4);
            ck_assert_uint_eq(u, want);
        }
    }
    unsigned long long pos = 0;   /* no holes, no overlaps, nothing after */
    for (int round = 0; round < 4; round++) {
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (begin[i] == pos) found = i;
        ck_assert_msg(found >= 0, "no tensor begins at byte %llu of the buffer (a hole)", pos);
        pos = end[found];
    }
    ck_assert_uint_eq(pos, data_len);
    free(buf), free(json);
}
END_TEST

/* The model export: every parameter, named as in the checkpoint, the Config in the metadata */
START_TEST(test_model_export) {
    Config c = test_config(1, 8, 16, 2, 3, 5, 10, 8, 0.1f);
    c.pre_ln = 1;
    Model m;
    char err[256];
    ck_assert_int_eq(model_build(&m, &c, 1, 2, 2, 3, err, sizeof err), 0);
    ck_assert_int_eq(model_export_safetensors(&m, path, err, sizeof err), 0);
    char *json;
    const unsigned char *data;
    size_t data_len;
    unsigned char *buf = read_layout(path, &json, &data, &data_len);
    ck_assert_uint_eq(data_len, 4 * m.params.n);
    ck_assert_ptr_nonnull(strstr(json, "\"d_k\":\"3\""));
    ck_assert_ptr_nonnull(strstr(json, "\"pre_ln\":\"1\""));
    for (int i = 0; i < m.params.n_tensors; i++) {
        const NamedTensor *nt = &m.params.tensors[i];
        Entry e;
        ck_assert_msg(find_entry(json, nt->name, &e), "no entry for %s", nt->name);
        ck_assert_int_eq(e.ndim, nt->ndim);
        ck_assert_int_eq(e.shape[0], nt->shape[0]);
        if (nt->ndim == 2) ck_assert_int_eq(e.shape[1], nt->shape[1]);
        ck_assert_mem_eq(data + e.begin, nt->data, 4 * named_tensor_numel(nt));   /* x86: little-endian */
    }
    free(buf), free(json);
    model_free(&m);
}
END_TEST

START_TEST(test_refusals) {
    float x[2] = {1, 2};
    char err[256];
    SafeTensor dup[] = {{"a", SAFETENSORS_F32, x, 1, {1}}, {"a", SAFETENSORS_F32, x + 1, 1, {1}}};
    ck_assert_int_eq(safetensors_write(path, dup, 2, NULL, 0, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "used twice"));
    SafeTensor quote[] = {{"a\"b", SAFETENSORS_F32, x, 1, {2}}};
    ck_assert_int_eq(safetensors_write(path, quote, 1, NULL, 0, err, sizeof err), 2);
    SafeTensor meta_name[] = {{"__metadata__", SAFETENSORS_F32, x, 1, {2}}};
    ck_assert_int_eq(safetensors_write(path, meta_name, 1, NULL, 0, err, sizeof err), 2);
    SafeTensor neg[] = {{"a", SAFETENSORS_F32, x, 1, {-2}}};
    ck_assert_int_eq(safetensors_write(path, neg, 1, NULL, 0, err, sizeof err), 2);
    ck_assert_int_ne(access(path, F_OK), 0);   /* nothing written */

    /* an old file survives a failed write; no .tmp is left behind */
    SafeTensor ok[] = {{"a", SAFETENSORS_F32, x, 1, {2}}};
    ck_assert_int_eq(safetensors_write(path, ok, 1, NULL, 0, err, sizeof err), 0);
    char bad[160], tmp[200];
    snprintf(bad, sizeof bad, "%s/no/such/dir/t.safetensors", dir);
    ck_assert_int_eq(safetensors_write(bad, ok, 1, NULL, 0, err, sizeof err), 1);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    ck_assert_int_eq(access(path, F_OK), 0);
}
END_TEST

/* ---- the torch.nn.Transformer layout ------------------------------------------ */

/* Element k of an F32 tensor in the byte buffer, read little-endian */
static float f32_at(const unsigned char *data, const Entry *e, size_t k) {
    uint32_t u = 0;
    for (int j = 0; j < 4; j++) u |= (uint32_t)data[e->begin + 4 * k + j] << (8 * j);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct {
    const char *json;
    const unsigned char *data;
    int found;               /* tensors looked up so far */
} TorchFile;

/* The entry called name (printf-style), which must have shape (d0) or (d0, d1) */
__attribute__((format(printf, 4, 5)))
static Entry tensor(TorchFile *f, int d0, int d1, const char *fmt, ...) {
    char name[TORCH_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    Entry e;
    ck_assert_msg(find_entry(f->json, name, &e), "no tensor %s in the torch export", name);
    ck_assert_str_eq(e.dtype, "F32");
    ck_assert_msg(e.ndim == (d1 ? 2 : 1) && e.shape[0] == d0 && (!d1 || e.shape[1] == d1),
                  "%s: shape [%lld, %lld] (ndim %d), want [%d, %d]", name, e.shape[0], e.shape[1], e.ndim, d0, d1);
    f->found++;
    return e;
}

/* e holds W^T (out, in) for the project's W (in, out) from row `row` on */
static void is_transposed(TorchFile *f, const Entry *e, int row, const float *W, int in, int out, const char *what) {
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++)
            ck_assert_msg(f32_at(f->data, e, (size_t)(row + o) * in + i) == W[(size_t)i * out + o],
                          "%s: row %d column %d is not W[%d][%d]", what, row + o, i, i, o);
}

static void is_copy(TorchFile *f, const Entry *e, const float *x, size_t n, const char *what) {
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(f32_at(f->data, e, k) == (x ? x[k] : 0.0f), "%s: element %zu differs", what, k);
}

static void is_const(TorchFile *f, const Entry *e, float v, size_t n, const char *what) {
    for (size_t k = 0; k < n; k++) ck_assert_msg(f32_at(f->data, e, k) == v, "%s: element %zu is not %g", what, k, v);
}

/* nn.MultiheadAttention "p": in_proj_weight rows Q, K, V transposed, out_proj = W^O^T, biases 0 */
static void check_mha(TorchFile *f, const char *p, const MhaParams *w, int d) {
    Entry in = tensor(f, 3 * d, d, "%s.in_proj_weight", p);
    is_transposed(f, &in, 0, w->w_q, d, d, "in_proj_weight rows 0..d-1 (W^Q^T)");
    is_transposed(f, &in, d, w->w_k, d, d, "in_proj_weight rows d..2d-1 (W^K^T)");
    is_transposed(f, &in, 2 * d, w->w_v, d, d, "in_proj_weight rows 2d..3d-1 (W^V^T)");
    Entry b = tensor(f, 3 * d, 0, "%s.in_proj_bias", p);
    is_const(f, &b, 0, 3 * (size_t)d, "in_proj_bias");
    Entry o = tensor(f, d, d, "%s.out_proj.weight", p);
    is_transposed(f, &o, 0, w->w_o, d, d, "out_proj.weight (W^O^T)");
    Entry ob = tensor(f, d, 0, "%s.out_proj.bias", p);
    is_const(f, &ob, 0, (size_t)d, "out_proj.bias");
}

static void check_ffn(TorchFile *f, const char *p, const float *w1, const float *b1, const float *w2,
                      const float *b2, int d, int d_ff) {
    Entry e = tensor(f, d_ff, d, "%s.linear1.weight", p);
    is_transposed(f, &e, 0, w1, d, d_ff, "linear1.weight (W1^T)");
    e = tensor(f, d_ff, 0, "%s.linear1.bias", p), is_copy(f, &e, b1, (size_t)d_ff, "linear1.bias");
    e = tensor(f, d, d_ff, "%s.linear2.weight", p);
    is_transposed(f, &e, 0, w2, d_ff, d, "linear2.weight (W2^T)");
    e = tensor(f, d, 0, "%s.linear2.bias", p), is_copy(f, &e, b2, (size_t)d, "linear2.bias");
}

/* nn.LayerNorm "p.name": weight g, bias b; g NULL: the centring norm (weight 2^20, bias 0) */
static void check_norm(TorchFile *f, const char *p, const char *name, const float *g, const float *b, int d) {
    Entry w = tensor(f, d, 0, "%s%s.weight", p, name), bb = tensor(f, d, 0, "%s%s.bias", p, name);
    if (g) is_copy(f, &w, g, (size_t)d, name);
    else is_const(f, &w, 1048576.0f, (size_t)d, name);
    is_copy(f, &bb, b, (size_t)d, name);
}

/* Writes m's torch export and checks every tensor against m's weights */
static void check_torch_export(Model *m) {
    const Config *c = &m->cfg;
    const Params *P = &m->params;
    int d = c->d_model, V = c->vocab, N = c->N, post = !c->pre_ln;
    /* distinct values everywhere (gains 1 and biases 0 at initialisation
     * would hide a norm or bias in the wrong place) */
    for (size_t i = 0; i < P->n; i++) P->mem[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    char err[256];
    ck_assert_int_eq(model_export_torch(m, path, err, sizeof err), 0);
    char *json;
    TorchFile f = {0};
    size_t data_len;
    unsigned char *buf = read_layout(path, &json, &f.data, &data_len);
    f.json = json;

    Entry e = tensor(&f, V, d, "embed.weight");
    is_copy(&f, &e, P->embed, (size_t)V * d, "embed.weight");
    e = tensor(&f, V, d, "generator.weight");
    is_copy(&f, &e, P->embed, (size_t)V * d, "generator.weight (tied to the embedding, Sec. 3.4)");
    if (c->pos == POS_LEARNED) {
        e = tensor(&f, c->max_len, d, "pos_embed.weight");
        is_copy(&f, &e, P->pos_embed, (size_t)c->max_len * d, "pos_embed.weight");
    }
    char p[64], q[80];
    for (int l = 0; l < N; l++) {
        const EncoderLayer *L = &P->enc[l];
        snprintf(p, sizeof p, "transformer.encoder.layers.%d", l);
        snprintf(q, sizeof q, "%s.self_attn", p), check_mha(&f, q, &L->self_attn, d);
        check_ffn(&f, p, L->ffn_w1, L->ffn_b1, L->ffn_w2, L->ffn_b2, d, c->d_ff);
        check_norm(&f, p, ".norm1", L->ln1_g, L->ln1_b, d);
        int moved = post && l == N - 1;
        check_norm(&f, p, ".norm2", moved ? NULL : L->ln2_g, moved ? NULL : L->ln2_b, d);
    }
    check_norm(&f, "transformer.encoder", ".norm", post ? P->enc[N - 1].ln2_g : P->enc_ln_g,
               post ? P->enc[N - 1].ln2_b : P->enc_ln_b, d);
    for (int l = 0; l < N; l++) {
        const DecoderLayer *L = &P->dec[l];
        snprintf(p, sizeof p, "transformer.decoder.layers.%d", l);
        snprintf(q, sizeof q, "%s.self_attn", p), check_mha(&f, q, &L->self_attn, d);
        snprintf(q, sizeof q, "%s.multihead_attn", p), check_mha(&f, q, &L->cross_attn, d);
        check_ffn(&f, p, L->ffn_w1, L->ffn_b1, L->ffn_w2, L->ffn_b2, d, c->d_ff);
        check_norm(&f, p, ".norm1", L->ln1_g, L->ln1_b, d);
        check_norm(&f, p, ".norm2", L->ln2_g, L->ln2_b, d);
        int moved = post && l == N - 1;
        check_norm(&f, p, ".norm3", moved ? NULL : L->ln3_g, moved ? NULL : L->ln3_b, d);
    }
    check_norm(&f, "transformer.decoder", ".norm", post ? P->dec[N - 1].ln3_g : P->dec_ln_g,
               post ? P->dec[N - 1].ln3_b : P->dec_ln_b, d);

    /* nothing else: strict=True refuses an unexpected key as much as a missing one */
    int entries = 0;
    for (const char *s = json; (s = strstr(s, "\"data_offsets\"")); s++) entries++;
    ck_assert_int_eq(entries, f.found);
    /* embed, generator, [pos_embed]; per encoder layer 4 attention + 4 FFN + 4
     * norm tensors; encoder.norm; per decoder layer 8 + 4 + 6; decoder.norm */
    ck_assert_int_eq(f.found, 2 + (c->pos == POS_LEARNED) + N * 12 + 2 + N * 18 + 2);
    char want[64];
    snprintf(want, sizeof want, "\"nhead\":\"%d\"", c->h);
    ck_assert_ptr_nonnull(strstr(json, want));
    ck_assert_ptr_nonnull(strstr(json, post ? "\"norm_first\":\"False\"" : "\"norm_first\":\"True\""));
    ck_assert_ptr_nonnull(strstr(json, post ? "\"last_norm_eps\":\"1099511627776\"" : "\"last_norm_eps\":\"1e-05\""));
    free(buf), free(json);
}

START_TEST(test_torch_post_ln) {
    Config c = test_config(2, 8, 12, 2, 4, 4, 11, 16, 0.1f);
    c.pos = POS_LEARNED;
    Model m;
    char err[256];
    ck_assert_int_eq(model_build(&m, &c, 1, 2, 2, 3, err, sizeof err), 0);
    check_torch_export(&m);
    model_free(&m);
}
END_TEST

START_TEST(test_torch_pre_ln) {
    Config c = test_config(1, 6, 10, 3, 2, 2, 9, 8, 0.1f);
    c.pre_ln = 1;
    Model m;
    char err[256];
    ck_assert_int_eq(model_build(&m, &c, 1, 2, 2, 3, err, sizeof err), 0);
    check_torch_export(&m);
    model_free(&m);
}
END_TEST

/* Table 3 row B: h d_k != d_model has no nn.MultiheadAttention twin */
START_TEST(test_torch_refusals) {
    Model m;
    char err[256];
    Config c = test_config_tiny(0.1f);   /* d_k 4, d_v 3: d_v != d_k */
    ck_assert_int_eq(model_build(&m, &c, 1, 2, 2, 3, err, sizeof err), 0);
    ck_assert_int_eq(torch_export_check(&c, err, sizeof err), 2);
    ck_assert_int_eq(model_export_torch(&m, path, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "d_k = d_v = d_model / h") && strstr(err, "d_v 3"), "message: %s", err);
    ck_assert_int_ne(access(path, F_OK), 0);   /* nothing written */
    model_free(&m);
    c = test_config(1, 8, 12, 2, 3, 3, 11, 16, 0.1f);   /* h d_k = 6 != 8 */
    ck_assert_int_eq(torch_export_check(&c, err, sizeof err), 2);
    c.d_k = c.d_v = 4;
    ck_assert_int_eq(torch_export_check(&c, err, sizeof err), 0);
    /* an unwritable folder: 1 */
    c = test_config(1, 8, 12, 2, 4, 4, 11, 16, 0.1f);
    ck_assert_int_eq(model_build(&m, &c, 1, 2, 2, 3, err, sizeof err), 0);
    char bad[160];
    snprintf(bad, sizeof bad, "%s/no/such/dir/t.safetensors", dir);
    ck_assert_int_eq(model_export_torch(&m, bad, err, sizeof err), 1);
    model_free(&m);
}
END_TEST

/* parity_dump --export-torch: writes the export of a checkpoint chapter 07
 * saved; refuses a model without a twin and an output that is the file it
 * loads (exit 2, before writing) */
START_TEST(test_torch_flag) {
    char bin[512], ch07[512];
    if (!chapter_binary(bin, sizeof bin, "check_safetensors", "parity_dump")) return;
    if (!chapter_binary(ch07, sizeof ch07, "check_safetensors", "07_transformer")) return;
    ck_assert_int_eq(sh("%s --no-color --out %s/o --save %s/m.ckpt >/dev/null && "
                        "%s --no-color --out %s/o --d-k 5 --save %s/k5.ckpt >/dev/null", ch07, dir, dir, ch07, dir, dir), 0);
    char *out = NULL, *er = NULL;
    int rc = sh_captured(&out, &er, "%s --load %s/m.ckpt --export-torch %s", bin, dir, path);
    ck_assert_msg(rc == 0, "--export-torch: exit %d: %s", rc, er);
    ck_assert_ptr_nonnull(strstr(out, "torch.nn.Transformer's layout"));
    free(out), free(er);
    char *json;
    const unsigned char *data;
    size_t data_len;
    free(read_layout(path, &json, &data, &data_len));
    ck_assert_ptr_nonnull(strstr(json, "\"transformer.decoder.layers.1.multihead_attn.in_proj_weight\""));
    free(json);

    rc = sh_captured(&out, &er, "%s --load %s/k5.ckpt --export-torch %s/x.st", bin, dir, dir);
    ck_assert_msg(rc == 2 && strstr(er, "--export-torch") && strstr(er, "d_k 5"), "exit %d: %s", rc, er);
    free(out), free(er);
    ck_assert_int_eq(sh("cp %s/m.ckpt %s/keep.ckpt", dir, dir), 0);
    rc = sh_captured(&out, &er, "%s --load %s/m.ckpt --export-torch %s/./m.ckpt", bin, dir, dir);
    ck_assert_msg(rc == 2 && strstr(er, "same file"), "exit %d: %s", rc, er);
    free(out), free(er);
    ck_assert_int_eq(sh("test ! -e %s/x.st && cmp -s %s/m.ckpt %s/keep.ckpt", dir, dir, dir), 0);
}
END_TEST

Suite *safetensors_suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *core = suite_case(s, "Core", test_rules_and_bytes, test_model_export);
    tcase_add_checked_fixture(core, setup, teardown);
    TCase *torch = suite_case(s, "Torch", test_torch_post_ln, test_torch_pre_ln, test_torch_refusals, test_torch_flag);
    tcase_add_checked_fixture(torch, setup, teardown);
    TCase *limits = suite_case(s, "Limits", test_refusals);
    tcase_add_checked_fixture(limits, setup, teardown);
    return s;
}
