/* check_io.c - common/core/fileio.h, and the chapter programs against hostile
 * files and failing disks (issue 14's reproducers, one test each).
 *
 * Core      fio_escape, fio_open_read and the atomic FioWriter on their own.
 * Programs  each built program in $BUILD_DIR (a missing one fails):
 *             - a FIFO given to --load / --resume / --input: exit 2 at once
 *             - stdout on /dev/full: exit 1 with a message (was 0)
 *             - --out on a full disk (RLIMIT_FSIZE) and on a read-only
 *               folder (a read-only tmpfs; a counted skip if it cannot be mounted):
 *               exit 1, every earlier file left as it was, no partial file
 *               and no temporary left behind
 *             - --dump on a full disk: exit 1, no file
 *             - OMP_NUM_THREADS=100000: capped and said, exit 0 (was SIGSEGV)
 *             - chapter 03 with inputs near 1e20: exit 2 naming the rows,
 *               never "a bug"; tokens with escape sequences printed escaped
 *             - chapter 08 diverging with --factor 1e9: the checkpoint it
 *               leaves loads, and holds only finite numbers
 *             - an output named like an input or another output (./, a
 *               symlink, a hard link): exit 2 before anything is written
 *
 * A full disk is simulated with RLIMIT_FSIZE: every write past the limit
 * fails with EFBIG as a full disk fails with ENOSPC. The kernel sends
 * SIGXFSZ first, so the child ignores it (an ignored signal stays ignored
 * across exec).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "core/fileio.h"
#include "io/checkpoint.h"
#include "model/model.h"
#include "testutil.h"

/* ============================================================================
 * Core
 * ========================================================================== */

START_TEST(test_escape) {
    char b[64];
    ck_assert_str_eq(fio_escape(b, sizeof b, "plain text", (size_t)-1), "plain text");
    ck_assert_str_eq(fio_escape(b, sizeof b, "\x1b[31mred", (size_t)-1), "\\x1b[31mred");
    ck_assert_str_eq(fio_escape(b, sizeof b, "a\\b", (size_t)-1), "a\\\\b");        /* unambiguous */
    ck_assert_str_eq(fio_escape(b, sizeof b, "caf\xc3\xa9", (size_t)-1), "caf\xc3\xa9");  /* UTF-8 kept */
    ck_assert_str_eq(fio_escape(b, sizeof b, "\xc2\x9b" "2J", (size_t)-1), "\\xc2\\x9b2J");  /* C1 CSI */
    ck_assert_str_eq(fio_escape(b, sizeof b, "\xc0\xaf", (size_t)-1), "\\xc0\\xaf");    /* overlong '/' */
    ck_assert_str_eq(fio_escape(b, sizeof b, "\xed\xa0\x80", (size_t)-1), "\\xed\\xa0\\x80"); /* surrogate */
    ck_assert_str_eq(fio_escape(b, sizeof b, "t\tn\n\x7f", (size_t)-1), "t\\x09n\\x0a\\x7f");
    ck_assert_str_eq(fio_escape(b, sizeof b, "ab\0cd", 5), "ab\\x00cd");              /* length, not NUL */
    /* too long: cut with "...", always terminated, never past cap */
    char small[10];
    fio_escape(small, sizeof small, "\x1b\x1b\x1b\x1b\x1b", (size_t)-1);
    ck_assert_msg(strlen(small) < sizeof small && strstr(small, "..."), "got '%s'", small);
}
END_TEST

START_TEST(test_open_read_refuses_non_files) {
    char dir[64], fifo[128], err[256];
    fresh_dir(dir, sizeof dir, "check_io");
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(5);   /* a blocking open would hang here */
    ck_assert_ptr_null(fio_open_read(fifo, NULL, err, sizeof err));
    alarm(0);
    ck_assert_msg(strstr(err, "it is a FIFO"), "%s", err);
    ck_assert_ptr_null(fio_open_read(dir, NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "it is a folder"), "%s", err);
    ck_assert_ptr_null(fio_open_read("/dev/zero", NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "character device"), "%s", err);
    ck_assert_ptr_null(fio_open_read("/no/such/file", NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "cannot open '/no/such/file'"), "%s", err);
    long long size = -1;
    FILE *f = fio_open_read("chapters/03_attention/example.qkv", &size, err, sizeof err);
    ck_assert_msg(f != NULL, "%s", err);
    ck_assert_int_gt(size, 0);
    fclose(f);
    remove_dir(dir);
}
END_TEST

START_TEST(test_writer_commit_abort_fail) {
    char dir[64], path[128], err[512];
    fresh_dir(dir, sizeof dir, "check_io");
    snprintf(path, sizeof path, "%s/out.txt", dir);
    FioWriter w;
    ck_assert_int_eq(fio_create(&w, path, err, sizeof err), 0);
    ck_assert_msg(access(path, F_OK) != 0, "the file is visible before it is complete");
    fputs("first\n", w.f);
    ck_assert_msg(fio_commit(&w, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(sh("test \"$(cat %s)\" = first", path), 0);
    /* give up half way: the old file stays */
    ck_assert_int_eq(fio_create(&w, path, err, sizeof err), 0);
    fputs("second, never finished\n", w.f);
    fio_abort(&w);
    ck_assert_int_eq(sh("test \"$(cat %s)\" = first", path), 0);
    /* a full disk at the flush: 1 with the reason, the old file stays */
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        limit_file_size(100);
        FioWriter w2;
        char e2[512];
        if (fio_create(&w2, path, e2, sizeof e2)) _exit(3);
        for (int i = 0; i < 100; i++) fputs("0123456789", w2.f);
        int rc = fio_commit(&w2, e2, sizeof e2);
        _exit(rc == 1 && strstr(e2, "File too large") ? 0 : 4);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "full-disk commit: child status %d", st);
    ck_assert_int_eq(sh("test \"$(cat %s)\" = first", path), 0);
    /* nothing but out.txt in the folder: no temporary left */
    ck_assert_int_eq(sh("test \"$(ls -A %s)\" = out.txt", dir), 0);
    /* no such folder */
    ck_assert_int_eq(fio_create(&w, "/tmp/no/such/folder/x", err, sizeof err), 1);
    ck_assert_msg(strstr(err, "cannot create '/tmp/no/such/folder/x'"), "%s", err);
    remove_dir(dir);
}
END_TEST

/* ============================================================================
 * Programs
 * ========================================================================== */

typedef struct {
    const char *stdout_to;   /* NULL: a file the test reads back; else this path */
    long fsize;              /* > 0: RLIMIT_FSIZE in bytes                       */
    const char *env;         /* "NAME=value" or NULL                             */
} RunOpts;

static char *g_out, *g_err;   /* the last run's stdout and stderr (run() frees the ones before) */

typedef struct {
    const RunOpts *o;
    char **argv;
} Child;

/* In the child, its stdout and stderr already captured: o's stdout, file
 * size limit and environment, then the program. */
static void exec_under(void *arg) {
    const Child *c = arg;
    const RunOpts *o = c->o;
    if (o && o->stdout_to) dup2(open(o->stdout_to, O_WRONLY), STDOUT_FILENO);
    if (o && o->env) putenv((char *)o->env);
    setenv("NO_COLOR", "1", 1);
    if (o && o->fsize > 0) limit_file_size(o->fsize);
    alarm(60);   /* survives exec: a hang ends as SIGALRM */
    execv(c->argv[0], c->argv);
    _exit(127);
}

/* Runs build/<prog> with args (NULL-terminated) under o; its stdout and
 * stderr land in g_out and g_err (stderr through a pipe: a pipe is not
 * subject to RLIMIT_FSIZE, so the messages of a "full disk" arrive).
 * Returns the exit status, 128 + signal if killed (a crash, or the 60 s
 * alarm of a hang). */
static int run(const RunOpts *o, const char *prog, ...) {
    char bin[512];
    chapter_binary(bin, sizeof bin, "check_io", prog);
    char *argv[32] = {bin};
    int argc = 1;
    va_list ap;
    va_start(ap, prog);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 31;) argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    free(g_out), free(g_err);
    Child c = {o, argv};
    return run_captured(&g_out, &g_err, exec_under, &c);
}

static char g_dir[64];
static void setup(void) { fresh_dir(g_dir, sizeof g_dir, "check_io"); }
static void teardown(void) {
    sh("umount %s/ro 2>/dev/null; rm -rf %s", g_dir, g_dir);
}

/* Issue 14, item 3: FIFOs hang forever. */
START_TEST(test_fifo_given_to_programs) {
    char fifo[128], out[128];
    snprintf(fifo, sizeof fifo, "%s/f", g_dir);
    snprintf(out, sizeof out, "%s/out", g_dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *cases[][2] = {{"07_transformer", "--load"}, {"08_training", "--resume"}, {"03_attention", "--input"}};
    for (int i = 0; i < 3; i++) {
        int rc = run(NULL, cases[i][0], cases[i][1], fifo, "--out", out, NULL);
        ck_assert_msg(rc == 2, "%s %s FIFO: exit %d, want 2; stderr: %s", cases[i][0], cases[i][1], rc, g_err);
        ck_assert_msg(strstr(g_err, "not a regular file (it is a FIFO)"), "%s: stderr: %s", cases[i][0], g_err);
    }
}
END_TEST

/* Item 4: output to a full stdout exits 0. */
START_TEST(test_stdout_full) {
    /* the test needs the character device that fails every write with
     * ENOSPC; a minimal container may lack it, or have a plain file there */
    struct stat st;
    if (stat("/dev/full", &st) != 0 || access("/dev/full", W_OK) != 0) {
        test_skip("check_io", "test_stdout_full: no writable /dev/full");
        return;
    }
    if (!S_ISCHR(st.st_mode)) {
        test_skip("check_io", "test_stdout_full: /dev/full is not a character device here (a minimal container?)");
        return;
    }
    char out[128];
    snprintf(out, sizeof out, "%s/out", g_dir);
    RunOpts o = {.stdout_to = "/dev/full"};
    int rc = run(&o, "01_dot_product", "--out", out, NULL);
    ck_assert_msg(rc == 1, "01 >/dev/full: exit %d, want 1; stderr: %s", rc, g_err);
    ck_assert_msg(strstr(g_err, "writing the output failed: No space left on device"), "stderr: %s", g_err);
    rc = run(&o, "03_attention", "--help", NULL);
    ck_assert_msg(rc == 1, "03 --help >/dev/full: exit %d, want 1", rc);
}
END_TEST

/* Every file in dir (no sub-folders) has the same bytes as in ref, and dir
 * holds no file that ref lacks (a temporary, a partial file). */
static void same_folder(const char *dir, const char *ref, const char *what) {
    int rc = sh("cd %s && for f in $(ls -A); do cmp -s \"$f\" \"%s/$f\" || { echo \"  %s: $f differs "
                "or is new\" >&2; exit 1; }; done", dir, ref, what);
    ck_assert_msg(rc == 0, "%s: %s has a file that is not the earlier one (see above)", what, dir);
}

/* Item 4: on a full disk --out exited 0 and left truncated .dat files.
 * Each program runs once normally, then again with 400 bytes of disk: it
 * must exit 1, and the folder must hold exactly the earlier files. */
START_TEST(test_out_full_disk) {
    const char *progs[] = {"01_dot_product", "03_attention", "06_masking", "07_transformer"};
    for (int i = 0; i < 4; i++) {
        char out[128], ref[128];
        snprintf(out, sizeof out, "%s/%s", g_dir, progs[i]);
        snprintf(ref, sizeof ref, "%s/%s.ref", g_dir, progs[i]);
        int rc = run(NULL, progs[i], "--out", out, NULL);
        ck_assert_msg(rc == 0, "%s: exit %d on a normal run; stderr: %s", progs[i], rc, g_err);
        ck_assert_int_eq(sh("cp -a %s %s", out, ref), 0);
        RunOpts o = {.fsize = 400, .stdout_to = "/dev/null"};
        rc = run(&o, progs[i], "--out", out, NULL);
        ck_assert_msg(rc == 1, "%s on a full disk: exit %d, want 1; stderr: %s", progs[i], rc, g_err);
        ck_assert_msg(strstr(g_err, "File too large") && strstr(g_err, "could not be written"),
                      "%s: stderr: %s", progs[i], g_err);
        same_folder(out, ref, progs[i]);
    }
}
END_TEST

/* Item 4: --out at a read-only folder exited 0 in chapters 01-07. As root
 * permissions do not stop a write, so the folder is a read-only tmpfs. */
START_TEST(test_out_read_only) {
    char ro[128];
    snprintf(ro, sizeof ro, "%s/ro", g_dir);
    ck_assert_int_eq(mkdir(ro, 0755), 0);
    if (mount("tmpfs", ro, "tmpfs", MS_RDONLY, "size=64k") != 0) {
        if (geteuid() == 0) {
            test_skip("check_io", "read-only --out: cannot mount a read-only tmpfs (%s)", strerror(errno));
            return;
        }
        chmod(ro, 0555);   /* not root: permissions are enough */
    }
    const char *progs[] = {"01_dot_product", "02_softmax", "03_attention", "04_multihead",
                           "05_positional_encoding", "06_masking", "07_transformer"};
    /* results first, assertions after the unmount: a failing assertion
     * ends the test, and the mount must not outlive it */
    int rc[7], said[7];
    for (int i = 0; i < 7; i++) {
        rc[i] = run(NULL, progs[i], "--out", ro, NULL);
        said[i] = strstr(g_err, "could not be written") != NULL;
    }
    umount(ro);
    for (int i = 0; i < 7; i++) {
        ck_assert_msg(rc[i] == 1, "%s --out read-only: exit %d, want 1", progs[i], rc[i]);
        ck_assert_msg(said[i], "%s: no 'could not be written' on stderr", progs[i]);
    }
}
END_TEST

/* Item 4: --dump on a full disk exited 2 and left a 0-byte file. */
START_TEST(test_dump_full_disk) {
    char dump[128], out[128], ck[128];
    snprintf(dump, sizeof dump, "%s/logits.txt", g_dir);
    snprintf(out, sizeof out, "%s/out", g_dir);
    snprintf(ck, sizeof ck, "%s/out/v2000.ckpt", g_dir);
    int rc = run(NULL, "07_transformer", "--vocab", "2000", "--save", ck, "--out", out, NULL);
    ck_assert_msg(rc == 0, "07 --vocab 2000 --save: exit %d; stderr: %s", rc, g_err);
    RunOpts o = {.fsize = 100000, .stdout_to = "/dev/null"};   /* the checkpoint is read, the dump does not fit */
    rc = run(&o, "parity_dump", "--load", ck, "--src", "3 4 5 6 3 7 2", "--tgt", "1 8 9 10", "--dump", dump,
             "--dump-attn", NULL);
    ck_assert_msg(rc == 1, "--dump on a full disk: exit %d, want 1; stderr: %s", rc, g_err);
    ck_assert_msg(strstr(g_err, "--dump: writing") && strstr(g_err, "File too large"), "stderr: %s", g_err);
    ck_assert_msg(access(dump, F_OK) != 0, "a partial dump was left at %s", dump);
    ck_assert_int_eq(sh("test -z \"$(ls -A %s | grep '^\\.')\"", g_dir), 0);   /* no temporary */
}
END_TEST

/* Item 10: OMP_NUM_THREADS=100000 crashed inside libgomp. The pool reads
 * OMP_NUM_THREADS with OpenMP or without, so every build caps it. */
START_TEST(test_thread_count_capped) {
    char out[128];
    snprintf(out, sizeof out, "%s/out", g_dir);
    RunOpts o = {.env = "OMP_NUM_THREADS=100000"};
    int rc = run(&o, "08_training", "--steps", "2", "--batch", "16", "--eval", "0", "--examples", "0",
                 "--out", out, NULL);
    ck_assert_msg(rc == 0, "OMP_NUM_THREADS=100000: exit %d, want 0; stderr: %s", rc, g_err);
    ck_assert_msg(strstr(g_err, "OMP_NUM_THREADS asks for 100000 threads"), "not said: %s", g_err);
}
END_TEST

/* Item 8: inputs near 1e20 made chapter 03 exit 1 with nothing on stderr,
 * printing "THEY DISAGREE: a bug". Item 7: its tokens reached the terminal
 * raw. */
START_TEST(test_attention_hostile_input) {
    char in[128], out[128];
    snprintf(in, sizeof in, "%s/big.qkv", g_dir);
    snprintf(out, sizeof out, "%s/out", g_dir);
    write_text(in, "tokens: a b\nQ\n1e20 1e20\n1 1\nK\n1e20 1e20\n1 0\nV\n1\n2\n");
    int rc = run(NULL, "03_attention", "--input", in, "--out", out, NULL);
    ck_assert_msg(rc == 2, "1e20 inputs: exit %d, want 2; stderr: %s", rc, g_err);
    ck_assert_msg(strstr(g_err, "big.qkv:3:") && strstr(g_err, "overflow"), "stderr: %s", g_err);
    ck_assert_msg(!strstr(g_out, "a bug"), "blames a bug for bad input");

    write_text(in, "tokens: \x1b]0;owned\x07 \x1b[2J\nQ\n1 0\n0 1\nK\n1 0\n0 1\nV\n1\n2\n");
    rc = run(NULL, "03_attention", "--input", in, "--out", out, "--no-color", NULL);
    ck_assert_msg(rc == 0, "escape-sequence tokens: exit %d; stderr: %s", rc, g_err);
    for (const char *p = g_out; *p; p++)
        ck_assert_msg(*p != 0x1b && *p != 0x07, "a raw escape byte reached stdout");
    ck_assert_msg(strstr(g_out, "\\x1b"), "the token is not shown escaped");
}
END_TEST

/* Item 5: a run that diverges (--factor 1e9) must leave a checkpoint that
 * loads and holds only finite numbers - weights and Adam's moments. */
START_TEST(test_diverging_run_keeps_finite_checkpoint) {
    char out[128], ckpt[160], err[512];
    snprintf(out, sizeof out, "%s/out", g_dir);
    snprintf(ckpt, sizeof ckpt, "%s/copy.ckpt", out);
    int rc = run(NULL, "08_training", "--factor", "1e9", "--warmup", "1", "--checkpoint-every", "1",
                 "--steps", "40", "--batch", "16", "--eval", "0", "--examples", "0", "--out", out, NULL);
    ck_assert_msg(rc == 1 || rc == 2, "a diverging run: exit %d, want 1 or 2; stderr: %s", rc, g_err);
    ck_assert_msg(strstr(g_err, "is intact"), "stderr: %s", g_err);
    Model m;
    TrainState ts = {0};
    ck_assert_msg(model_load_train(&m, ckpt, 1, 10, 9, &ts, err, sizeof err) == 0, "%s", err);
    size_t n = m.params.n, bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(m.params.mem[i]) + !isfinite(ts.adam_m[i]) + !isfinite(ts.adam_v[i]);
    ck_assert_msg(bad == 0, "the last good checkpoint holds %zu non-finite values", bad);
    free(ts.adam_m), free(ts.adam_v);
    model_free(&m);
}
END_TEST

/* Issue 34, item 3(b): an output path naming the same file as an input
 * (`parity_dump --load m.ckpt --export-safetensors m.ckpt`, also through
 * ./, a symlink or a hard link; `07 --load m.ckpt --save m.ckpt`) or as
 * another output (`08 --checkpoint c --export-safetensors c`) silently
 * replaced it, exit 0. Each must exit 2 at flag time, every file as it was
 * and no new one. One run per program shows the check does not refuse what
 * is fine: parity_dump exporting beside its checkpoint, 08 resuming its own
 * checkpoint in place. */
static void refused(const char *prog, const char *what, int rc) {
    ck_assert_msg(rc == 2, "%s %s: exit %d, want 2; stderr: %s", prog, what, rc, g_err);
    ck_assert_msg(strstr(g_err, "same file"), "%s %s: stderr does not say 'same file': %s", prog, what, g_err);
}

START_TEST(test_output_is_an_input) {
    char ck[128], dot[128], lnk[128], hard[128], keep[128], batch[128], out[128], g[128], dotg[128], other[128];
    snprintf(ck, sizeof ck, "%s/m.ckpt", g_dir);
    snprintf(dot, sizeof dot, "%s/./m.ckpt", g_dir);
    snprintf(lnk, sizeof lnk, "%s/link.ckpt", g_dir);
    snprintf(hard, sizeof hard, "%s/hard.ckpt", g_dir);
    snprintf(keep, sizeof keep, "%s/keep/m.ckpt", g_dir);
    snprintf(batch, sizeof batch, "%s/batch.txt", g_dir);
    snprintf(out, sizeof out, "%s/out", g_dir);
    snprintf(g, sizeof g, "%s/g.st", g_dir);
    snprintf(dotg, sizeof dotg, "%s/./g.st", g_dir);
    snprintf(other, sizeof other, "%s/other.st", g_dir);
    int rc = run(NULL, "07_transformer", "--save", ck, "--out", out, NULL);
    ck_assert_msg(rc == 0, "07 --save: exit %d; stderr: %s", rc, g_err);
    write_text(batch, "3 4 5 6 3 7 2 | 1 8 9 10 11 2\n");
    ck_assert_int_eq(sh("mkdir %s/keep && cp %s %s && cp %s %s/keep/ && ln -s m.ckpt %s && ln %s %s", g_dir, ck, keep,
                        batch, g_dir, lnk, ck, hard), 0);

    /* 07 and parity_dump: an output on the checkpoint it loads, or on the batch it reads */
    refused("parity_dump", "--load m.ckpt --export-safetensors ./m.ckpt",
            run(NULL, "parity_dump", "--load", ck, "--export-safetensors", dot, NULL));
    refused("parity_dump", "--load link --export-safetensors m.ckpt",
            run(NULL, "parity_dump", "--load", lnk, "--export-safetensors", ck, NULL));
    refused("07", "--load m.ckpt --save m.ckpt",
            run(NULL, "07_transformer", "--load", ck, "--save", ck, "--out", out, NULL));
    refused("parity_dump", "--load m.ckpt --dump hard link",
            run(NULL, "parity_dump", "--load", ck, "--src", "3", "--tgt", "1", "--dump", hard, NULL));
    refused("parity_dump", "--load m.ckpt --grad-dump m.ckpt",
            run(NULL, "parity_dump", "--load", ck, "--batch-file", batch, "--grad-dump", ck, NULL));
    refused("parity_dump", "--load m.ckpt --adam-dump symlink",
            run(NULL, "parity_dump", "--load", ck, "--batch-file", batch, "--adam-dump", lnk, NULL));
    refused("parity_dump", "--batch-file b --grad-dump b",
            run(NULL, "parity_dump", "--load", ck, "--batch-file", batch, "--grad-dump", batch, NULL));
    /* two outputs of one run, neither there yet */
    refused("parity_dump", "--grad-dump g.st --export-safetensors ./g.st",
            run(NULL, "parity_dump", "--load", ck, "--batch-file", batch, "--grad-dump", g, "--export-safetensors",
                dotg, NULL));

    /* 08: the export on the checkpoint it writes or on the one it resumes */
    char c8[128], o8[128], o8ck[160];
    snprintf(c8, sizeof c8, "%s/c", g_dir);
    snprintf(o8, sizeof o8, "%s/o8", g_dir);
    snprintf(o8ck, sizeof o8ck, "%s/o8/copy.ckpt", g_dir);
    refused("08", "--checkpoint c --export-safetensors c",
            run(NULL, "08_training", "--checkpoint", c8, "--export-safetensors", c8, "--out", o8, NULL));
    refused("08", "--out o8 --export-safetensors o8/copy.ckpt",
            run(NULL, "08_training", "--export-safetensors", o8ck, "--out", o8, NULL));
    refused("08", "--resume m.ckpt --export-safetensors ./m.ckpt",
            run(NULL, "08_training", "--resume", ck, "--export-safetensors", dot, "--out", o8, NULL));

    /* nothing was written: the files as they were, no new ones, no temporaries */
    ck_assert_int_eq(sh("cmp -s %s %s && cmp -s %s %s/keep/batch.txt", ck, keep, batch, g_dir), 0);
    ck_assert_int_eq(sh("test -L %s && test \"$(ls -A %s | grep -v '^out$' | tr '\\n' ' ')\" = "
                        "'batch.txt hard.ckpt keep link.ckpt m.ckpt '", lnk, g_dir), 0);

    /* what is fine stays fine */
    rc = run(NULL, "parity_dump", "--load", ck, "--export-safetensors", other, NULL);
    ck_assert_msg(rc == 0 && access(other, F_OK) == 0, "parity_dump --load --export-safetensors other: exit %d; %s", rc,
                  g_err);
    rc = run(NULL, "08_training", "--steps", "2", "--batch", "16", "--eval", "0", "--examples", "0", "--out", o8, NULL);
    ck_assert_msg(rc == 0, "08 --steps 2: exit %d; stderr: %s", rc, g_err);
    rc = run(NULL, "08_training", "--resume", o8ck, "--steps", "3", "--batch", "16", "--eval", "0", "--examples", "0",
             "--out", o8, NULL);
    ck_assert_msg(rc == 0, "08 --resume its own checkpoint: exit %d; stderr: %s", rc, g_err);
    ck_assert_msg(strstr(g_out, "saved ") && strstr(g_out, "at step 3"), "08 resumed: %s", g_out);
}
END_TEST

Suite *io_suite(void) {
    Suite *s = suite_create("io");
    suite_case(s, "Core", test_escape, test_open_read_refuses_non_files,
               test_writer_commit_abort_fail);
    TCase *progs = suite_case(s, "Programs", test_fifo_given_to_programs, test_stdout_full,
                              test_out_full_disk, test_out_read_only, test_dump_full_disk,
                              test_thread_count_capped, test_attention_hostile_input,
                              test_diverging_run_keeps_finite_checkpoint, test_output_is_an_input);
    tcase_add_checked_fixture(progs, setup, teardown);
    tcase_set_timeout(progs, 120);
    return s;
}
