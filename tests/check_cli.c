/* check_cli.c - the shared option parser (cli.h) and how every chapter
 * program answers a bad flag: a message naming the flag, exit status 2.
 *
 * The chapter checks run the binaries in $BUILD_DIR (set by `make test`);
 * a chapter without its binary fails. */
#include <check.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io/cli.h"
#include "testutil.h"

/* A fresh option table with its defaults, for each parse. */
typedef struct {
    int n;
    float lr;
    uint64_t seed;
    int verbose;
    const char *out;
    CliOption opts[5];
} Opts;

static void opts_init(Opts *o) {
    o->n = 5;
    o->lr = 0.1f;
    o->seed = 42;
    o->verbose = 0;
    o->out = "out/test";
    CliOption t[5] = {
        {"--n",       CLI_INT,    &o->n,       "sequence length", 1, 4096},
        {"--lr",      CLI_FLOAT,  &o->lr,      "learning rate",   0, 1},
        {"--seed",    CLI_U64,    &o->seed,    "random seed",     0, 0},
        {"--verbose", CLI_FLAG,   &o->verbose, "say more",        0, 0},
        {"--out",     CLI_STRING, &o->out,     "output folder",   0, 0},
    };
    memcpy(o->opts, t, sizeof t);
}

/* Parses a NULL-terminated list of arguments; err receives the message. */
static int parse(Opts *o, char *err, size_t errlen, ...) {
    char *argv[16] = {"prog"};
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 15;) argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    err[0] = '\0';
    return cli_parse_noexit(argc, argv, "prog", "test", o->opts, 5, err, errlen);
}

START_TEST(test_parse_good) {
    Opts o;
    char err[256];
    opts_init(&o);
    ck_assert_int_eq(parse(&o, err, sizeof err, NULL), 0);
    ck_assert_int_eq(o.n, 5);                          /* defaults survive */
    ck_assert_str_eq(o.out, "out/test");
    ck_assert_int_eq(parse(&o, err, sizeof err, "--n", "8", "--lr=0.5", "--seed", "18446744073709551615",
                           "--verbose", "--out", "dir with space", NULL), 0);
    ck_assert_int_eq(o.n, 8);
    ck_assert_float_eq(o.lr, 0.5f);
    ck_assert(o.seed == UINT64_MAX);
    ck_assert_int_eq(o.verbose, 1);
    ck_assert_str_eq(o.out, "dir with space");
    ck_assert_int_eq(parse(&o, err, sizeof err, "--out", " lead", NULL), 0);   /* strings as given */
    ck_assert_str_eq(o.out, " lead");
    ck_assert_int_eq(parse(&o, err, sizeof err, "--n=4096", "--lr", "0", "--no-color", NULL), 0);
    ck_assert_int_eq(o.n, 4096);                       /* both ends of the range */
    ck_assert_float_eq(o.lr, 0.0f);
}
END_TEST

/* Each bad input: status 2 and a message that names the flag. _i indexes BAD. */
static const char *const BAD[][3] = {
    {"--n", "abc", "--n"},          /* not a number          */
    {"--n", "0", "--n"},            /* zero size             */
    {"--n", "-3", "--n"},           /* negative size         */
    {"--n", "4097", "--n"},         /* above the range       */
    {"--n", "99999999999999999999", "--n"}, /* overflows long */
    {"--n", "3.5", "--n"},          /* not whole             */
    {"--n", "", "--n"},             /* empty value           */
    {"--lr", "2", "--lr"},          /* out of range          */
    {"--lr", "nan", "--lr"},        /* not finite            */
    {"--lr", "1e999", "--lr"},      /* overflows             */
    {"--lr", "0.1x", "--lr"},       /* trailing junk         */
    {"--seed", "-1", "--seed"},     /* negative seed         */
    {"--seed", "ten", "--seed"},
    {"--seed", " -1", "--seed"},    /* strtoull skips the space and wraps -1 to 2^64-1 */
    {"--seed", "+5", "--seed"},     /* a sign on an unsigned value */
    {"--seed", "\t7", "--seed"},    /* leading white space */
    {"--seed", " 7", "--seed"},
    {"--n", " 5", "--n"},           /* strtol skips leading space too */
    {"--lr", " 0.5", "--lr"},       /* and strtod */
    {"--bogus", "1", "--bogus"},    /* unknown option        */
    {"--verbose=1", NULL, "--verbose"}, /* a flag takes no value */
    {"--n", NULL, "--n"},           /* missing value at the end */
};

START_TEST(test_parse_bad) {
    Opts o;
    char err[256];
    opts_init(&o);
    const char *const *b = BAD[_i];
    int rc = b[1] ? parse(&o, err, sizeof err, (char *)b[0], (char *)b[1], NULL)
                  : parse(&o, err, sizeof err, (char *)b[0], NULL);
    ck_assert_msg(rc == 2, "'%s %s' returned %d, want 2", b[0], b[1] ? b[1] : "", rc);
    ck_assert_msg(strstr(err, b[2]) != NULL, "message '%s' does not name %s", err, b[2]);
}
END_TEST

START_TEST(test_parse_help) {
    Opts o;
    char err[256];
    opts_init(&o);
    /* usage goes to stdout; keep the test log clean */
    capture_begin();
    int rc1 = parse(&o, err, sizeof err, "--help", NULL);
    int rc2 = parse(&o, err, sizeof err, "--n", "7", "-h", NULL);
    free(capture_end());
    ck_assert_int_eq(rc1, 1);
    ck_assert_int_eq(rc2, 1);
}
END_TEST

/* ---- running code that exits -------------------------------------------- */

static void absurd_floats(void *arg) {
    (void)arg;
    /* 2^20 * 2^20 * 2^20 floats = 4 EB */
    cli_check_floats("prog", "--d-model", 3, (size_t)1 << 20, (size_t)1 << 20, (size_t)1 << 20);
}

static void overflowing_floats(void *arg) {
    (void)arg;
    cli_check_floats("prog", "--seq", 2, SIZE_MAX / 2, (size_t)4);
}

START_TEST(test_check_floats) {
    ck_assert_uint_eq(cli_check_floats("prog", "x", 3, (size_t)2, (size_t)3, (size_t)4), 24);
    ck_assert_uint_eq(cli_check_floats("prog", "x", 1, (size_t)1000000), 1000000);
    char *out;   /* the child's stdout and stderr */
    int rc = run_captured(&out, NULL, absurd_floats, NULL);
    ck_assert_msg(rc == 2, "absurd size: exit status %d, want 2 (output: %s)", rc, out);
    ck_assert_msg(strstr(out, "--d-model"), "message does not name --d-model: %s", out);
    free(out);
    rc = run_captured(&out, NULL, overflowing_floats, NULL);
    ck_assert_msg(rc == 2, "overflowing product: exit status %d, want 2 (output: %s)", rc, out);
    ck_assert_msg(strstr(out, "--seq"), "message does not name --seq: %s", out);
    free(out);
}
END_TEST

/* ---- the chapter programs ----------------------------------------------- */

typedef struct {
    const char *bin;
    const char *args[4];
} Exec;

static void exec_it(void *arg) {
    const Exec *e = arg;
    char *argv[6] = {(char *)e->bin};
    int n = 1;
    for (int i = 0; i < 4 && e->args[i]; i++) argv[n++] = (char *)e->args[i];
    argv[n] = NULL;
    execv(e->bin, argv);
    _exit(127);
}

/* For every chapters/NN_* (each must be built in $BUILD_DIR): an unknown flag and
 * a non-numeric --seed give status 2 and name the flag; --help gives 0 and
 * lists --seed and --out. */
START_TEST(test_chapters_bad_flags) {
    DIR *d = opendir("chapters");
    ck_assert_msg(d != NULL, "no chapters/ folder here: run the tests from the project root");
    int checked = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (!(nm[0] >= '0' && nm[0] <= '9' && nm[1] >= '0' && nm[1] <= '9' && nm[2] == '_')) continue;
        char bin[1024];
        chapter_binary(bin, sizeof bin, "check_cli", nm);
        char *out;
        Exec bad = {bin, {"--no-such-flag", NULL}};
        int rc = run_captured(&out, NULL, exec_it, &bad);
        ck_assert_msg(rc == 2, "%s --no-such-flag: exit status %d, want 2", nm, rc);
        ck_assert_msg(strstr(out, "--no-such-flag"), "%s: message does not name the flag: %s", nm, out);
        free(out);

        Exec seed = {bin, {"--seed", "abc", NULL}};
        rc = run_captured(&out, NULL, exec_it, &seed);
        ck_assert_msg(rc == 2, "%s --seed abc: exit status %d, want 2", nm, rc);
        ck_assert_msg(strstr(out, "--seed"), "%s: message does not name --seed: %s", nm, out);
        free(out);

        Exec neg = {bin, {"--seed", " -1", NULL}};   /* not 18446744073709551615 */
        rc = run_captured(&out, NULL, exec_it, &neg);
        ck_assert_msg(rc == 2, "%s --seed ' -1': exit status %d, want 2", nm, rc);
        ck_assert_msg(strstr(out, "--seed"), "%s: message does not name --seed: %s", nm, out);
        free(out);

        Exec help = {bin, {"--help", NULL}};
        rc = run_captured(&out, NULL, exec_it, &help);
        ck_assert_msg(rc == 0, "%s --help: exit status %d, want 0", nm, rc);
        ck_assert_msg(strstr(out, "--seed") && strstr(out, "--out"), "%s --help lacks --seed/--out", nm);
        free(out);
        checked++;
    }
    closedir(d);
    ck_assert_msg(checked > 0, "no chapters/NN_* folders: nothing checked");
}
END_TEST

/* Chapters 01/02 refuse sizes that make no sense, naming the flag. */
START_TEST(test_chapter_sizes) {
    static const char *const cases[][4] = {
        {"01_dot_product", "--samples", "0", "--samples"},
        {"01_dot_product", "--max-dk", "-4", "--max-dk"},
        {"01_dot_product", "--d-k", "100000", "--d-k"},
        {"02_softmax", "--keys", "1", "--keys"},
        {"02_softmax", "--samples", "many", "--samples"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char bin[1024], *out;
        chapter_binary(bin, sizeof bin, "check_cli", cases[i][0]);
        Exec e = {bin, {cases[i][1], cases[i][2], NULL}};
        int rc = run_captured(&out, NULL, exec_it, &e);
        ck_assert_msg(rc == 2, "%s %s %s: exit status %d, want 2", cases[i][0], cases[i][1], cases[i][2], rc);
        ck_assert_msg(strstr(out, cases[i][3]), "%s: message does not name %s: %s", cases[i][0], cases[i][3], out);
        free(out);
    }
    /* work that would take minutes is refused up front, not started */
    char bin[1024];
    chapter_binary(bin, sizeof bin, "check_cli", "01_dot_product");
    Exec e = {bin, {"--samples", "10000000", "--max-dk", "1048576"}};
    int rc = run_captured(NULL, NULL, exec_it, &e);
    ck_assert_msg(rc == 2, "01_dot_product huge experiment: exit status %d, want 2", rc);
}
END_TEST

Suite *cli_suite(void) {
    Suite *s = suite_create("cli");
    suite_case(s, "Core", test_parse_good, test_parse_help);
    TCase *limits = suite_case(s, "Limits", test_check_floats);
    tcase_add_loop_test(limits, test_parse_bad, 0, (int)(sizeof BAD / sizeof BAD[0]));
    TCase *progs = suite_case(s, "Programs", test_chapters_bad_flags, test_chapter_sizes);
    tcase_set_timeout(progs, 30);
    return s;
}
