/* testutil.c - the shared helpers of the Check suites (what each does and
 * who owns what it returns: testutil.h). */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- comparing ----------------------------------------------------------- */

void assert_close_arrays_at(const float *a, const float *b, size_t n, double tol, const char *what,
                            const char *file, int line) {
    Diff d = diff_arrays(a, b, n);
    if (d.max_abs <= tol) return;
    int shown = 0;
    for (size_t i = 0; i < n && shown < 5; i++) {
        if (!(fabs((double)a[i] - (double)b[i]) <= tol)) {
            fprintf(stderr, "  %s[%zu]: got %.9g, want %.9g\n", what, i, a[i], b[i]);
            shown++;
        }
    }
    ck_assert_msg(0, "%s:%d: %s differs: max |diff| %.3g at %zu (tolerance %.3g)", file, line, what, d.max_abs,
                  d.where, tol);
}

/* ---- inputs -------------------------------------------------------------- */

float *randn(Rng *r, size_t n, float std) {
    float *x = malloc(n * sizeof(float));
    ck_assert_ptr_nonnull(x);
    rng_fill_normal(r, x, n, 0.0f, std);
    return x;
}

Config test_config(int N, int d_model, int d_ff, int h, int d_k, int d_v, int vocab, int max_len, float dropout) {
    Config c = config_base();
    c.N = N, c.d_model = d_model, c.d_ff = d_ff, c.h = h, c.d_k = d_k, c.d_v = d_v;
    c.vocab = vocab, c.max_len = max_len, c.dropout = dropout;
    return c;
}

Config test_config_tiny(float dropout) { return test_config(2, 8, 12, 2, 4, 3, 11, 16, dropout); }

/* ---- files --------------------------------------------------------------- */

void *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    for (size_t got; (got = fread(buf + n, 1, cap - 1 - n, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

void *read_file_or_fail(const char *path, size_t *len) {
    void *b = read_file(path, len);
    ck_assert_msg(b != NULL, "cannot read %s: %s", path, strerror(errno));
    return b;
}

void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

void write_text(const char *path, const char *text) { write_file(path, text, strlen(text)); }

void fresh_dir(char *dir, size_t cap, const char *suite) {
    snprintf(dir, cap, "/tmp/%s_XXXXXX", suite);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* /bin/rm, not rm: a test may have emptied PATH (check_show.c does) */
void remove_dir(const char *dir) { ck_assert_int_eq(sh("/bin/rm -rf '%s'", dir), 0); }

/* ---- skips --------------------------------------------------------------- */

/* "SUITE: skipped: WHY" on stderr, and "SUITE: WHY" at the end of the
 * runner's skip file in one write(2), so that lines from children running
 * at once do not interleave. */
static void skip_record(const char *suite, const char *fmt, va_list ap) {
    char why[768], line[1024];
    vsnprintf(why, sizeof why, fmt, ap);
    why[strcspn(why, "\n")] = '\0';   /* one line a skip */
    fprintf(stderr, "%s: skipped: %s\n", suite, why);
    int n = snprintf(line, sizeof line, "%s: %s\n", suite, why);
    if (n >= (int)sizeof line) n = (int)sizeof line - 1, line[n - 1] = '\n';
    const char *path = getenv(SKIP_FILE_ENV);
    if (!path || !*path) return;
    int fd = open(path, O_WRONLY | O_APPEND);
    ck_assert_msg(fd >= 0, "cannot open the skip file %s: %s", path, strerror(errno));
    ck_assert_int_eq(write(fd, line, (size_t)n), n);
    close(fd);
}

void test_skip(const char *suite, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    skip_record(suite, fmt, ap);
    va_end(ap);
}

void test_skip_missing(const char *suite, const char *tool, const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const char *ci = getenv("CI");
    ck_assert_msg(!(ci && !strcmp(ci, "true")), "%s: %s; CI installs %s (.ci/run), so under CI=true this fails",
                  suite, why, tool);
    test_skip(suite, "%s", why);
}

/* ---- programs ------------------------------------------------------------ */

int sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *build_dir(void) {
    const char *build = getenv("BUILD_DIR");
    ck_assert_msg(build && *build, "BUILD_DIR is not set: run the tests through build/check_all, which sets it");
    return build;
}

int chapter_binary(char *bin, size_t cap, const char *suite, const char *prog) {
    snprintf(bin, cap, "%s/%s", build_dir(), prog);
    ck_assert_msg(access(bin, X_OK) == 0, "%s: no program %s to test (make builds it; make test builds every one)",
                  suite, bin);
    return 1;
}

/* Everything readable from fd until EOF, NUL-terminated, malloc'd. */
static char *read_fd(int fd) {
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    for (ssize_t got; (got = read(fd, buf + n, cap - 1 - n)) != 0;) {
        if (got < 0) {
            if (errno == EINTR) continue;
            break;
        }
        n += (size_t)got;
        if (n + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[n] = '\0';
    return buf;
}

int run_captured(char **out, char **err, void (*fn)(void *), void *arg) {
    /* stdout into an unlinked temporary file (a pipe could fill up while we
     * wait), stderr into a pipe that is read while the child runs */
    char path[] = "/tmp/testutil_out_XXXXXX";
    int fo = out ? mkstemp(path) : -1, pe[2] = {-1, -1};
    if (out) {
        ck_assert_msg(fo >= 0, "mkstemp: %s", strerror(errno));
        unlink(path);
    }
    if (err) ck_assert_msg(pipe(pe) == 0, "pipe: %s", strerror(errno));
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int sink = fo >= 0 ? fo : open("/dev/null", O_WRONLY);
        dup2(sink, STDOUT_FILENO);
        dup2(err ? pe[1] : sink, STDERR_FILENO);
        if (err) close(pe[0]), close(pe[1]);
        fn(arg);
        fflush(stdout), fflush(stderr);
        _exit(0);
    }
    if (err) {
        close(pe[1]);
        *err = read_fd(pe[0]);
        close(pe[0]);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (out) {
        lseek(fo, 0, SEEK_SET);
        *out = read_fd(fo);
        close(fo);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void exec_sh(void *cmd) {
    execl("/bin/sh", "sh", "-c", (const char *)cmd, (char *)NULL);
    _exit(127);
}

int sh_captured(char **out, char **err, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ck_assert_msg(n >= 0 && (size_t)n < sizeof cmd, "command line too long: %.200s...", cmd);
    return run_captured(out, err, exec_sh, cmd);
}

void limit_file_size(long bytes) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {(rlim_t)bytes, (rlim_t)bytes};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

/* ---- output -------------------------------------------------------------- */

static char g_capture_path[64];
static int g_saved_stdout = -1;

void capture_begin(void) {
    strcpy(g_capture_path, "/tmp/testutil_capture_XXXXXX");
    int fd = mkstemp(g_capture_path);
    ck_assert_msg(fd >= 0, "mkstemp: %s", strerror(errno));
    fflush(stdout);
    g_saved_stdout = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    close(fd);
}

char *capture_end(void) {
    fflush(stdout);
    dup2(g_saved_stdout, STDOUT_FILENO);
    close(g_saved_stdout);
    g_saved_stdout = -1;
    char *s = read_file_or_fail(g_capture_path, NULL);
    unlink(g_capture_path);
    return s;
}

int text_cols(const char *s, size_t len, int wide) {
    int w = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0x1b) {
            while (i < len && !((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z'))) i++;
            continue;
        }
        if ((c & 0xC0) == 0x80) continue;
        w += wide && ((c >= 0xE3 && c <= 0xED) || c == 0xEF) ? 2 : 1;
    }
    return w;
}

int widest_line(const char *s) {
    int best = 0;
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, "\n");
        int w = text_cols(p, len, 0);
        best = w > best ? w : best;
        p += len + (p[len] == '\n');
    }
    return best;
}

void assert_lines_fit(const char *s, int max_cols, const char *unless) {
    int line = 1;
    for (const char *p = s; *p; line++) {
        size_t len = strcspn(p, "\n");
        int col = text_cols(p, len, 0);
        const char *u = unless ? strstr(p, unless) : NULL;
        int excused = u && u < p + len;
        ck_assert_msg(col <= max_cols || excused, "output line %d is %d columns, more than %d: %.*s", line, col,
                      max_cols, (int)len, p);
        p += len + (p[len] == '\n');
    }
}

/* ---- gradients ----------------------------------------------------------- */

double fd_diff(FdLoss loss, void *ctx, float *p, float h) {
    float saved = *p, up = saved + h, down = saved - h;
    *p = up;
    double lp = loss(ctx);
    *p = down;
    double lm = loss(ctx);
    *p = saved;
    return (lp - lm) / ((double)up - (double)down);
}

double fd_diff_double(FdLoss loss, void *ctx, double *p, double h) {
    double saved = *p, up = saved + h, down = saved - h;
    *p = up;
    double lp = loss(ctx);
    *p = down;
    double lm = loss(ctx);
    *p = saved;
    return (lp - lm) / (up - down);
}

/* fd_check_at's loop for a float parameter (pf) or a double one (pd). */
static size_t fd_check_core(FdLoss loss, void *ctx, float *pf, double *pd, const float *grad, size_t n,
                            const size_t *idx, size_t nidx, double h, double atol, double rtol, int *kinks,
                            const char *what, const char *file, int line) {
    size_t count = idx ? nidx : n;
    for (size_t k = 0; k < count; k++) {
        size_t i = idx ? idx[k] : k;
        ck_assert_msg(i < n, "%s:%d: fd_check index %zu of %s is past its %zu entries", file, line, i, what, n);
        double an = grad[i];
        double num = pf ? fd_diff(loss, ctx, &pf[i], (float)h) : fd_diff_double(loss, ctx, &pd[i], h);
        double tol = atol + rtol * fmax(fabs(num), fabs(an));
        if (fabs(num - an) <= tol) continue;               /* NaN fails every <= */
        double num2 = pf ? fd_diff(loss, ctx, &pf[i], (float)(2 * h)) : fd_diff_double(loss, ctx, &pd[i], 2 * h);
        double tol2 = atol + rtol * fmax(fabs(num2), fabs(an));
        if (fabs(num2 - an) <= tol2) continue;             /* a kink spoiled only the h quotient */
        if (kinks && fabs(num2 - num) > tol) {             /* the two quotients disagree: a kink */
            (*kinks)++;
            continue;
        }
        ck_abort_msg("%s:%d: gradient of %s[%zu]: backward %.7g, finite differences %.7g (h = %g) and %.7g (2h); "
                     "tolerance %.2g + %.2g x |value|", file, line, what, i, an, num, h, num2, atol, rtol);
    }
    return count;
}

size_t fd_check_at(FdLoss loss, void *ctx, float *param, const float *grad, size_t n, const size_t *idx,
                   size_t nidx, float h, double atol, double rtol, int *kinks, const char *what,
                   const char *file, int line) {
    return fd_check_core(loss, ctx, param, NULL, grad, n, idx, nidx, h, atol, rtol, kinks, what, file, line);
}

size_t fd_check_double_at(FdLoss loss, void *ctx, double *param, const float *grad, size_t n, double h, double atol,
                          double rtol, const char *what, const char *file, int line) {
    return fd_check_core(loss, ctx, NULL, param, grad, n, NULL, 0, h, atol, rtol, NULL, what, file, line);
}

void build_or_fail(Model *m, const Config *c, int B, int Ts, int Tt, uint64_t seed) {
    char err[256] = "";
    int rc = model_build(m, c, B, Ts, Tt, seed, err, sizeof err);
    ck_assert_msg(rc == 0, "model_build failed: %s", err);
}

void perturb_params(Model *m, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < m->params.n_tensors; i++) {
        NamedTensor *t = &m->params.tensors[i];
        if (t->ndim != 1) continue;
        for (int j = 0; j < t->shape[0]; j++) t->data[j] += 0.3f * (2.0f * rng_uniform(&r) - 1.0f);
    }
}

double weighted_sum(const float *out, const float *R, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * R[i];
    return s;
}

float *zeros(size_t n) {
    float *x = calloc(n ? n : 1, sizeof(float));
    ck_assert_ptr_nonnull(x);
    return x;
}

/* ---- suites -------------------------------------------------------------- */

TCase *suite_case_of(Suite *s, const char *name, const TTest *const *tests) {
    TCase *tc = tcase_create(name);
    for (int i = 0; tests[i]; i++) tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return tc;
}
