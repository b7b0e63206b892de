/* cli.c - the shared option parser: --help, ranges, and plain error messages. */
#include "io/cli.h"
#include "core/fileio.h"
#include "fast/parallel.h"
#include "io/show.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void print_default(FILE *f, const CliOption *o) {
    switch (o->kind) {
    case CLI_INT:    fprintf(f, "%d", *(int *)o->value); break;
    case CLI_FLOAT:  fprintf(f, "%g", *(float *)o->value); break;
    case CLI_U64:    fprintf(f, "%llu", (unsigned long long)*(uint64_t *)o->value); break;
    case CLI_FLAG:   fprintf(f, "%s", *(int *)o->value ? "on" : "off"); break;
    case CLI_STRING: fprintf(f, "%s", *(const char **)o->value ? *(const char **)o->value : "(none)"); break;
    }
}

static void usage(const char *prog, const char *about, const CliOption *opts, int n) {
    printf("%s - %s\n\nUsage: %s [options]\n\nOptions (default in brackets):\n", prog, about, prog);
    for (int i = 0; i < n; i++) {
        const CliOption *o = &opts[i];
        const char *arg = o->kind == CLI_INT ? " N" : o->kind == CLI_FLOAT ? " X"
                        : o->kind == CLI_U64 ? " N" : o->kind == CLI_STRING ? " S" : "";
        char left[64];
        snprintf(left, sizeof left, "%s%s", o->name, arg);
        printf("  %-22s %s [", left, o->help);
        print_default(stdout, o);
        printf("]");
        /* whole numbers as whole numbers: (0..10000000), not (0..1e+07) */
        if (o->kind == CLI_INT) printf(" (%.0f..%.0f)", o->min, o->max);
        if (o->kind == CLI_FLOAT) printf(" (%g..%g)", o->min, o->max);
        printf("\n");
    }
    printf("  %-22s %s\n", "--no-color", "plain characters, no colour (also NO_COLOR=1)");
    printf("  %-22s %s\n", "--minmax", "stretch every heatmap to its own min..max (default: weights 0..1)");
    printf("  %-22s %s\n", "--pause", "lecture mode: wait for Enter before each section (terminal only)");
    printf("  %-22s %s\n", "--section N", "print only section N (everything is still computed)");
    printf("  %-22s %s\n", "--help, -h", "this text");
}

/* Parses one value into o. Returns 0, or 2 with a message in err. */
static int parse_value(CliOption *o, const char *s, char *err, size_t errlen) {
    char *end = NULL;
    errno = 0;
    if (!s || !*s) {
        snprintf(err, errlen, "%s needs a value", o->name);
        return 2;
    }
    /* strtol, strtod and strtoull skip leading white space, and strtoull
     * takes a sign: " -1" would become 18446744073709551615. A number is
     * what it looks like or it is refused (strings are taken as given). */
    if (o->kind != CLI_STRING && isspace((unsigned char)*s)) {
        snprintf(err, errlen, "%s: '%s' starts with white space", o->name, s);
        return 2;
    }
    switch (o->kind) {
    case CLI_INT: {
        long v = strtol(s, &end, 10);
        if (*end || errno) { snprintf(err, errlen, "%s expects a whole number, got '%s'", o->name, s); return 2; }
        if (v < o->min || v > o->max) {
            snprintf(err, errlen, "%s must be between %g and %g, got %ld", o->name, o->min, o->max, v);
            return 2;
        }
        *(int *)o->value = (int)v;
        return 0;
    }
    case CLI_FLOAT: {
        double v = strtod(s, &end);
        if (*end || errno || !isfinite(v)) { snprintf(err, errlen, "%s expects a number, got '%s'", o->name, s); return 2; }
        if (v < o->min || v > o->max) {
            snprintf(err, errlen, "%s must be between %g and %g, got %g", o->name, o->min, o->max, v);
            return 2;
        }
        *(float *)o->value = (float)v;
        return 0;
    }
    case CLI_U64: {
        if (!isdigit((unsigned char)*s)) {   /* no sign, no space: digits only */
            snprintf(err, errlen, "%s expects a non-negative whole number (digits only), got '%s'", o->name, s);
            return 2;
        }
        unsigned long long v = strtoull(s, &end, 10);
        if (*end || errno) { snprintf(err, errlen, "%s expects a non-negative whole number, got '%s'", o->name, s); return 2; }
        *(uint64_t *)o->value = v;
        return 0;
    }
    case CLI_STRING:
        *(const char **)o->value = s;
        return 0;
    case CLI_FLAG:
        break;
    }
    return 0;
}

int cli_parse_noexit(int argc, char **argv, const char *prog, const char *about,
                     CliOption *opts, int nopts, char *err, size_t errlen) {
    if (getenv("NO_COLOR") && *getenv("NO_COLOR")) show_set_color(0);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            usage(prog, about, opts, nopts);
            return 1;
        }
        if (!strcmp(arg, "--no-color")) { show_set_color(0); continue; }
        if (!strcmp(arg, "--minmax")) { show_set_scale(SHOW_SCALE_MINMAX); continue; }
        if (!strcmp(arg, "--pause")) { show_set_pause(1); continue; }
        if (!strncmp(arg, "--section", 9) && (arg[9] == '\0' || arg[9] == '=')) {
            const char *v = arg[9] == '=' ? arg + 10 : (i + 1 < argc ? argv[++i] : NULL);
            char *end = NULL;
            long n = v && *v ? strtol(v, &end, 10) : 0;
            if (!v || !*v || *end || n < 1 || n > 99) {
                snprintf(err, errlen, "--section expects a section number 1..99, got '%s'", v ? v : "");
                return 2;
            }
            show_set_only_section((int)n);
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        CliOption *o = NULL;
        for (int j = 0; j < nopts; j++)
            if (strlen(opts[j].name) == name_len && !strncmp(opts[j].name, arg, name_len)) o = &opts[j];
        if (!o) {
            snprintf(err, errlen, "unknown option '%s' (see %s --help)", arg, prog);
            return 2;
        }
        if (o->kind == CLI_FLAG) {
            if (eq) { snprintf(err, errlen, "%.*s takes no value", (int)name_len, arg); return 2; }
            *(int *)o->value = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (parse_value(o, val, err, errlen)) return 2;
    }
    return 0;
}

int cli_given(int argc, char **argv, const char *flag) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], flag)) return 1;
    return 0;
}

void cli_parse(int argc, char **argv, const char *prog, const char *about,
               CliOption *opts, int nopts) {
    char err[256];
    fio_watch_stdout(prog);      /* output lost to a full disk: exit 1, not 0 */
    parallel_cap_threads(prog);  /* before the first parallel region */
    int rc = cli_parse_noexit(argc, argv, prog, about, opts, nopts, err, sizeof err);
    if (rc == 1) exit(0);
    if (rc == 2) {
        fprintf(stderr, "%s: error: %s\n", prog, err);
        exit(2);
    }
    show_lecture_begin(prog);
}

_Noreturn void cli_fail(const char *prog, const char *fmt, ...) {
    va_list ap;
    show_progress_clear();       /* under --section N: the message starts its own line */
    va_start(ap, fmt);
    fio_vfail(2, prog, fmt, ap);
}

size_t cli_check_floats(const char *prog, const char *what, int n_factors, ...) {
    /* Half of physical memory is the most any one request may take. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    double limit = (pages > 0 && page > 0) ? 0.5 * (double)pages * (double)page : 8e9;
    va_list ap;
    va_start(ap, n_factors);
    double total = 1;
    size_t n = 1;
    for (int i = 0; i < n_factors; i++) {
        size_t f = va_arg(ap, size_t);
        total *= (double)f;
        n *= f;
    }
    va_end(ap);
    if (total * sizeof(float) > limit)
        cli_fail(prog, "%s would need %.3g GB, more than this machine can give (%.3g GB); use smaller sizes",
                 what, total * sizeof(float) / 1e9, limit / 1e9);
    return n;
}

int cli_parse_ids(const char *prog, const char *flag, const char *s, int *ids, int cap) {
    int n = 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t') p++;
        if (!*p) break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) cli_fail(prog, "%s: '%s' is not a list of token ids (e.g. \"3 4 5\")", flag, s);
        if (n == cap) cli_fail(prog, "%s: more than %d tokens", flag, cap);
        if (v < -1000000000L || v > 1000000000L) v = -1;   /* out of range: reported by the caller */
        ids[n++] = (int)v;
        p = end;
    }
    if (n == 0) cli_fail(prog, "%s: no token ids given", flag);
    return n;
}
