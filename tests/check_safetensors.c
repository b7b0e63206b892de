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
 * Limits  a duplicate or unusable name is refused (2) with nothing written;
 *         an unwritable folder gives 1 and leaves the old file as it was.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/grad_dump.h"
#include "io/safetensors.h"
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

Suite *safetensors_suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *core = suite_case(s, "Core", test_rules_and_bytes, test_model_export);
    tcase_add_checked_fixture(core, setup, teardown);
    TCase *limits = suite_case(s, "Limits", test_refusals);
    tcase_add_checked_fixture(limits, setup, teardown);
    return s;
}
