/* check_build.c - the Makefile notices when the build's settings change.
 *
 * Each group of settings (compiler and flags; MPI; CUDA; the bench's
 * OpenBLAS) is recorded in a file in the build folder (config_c.txt,
 * config_mpi.txt, ...) that changes only when the settings do, and the
 * objects depend on it. So, in a folder of its own:
 *
 *   make PORTABLE=1 rng.o    compiles rng.c
 *   make PORTABLE=1 rng.o    again: nothing to do (no rebuild for nothing)
 *   make rng.o               PORTABLE switched off: compiles it again
 *   make SANITIZE=1 rng.o    the sanitizers switched on: again
 *   make MPI=0 dist.o, then make dist.o (with mpicc here): mpicc compiles it
 *   build/bench without OpenBLAS: compiled without its columns, not a
 *     compile error (item 11)
 *   two makes at once in one folder: neither takes the other's new stamp
 *
 * Before the settings were recorded, the third and later lines said
 * "up to date" and a build kept its old flags (issue 34, item 10).
 * Runs make from the project root; a counted skip without make. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

/* What the calling make (make test, make SANITIZE=1 test) passes down,
 * kept out: its jobserver and flags, and the switches this test sets itself
 * (a command line's SANITIZE=1 reaches us in the environment). */
#define UNSET                                                                        \
    "-u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u SANITIZE -u PORTABLE -u BLAS -u MPI -u NO_OMP " \
    "-u HAVE_OPENBLAS -u CUDA -u V -u GPU_SEEN"

/* make's output (stdout + stderr) for "make BUILD=dir ARGS target". */
static char *make_in(const char *dir, const char *args, const char *target) {
    char *out = NULL;
    int rc = sh_captured(&out, NULL,
                         "env " UNSET " make V=1 BUILD=%s CUDA=0 %s %s/%s 2>&1", dir, args, dir,
                         target);
    ck_assert_msg(rc == 0, "make BUILD=%s CUDA=0 %s %s/%s: exit %d\n%s", dir, args, dir, target, rc, out);
    return out;
}

static int have_make(void) {
    if (sh("command -v make >/dev/null 2>&1") == 0 && access("Makefile", R_OK) == 0) return 1;
    test_skip_missing("check_build", "make", "no make, or not run from the project root");
    return 0;
}

/* Did make compile this source file (its name on a compiler line)? */
static int compiled(const char *out, const char *src) { return strstr(out, src) != NULL; }

START_TEST(test_flags_switch_rebuilds) {
    if (!have_make()) return;
    char dir[256];
    fresh_dir(dir, sizeof dir, "check_build");
    const char *rng = "obj/common/core/rng.o", *src = "common/core/rng.c";
    struct {
        const char *args, *why;
        int rebuilds;
    } steps[] = {
        {"PORTABLE=1 MPI=0", "the first build", 1},
        {"PORTABLE=1 MPI=0", "the same settings again", 0},
        {"MPI=0", "PORTABLE=1 switched off", 1},
        {"MPI=0", "the same settings again", 0},
        {"MPI=0 SANITIZE=1", "SANITIZE=1 switched on", 1},
        {"MPI=0 BLAS=openblas", "BLAS=openblas", 1},
        {"MPI=0", "back to the defaults", 1},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        char *out = make_in(dir, steps[i].args, rng);
        ck_assert_msg(compiled(out, src) == steps[i].rebuilds, "make %s (%s): %s, want %s\n%s", steps[i].args,
                      steps[i].why, compiled(out, src) ? "compiled rng.c" : "did not compile rng.c",
                      steps[i].rebuilds ? "a rebuild" : "nothing to do", out);
        free(out);
    }
    remove_dir(dir);
}
END_TEST

/* Open MPI installed after a build with MPI off: a plain make compiles
 * dist.c again, with mpicc and -DAIYN_MPI, and links chapter 13 with MPI. */
START_TEST(test_mpi_appearing_rebuilds) {
    if (!have_make()) return;
    if (sh("command -v mpicc >/dev/null 2>&1") != 0) {
        test_skip_missing("check_build", "mpicc", "the MPI switch: no mpicc (Open MPI)");
        return;
    }
    char dir[256];
    fresh_dir(dir, sizeof dir, "check_build");
    const char *dist = "obj/common/dist/dist.o";
    char *out = make_in(dir, "MPI=0", dist);
    ck_assert_msg(compiled(out, "dist.c") && !strstr(out, "AIYN_MPI"), "make MPI=0: \n%s", out);
    free(out);
    out = make_in(dir, "", dist);
    ck_assert_msg(strstr(out, "-DAIYN_MPI") != NULL, "after make MPI=0, a plain make (mpicc found) did not compile "
                  "dist.c with MPI:\n%s", out);
    ck_assert_msg(strstr(out, "mpi settings changed") != NULL, "make did not say why it rebuilt:\n%s", out);
    free(out);
    out = make_in(dir, "", dist);
    ck_assert_msg(!compiled(out, "dist.c"), "a second plain make compiled dist.c again:\n%s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

/* On a machine with Debian's reference BLAS (cblas.h) but no OpenBLAS,
 * build/bench did not compile: the Makefile always asked for the OpenBLAS
 * columns (implicit declaration of openblas_set_num_threads). Now the
 * columns follow what pkg-config finds (HAVE_OPENBLAS= pretends it found
 * nothing), and bench.c compiles either way. */
START_TEST(test_bench_without_openblas) {
    if (!have_make()) return;
    char dir[256], *out = NULL;
    fresh_dir(dir, sizeof dir, "check_build");
    ck_assert_int_eq(sh_captured(&out, NULL, "env " UNSET " make -n V=1 BUILD=%s CUDA=0 MPI=0 "
                                 "HAVE_OPENBLAS= %s/bench 2>&1", dir, dir), 0);
    const char *line = strstr(out, "bench/bench.c");
    ck_assert_msg(line != NULL, "make -n did not show how build/bench is built:\n%s", out);
    while (line > out && line[-1] != '\n') line--;   /* the whole compiler line */
    const char *end = strchr(line, '\n'), *flag = strstr(line, "USE_OPENBLAS_REF");
    ck_assert_msg(!flag || (end && flag > end), "without OpenBLAS the bench is still built for it:\n%.*s",
                  (int)(end ? end - line : 200), line);
    free(out);
    /* and the source compiles without it (the same warnings-as-errors) */
    ck_assert_int_eq(sh_captured(&out, NULL, "${CC:-cc} -std=c11 -D_DEFAULT_SOURCE -Werror=implicit-function-declaration "
                                 "-fsyntax-only -Icommon -Icuda bench/bench.c 2>&1"), 0);
    free(out);
    remove_dir(dir);
}
END_TEST

/* Issue 36: with nvcc on the PATH but no GPU, `make` compiled the kernels
 * for five GPU generations (63 of its 80 s) before a student saw anything.
 * Now CUDA builds when a GPU is seen (GPU_SEEN= pretends none is) or when
 * asked (make cuda), make's first line says what it found, and compiler
 * lines show only with V=1. */
START_TEST(test_first_line_and_no_cuda_without_gpu) {
    if (!have_make()) return;
    char dir[256], *out = NULL;
    fresh_dir(dir, sizeof dir, "check_build");
    ck_assert_int_eq(sh_captured(&out, NULL, "env " UNSET " make -n GPU_SEEN= BUILD=%s 2>&1", dir), 0);
    ck_assert_msg(!strncmp(out, "make: ", 6), "make's first line is not what it found:\n%.300s", out);
    const char *nl = strchr(out, '\n');
    ck_assert_ptr_nonnull(nl);
    const char *parts[] = {"OpenMP", "CUDA", "MPI", "OpenBLAS"};
    for (int i = 0; i < 4; i++) {
        const char *p = strstr(out, parts[i]);
        ck_assert_msg(p && p < nl && (!strncmp(p - 4, "\u2713 ", 4) || !strncmp(p - 4, "\u2717 ", 4)),
                      "the first line lacks a \u2713/\u2717 for %s:\n%.*s", parts[i], (int)(nl - out), out);
    }
    ck_assert_msg(!strstr(out, ".cu ") && !strstr(out, ".cu\n"), "make without a GPU compiles .cu files:\n%.2000s",
                  strstr(out, ".cu") - 200 > out ? strstr(out, ".cu") - 200 : out);
    free(out);
    /* one file built: a short line, the compiler's only with V=1 */
    ck_assert_int_eq(sh_captured(&out, NULL, "env " UNSET " make BUILD=%s %s/obj/common/core/rng.o 2>&1", dir, dir), 0);
    ck_assert_msg(strstr(out, "common/core/rng.c") && !strstr(out, " -Wall "), "without V=1:\n%s", out);
    free(out);
    ck_assert_int_eq(sh_captured(&out, NULL, "env " UNSET " make V=1 PORTABLE=1 BUILD=%s %s/obj/common/core/rng.o 2>&1",
                                 dir, dir), 0);
    ck_assert_msg(strstr(out, " -Wall ") != NULL, "make V=1 does not show the compiler lines:\n%s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

/* Two makes in one build folder at once (CI runs make test beside make run):
 * each checks the recorded settings, and each must write its new text under
 * a name of its own. With one shared "config_c.txt.new", one make's rename
 * or removal took the other's file ("mv: cannot stat ...") in about 1 of 7
 * makes here; 20 rounds of two must all pass and leave no temporary. */
START_TEST(test_two_makes_at_once) {
    if (!have_make()) return;
    char dir[256], *out = NULL;
    fresh_dir(dir, sizeof dir, "check_build");
    int rc = sh_captured(&out, NULL,
                         "fails=0; for i in $(seq 20); do "
                         "env " UNSET " make -s MPI=0 BUILD=%s %s/config_c.txt %s/config_mpi.txt 2>&1 & "
                         "env " UNSET " make -s MPI=0 BUILD=%s %s/config_c.txt %s/config_mpi.txt 2>&1 || fails=$((fails+1)); "
                         "wait $! || fails=$((fails+1)); done; "
                         "ls %s | grep -c '[.]new' ; exit $fails",
                         dir, dir, dir, dir, dir, dir, dir);
    ck_assert_msg(rc == 0, "%d of 40 makes failed beside another:\n%.2000s", rc, out);
    ck_assert_msg(strstr(out, "0\n") != NULL && !strstr(out, "cannot stat"), "temporaries left or a make failed:\n%.2000s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

/* --threads sat under #ifdef _OPENMP in chapters 09, 10 and 12, so that
 * without OpenMP it did nothing, though the pool is POSIX threads. Chapter
 * 10 reports the pool's own count: with --threads 2 it must say 2, in this
 * build and in CI's `make NO_OMP=1 test`, whose build has no OpenMP. */
START_TEST(test_threads_flag_sets_the_pool) {
    char bin[1024], dir[256], *out = NULL;
    chapter_binary(bin, sizeof bin, "check_build", "10_why_self_attention");
    fresh_dir(dir, sizeof dir, "check_build");
    int rc = sh_captured(&out, NULL, "%s --quick --threads 2 --section 3 --no-color --out %s 2>&1", bin, dir);
    ck_assert_msg(rc == 0, "10_why_self_attention --quick --threads 2: exit %d\n%s", rc, out);
#ifdef _OPENMP
    const char *build = "with OpenMP";
#else
    const char *build = "without OpenMP";
#endif
    ck_assert_msg(strstr(out, ", 2 thread(s).") != NULL, "--threads 2 (a build %s) did not give the pool 2 threads:\n%s",
                  build, out);
    free(out);
    remove_dir(dir);
}
END_TEST

Suite *build_suite(void) {
    Suite *s = suite_create("build");
    TCase *tc = suite_case(s, "Settings", test_flags_switch_rebuilds, test_mpi_appearing_rebuilds,
                           test_bench_without_openblas, test_first_line_and_no_cuda_without_gpu,
                           test_two_makes_at_once, test_threads_flag_sets_the_pool);
    tcase_set_timeout(tc, 300);
    return s;
}
