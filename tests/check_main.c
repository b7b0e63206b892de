/* check_main.c - one runner for every suite.
 *
 * Each tests/check_<module>.c defines `Suite *<module>_suite(void)`, named
 * "<module>"; the Makefile lists them in build/suites.h, so adding a file
 * adds a suite.
 *
 *   make test                          everything
 *   CK_RUN_SUITE=ops make test         one suite (tests/check_ops.c)
 *   CK_RUN_CASE=Limits make test       one test case, in every suite that has it
 *   CK_FORK=no gdb build/check_all     debug in one process
 *
 * After Check's summary it prints one line: how many parts of tests were
 * skipped and why (test_skip in testutil.h). A suite or case that no suite
 * has is an error that lists the suites, never "100%: Checks: 0". Without
 * BUILD_DIR, the programs are looked for beside check_all itself.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"

#define SUITE(name) Suite *name##_suite(void);
#include "suites.h"
#undef SUITE

static const char *const SUITE_NAMES[] = {
#define SUITE(name) #name,
#include "suites.h"
#undef SUITE
};
#define NSUITES (sizeof SUITE_NAMES / sizeof SUITE_NAMES[0])

static void list_suites(void) {
    fprintf(stderr, "the suites:");
    for (size_t i = 0; i < NSUITES; i++) fprintf(stderr, " %s", SUITE_NAMES[i]);
    fprintf(stderr, "\n");
}

/* 1 when CK_RUN_SUITE / CK_RUN_CASE (if set) name a suite / a test case
 * that exists; otherwise says which does not, lists the suites, returns 0. */
static int selection_exists(Suite *const *suites) {
    const char *want_suite = getenv("CK_RUN_SUITE"), *want_case = getenv("CK_RUN_CASE");
    if (want_suite && !*want_suite) want_suite = NULL;
    if (want_case && !*want_case) want_case = NULL;
    int suite_found = !want_suite, case_found = !want_case;
    for (size_t i = 0; i < NSUITES; i++) {
        if (want_suite && strcmp(want_suite, SUITE_NAMES[i])) continue;
        suite_found = 1;
        if (want_case && suite_tcase(suites[i], want_case)) case_found = 1;
    }
    if (!suite_found) fprintf(stderr, "check_all: CK_RUN_SUITE=%s: no such suite; ", want_suite);
    else if (!case_found)
        fprintf(stderr, "check_all: CK_RUN_CASE=%s: no such test case in %s%s; ", want_case,
                want_suite ? "suite " : "any suite", want_suite ? want_suite : "");
    else return 1;
    list_suites();
    return 0;
}

/* $BUILD_DIR, when unset: the folder check_all lies in (argv[0]'s, else
 * /proc/self/exe's), so that `CK_FORK=no gdb build/check_all` finds the
 * programs as `make test` does. */
static void default_build_dir(const char *argv0) {
    const char *set = getenv("BUILD_DIR");
    if (set && *set) return;
    char self[4096] = "";
    if (strchr(argv0, '/')) snprintf(self, sizeof self, "%s", argv0);
    else {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
    }
    char *slash = strrchr(self, '/');
    if (!slash) return;   /* build_dir() then fails the tests that need it, saying why */
    *slash = '\0';
    setenv("BUILD_DIR", slash == self ? "/" : self, 1);
}

/* The skips the tests wrote into path, on one line: their count, then
 * each distinct "suite: why" once, in the order first met, with
 * how many times it was met. */
static void print_skips(const char *path) {
    /* plain stdio: testutil's readers assert, which only a running test may */
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        rewind(f);
        text = size >= 0 ? malloc((size_t)size + 1) : NULL;
        if (text) text[fread(text, 1, (size_t)size, f)] = '\0';
    }
    if (f) fclose(f);
    if (!text) {
        fprintf(stderr, "check_all: cannot read the skip file %s: %s\n", path, strerror(errno));
        return;
    }
    size_t n = 0;
    for (char *p = text; *p; p++) n += *p == '\n';
    if (n == 0) {
        printf("Skipped: none\n");
        free(text);
        return;
    }
    char **line = malloc(n * sizeof *line);
    if (!line) abort();
    n = 0;
    for (char *p = strtok(text, "\n"); p; p = strtok(NULL, "\n")) line[n++] = p;
    printf("Skipped: %zu (", n);
    for (size_t i = 0, shown = 0; i < n; i++) {
        if (!line[i]) continue;   /* counted with an earlier one */
        int count = 1;
        for (size_t j = i + 1; j < n; j++)
            if (line[j] && !strcmp(line[j], line[i])) count++, line[j] = NULL;
        printf("%s%s", shown++ ? "; " : "", line[i]);
        if (count > 1) printf(" x%d", count);
    }
    printf(")\n");
    free(line);
    free(text);
}

int main(int argc, char **argv) {
    (void)argc;
    default_build_dir(argv[0]);
    Suite *suites[] = {
#define SUITE(name) name##_suite(),
#include "suites.h"
#undef SUITE
    };
    if (!selection_exists(suites)) return EXIT_FAILURE;

    char skips[] = "/tmp/check_all_skips_XXXXXX";
    int fd = mkstemp(skips);
    if (fd < 0) {
        fprintf(stderr, "check_all: cannot make a skip file in /tmp: %s\n", strerror(errno));
        return EXIT_FAILURE;
    }
    close(fd);
    setenv(SKIP_FILE_ENV, skips, 1);

    SRunner *sr = srunner_create(NULL);
    for (size_t i = 0; i < NSUITES; i++) srunner_add_suite(sr, suites[i]);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr), ran = srunner_ntests_run(sr);
    srunner_free(sr);
    fflush(stdout);
    print_skips(skips);
    unlink(skips);
    if (ran == 0) fprintf(stderr, "check_all: no checks ran, which is not a pass\n");
    return failed == 0 && ran > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
