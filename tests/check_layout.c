/* check_layout.c - the library's layers, held to their rules.
 *
 * common/ is in folders that depend only downward (README.md, "Layout"):
 *
 *   core    tensor, rng, errors, files                 uses nothing above it
 *   ref     the plain ops a student reads first        core
 *   fast    gemm, SIMD, threads: the tuned twins       core, ref
 *   layers  multi-head attention, linear, FFN          core, ref, fast
 *   model   the model, backend table, training, decoding   ... layers
 *   text    corpus, BPE, batching, BLEU                core only
 *   io      checkpoints, files, CLI, terminal output   everything below but dist, task
 *   dist    MPI                                        everything below but task
 *   task    the translation experiment                 everything
 *
 * These tests read the sources (the runner starts in the repository root)
 * and fail with the file and line that breaks a rule: an #include that
 * points up a layer, a plain file that uses intrinsics, OpenMP, threads or
 * a CPU-feature #if, a file over 800 lines: of common/, and of every
 * chapter (the .c and .h files of chapters/NN_name), so a chapter whose
 * main.c grows a second library is split by idea into files of its own. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

/* each folder and the folders its files may include (itself included) */
static const struct { const char *dir, *may_use; } LAYERS[] = {
    {"core", "core"},
    {"ref", "core ref"},
    {"fast", "core ref fast"},
    {"layers", "core ref fast layers"},
    {"model", "core ref fast layers model"},
    {"text", "core text"},
    {"io", "core ref fast layers model text io"},
    {"dist", "core ref fast layers model text io dist"},
    {"task", "core ref fast layers model text io dist task"},
};
#define N_LAYERS (int)(sizeof LAYERS / sizeof LAYERS[0])
#define MAX_LINES 800

static int layer_of(const char *dir) {
    for (int i = 0; i < N_LAYERS; i++)
        if (!strcmp(LAYERS[i].dir, dir)) return i;
    return -1;
}

/* is word one of the space-separated words of list? */
static int listed(const char *list, const char *word, size_t n) {
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, " ");
        if (len == n && !strncmp(p, word, n)) return 1;
        p += len;
        while (*p == ' ') p++;
    }
    return 0;
}

static int is_source(const char *name) {
    size_t n = strlen(name);
    return n > 2 && name[n - 2] == '.' && (name[n - 1] == 'c' || name[n - 1] == 'h');
}

/* calls fn(path, folder index) for every .c and .h under common/<folder>/;
 * returns the number of files seen */
static int each_file(void (*fn)(const char *path, int layer, int *bad), int *bad) {
    int files = 0;
    DIR *top = opendir("common");
    ck_assert_msg(top != NULL, "common/ not found: run the tests from the repository root");
    struct dirent *d;
    while ((d = readdir(top))) {
        if (d->d_name[0] == '.') continue;
        int layer = layer_of(d->d_name);
        char dir[512];
        snprintf(dir, sizeof dir, "common/%s", d->d_name);
        DIR *sub = opendir(dir);
        if (!sub) {   /* a file straight in common/: every file belongs to a layer */
            fprintf(stderr, "check_layout: common/%s is not in a layer's folder\n", d->d_name);
            (*bad)++;
            continue;
        }
        if (layer < 0) {
            fprintf(stderr, "check_layout: common/%s/ is not a layer this test knows\n", d->d_name);
            (*bad)++;
        }
        struct dirent *e;
        while ((e = readdir(sub))) {
            if (!is_source(e->d_name) || layer < 0) continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            fn(path, layer, bad);
            files++;
        }
        closedir(sub);
    }
    closedir(top);
    return files;
}

/* #include "folder/x.h" in a file of layer: the folder must be one it may use */
static void check_includes(const char *path, int layer, int *bad) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char line[4096];
    for (int no = 1; fgets(line, sizeof line, f); no++) {
        const char *p = line + strspn(line, " \t");
        if (strncmp(p, "#include \"", 10)) continue;
        const char *inc = p + 10, *slash = strchr(inc, '/'), *quote = strchr(inc, '"');
        if (!slash || !quote || slash > quote) continue;   /* same folder, or not a library path */
        char folder[64];
        size_t n = (size_t)(slash - inc);
        if (n >= sizeof folder) continue;
        memcpy(folder, inc, n);
        folder[n] = 0;
        if (layer_of(folder) < 0) continue;   /* "03_attention/..." etc. are not library folders */
        if (!listed(LAYERS[layer].may_use, folder, n)) {
            fprintf(stderr, "check_layout: %s:%d includes %.*s, a layer above %s/ (may use: %s)\n",
                    path, no, (int)(quote - inc), inc, LAYERS[layer].dir, LAYERS[layer].may_use);
            (*bad)++;
        }
    }
    fclose(f);
}

/* the plain layer: no intrinsics, OpenMP, threads, thread pool or CPU-feature #if */
static void check_plain(const char *path, int layer, int *bad) {
    if (strcmp(LAYERS[layer].dir, "ref")) return;
    static const char *const FORBIDDEN[] = {
        "immintrin.h", "#pragma omp", "pthread", "parallel_", "__AVX", "__SSE", "__FMA__",
        "__ARM_NEON", "_mm256_", "_mm512_", "__builtin_prefetch",
    };
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char line[4096];
    for (int no = 1; fgets(line, sizeof line, f); no++)
        for (size_t k = 0; k < sizeof FORBIDDEN / sizeof FORBIDDEN[0]; k++)
            if (strstr(line, FORBIDDEN[k])) {
                fprintf(stderr, "check_layout: %s:%d has %s: the plain layer is loops only\n", path,
                        no, FORBIDDEN[k]);
                (*bad)++;
            }
    fclose(f);
}

static void check_length(const char *path, int layer, int *bad) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    int lines = 0, c;
    while ((c = fgetc(f)) != EOF) lines += c == '\n';
    fclose(f);
    if (lines > MAX_LINES) {
        fprintf(stderr, "check_layout: %s has %d lines (at most %d: split it by idea)\n", path,
                lines, MAX_LINES);
        (*bad)++;
    }
}

/* calls fn(path, -1) for every .c and .h of every chapter's folder
 * (chapters/NN_name/); returns the number of files seen */
static int each_chapter_file(void (*fn)(const char *path, int layer, int *bad), int *bad) {
    int files = 0;
    DIR *top = opendir("chapters");
    ck_assert_msg(top != NULL, "chapters/ not found: run the tests from the repository root");
    struct dirent *d;
    while ((d = readdir(top))) {
        if (d->d_name[0] == '.') continue;
        char dir[512];
        snprintf(dir, sizeof dir, "chapters/%s", d->d_name);
        DIR *sub = opendir(dir);
        if (!sub) continue;   /* a file beside the chapters' folders */
        struct dirent *e;
        while ((e = readdir(sub))) {
            if (!is_source(e->d_name)) continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            fn(path, -1, bad);
            files++;
        }
        closedir(sub);
    }
    closedir(top);
    return files;
}

START_TEST(test_includes_point_down) {
    int bad = 0, files = each_file(check_includes, &bad);
    ck_assert_msg(files > 20, "only %d library files found under common/", files);
    ck_assert_msg(bad == 0, "%d #include(s) point up a layer (listed above)", bad);
}
END_TEST

START_TEST(test_ref_is_plain) {
    int bad = 0;
    each_file(check_plain, &bad);
    ck_assert_msg(bad == 0, "%d line(s) of common/ref/ are not plain C (listed above)", bad);
}
END_TEST

START_TEST(test_files_fit) {
    int bad = 0;
    each_file(check_length, &bad);
    ck_assert_msg(bad == 0, "%d file(s) of common/ over %d lines (listed above)", bad, MAX_LINES);
}
END_TEST

START_TEST(test_chapters_fit) {
    int bad = 0, files = each_chapter_file(check_length, &bad);
    ck_assert_msg(files >= 13, "only %d chapter files found under chapters/", files);
    ck_assert_msg(bad == 0, "%d chapter file(s) over %d lines (listed above): split the chapter into files of "
                  "its folder by idea", bad, MAX_LINES);
}
END_TEST

/* the length rule itself: a file of MAX_LINES lines fits, one more does not */
START_TEST(test_length_rule) {
    char path[] = "/tmp/check_layout_rule_801_lines_XXXXXX";   /* its 801-line message is expected */
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp failed");
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < MAX_LINES; i++) fputs("x\n", f);
    fflush(f);
    int bad = 0;
    check_length(path, -1, &bad);
    ck_assert_int_eq(bad, 0);
    fputs("x\n", f);
    fclose(f);
    check_length(path, -1, &bad);
    ck_assert_int_eq(bad, 1);
    remove(path);
}
END_TEST

/* the rule checker itself: the word list and the layer table */
START_TEST(test_rules) {
    ck_assert(listed("core ref fast", "ref", 3));
    ck_assert(!listed("core ref fast", "re", 2));
    ck_assert(!listed("core text", "model", 5));
    ck_assert_int_eq(layer_of("core"), 0);
    ck_assert_int_eq(layer_of("03_attention"), -1);
    for (int i = 0; i < N_LAYERS; i++)   /* every layer may use itself and core */
        ck_assert(listed(LAYERS[i].may_use, LAYERS[i].dir, strlen(LAYERS[i].dir)) &&
                  listed(LAYERS[i].may_use, "core", 4));
}
END_TEST

Suite *layout_suite(void) {
    Suite *s = suite_create("layout");
    suite_case(s, "Rules", test_rules, test_length_rule, test_includes_point_down, test_ref_is_plain, test_files_fit,
               test_chapters_fit);
    return s;
}
