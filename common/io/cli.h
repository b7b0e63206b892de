/* cli.h - one command-line parser for every program.
 *
 * Each program lists its options in a table; cli_parse() fills the values,
 * prints --help (every option with its default), and rejects anything wrong
 * with a message that names the flag, exiting with status 2:
 *
 *     int n = 5; uint64_t seed = 42; const char *out = "out/01";
 *     CliOption opts[] = {
 *         {"--n",    CLI_INT,    &n,    "sequence length", 1, 4096},
 *         {"--seed", CLI_U64,    &seed, "random seed",     0, 0},
 *         {"--out",  CLI_STRING, &out,  "output folder",   0, 0},
 *     };
 *     cli_parse(argc, argv, "01_dot_product", "what it does", opts, CLI_COUNT(opts));
 *
 * Always understood: --help / -h, --no-color (same as NO_COLOR=1), --minmax
 * (heatmaps stretched to their own range) and lecture mode: --pause (wait
 * for Enter before each numbered section, when stdin is a terminal) and
 * --section N (print only section N); see show.h.
 * Both "--flag value" and "--flag=value" work.
 */
#ifndef CLI_H
#define CLI_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    CLI_INT,     /* int*,   checked against [min, max]                     */
    CLI_FLOAT,   /* float*, checked against [min, max] (finite)            */
    CLI_U64,     /* uint64_t* (seeds), any non-negative integer            */
    CLI_FLAG,    /* int*, set to 1 when present; takes no value            */
    CLI_STRING,  /* const char**, any non-empty string                     */
} CliKind;

typedef struct {
    const char *name;   /* "--d-model"                                     */
    CliKind kind;
    void *value;        /* where the parsed value goes; its initial value is the default */
    const char *help;   /* one line                                        */
    double min, max;    /* valid range for CLI_INT and CLI_FLOAT           */
} CliOption;

#define CLI_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The two options most chapters share, worded once: where the data, gnuplot
 * scripts and PNGs go, and which backend runs the library's ops. */
#define CLI_OPT_OUT(var) {"--out", CLI_STRING, &(var), "output folder for data, scripts and PNGs", 0, 0}
#define CLI_OPT_DEVICE(var) {"--device", CLI_STRING, &(var), "cpu or cuda", 0, 0}

/* Parses argv into opts. On --help prints usage and exits 0; on any error
 * prints "prog: error: ..." naming the flag plus a hint and exits 2. */
void cli_parse(int argc, char **argv, const char *prog, const char *about,
               CliOption *opts, int nopts);

/* 1 when argv holds flag itself (a CLI_FLAG, no value), else 0. Called
 * before cli_parse by a flag that changes other options' defaults, as the
 * long chapters' --quick: its values first, then any flag given beside it
 * overrides them. */
int cli_given(int argc, char **argv, const char *flag);

/* Same, but returns 0 on success, 1 after --help, 2 on error (message in
 * err) instead of exiting: what the tests call. */
int cli_parse_noexit(int argc, char **argv, const char *prog, const char *about,
                     CliOption *opts, int nopts, char *err, size_t errlen);

/* A failure of the world detected after parsing (sizes that do not fit,
 * d_model not divisible by heads, a bad file): prints "prog: error: msg"
 * and exits 2. printf-style: the compiler checks the arguments against fmt,
 * and knows the call does not return (so no "missing return" after it).
 * For programs only: library code returns an error code instead. */
#if defined(__GNUC__)
#define CLI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CLI_PRINTF(f, a)
#endif
_Noreturn void cli_fail(const char *prog, const char *fmt, ...) CLI_PRINTF(2, 3);

/* Refuses (exit 2, naming what) a request for more float32 elements than
 * fit comfortably in this machine's memory, or a product that overflows.
 * n_factors sizes (each passed as size_t: cast ints with (size_t)) are
 * multiplied with overflow checking. Returns the product. */
size_t cli_check_floats(const char *prog, const char *what, int n_factors, ...);

/* A flag's list of token ids, "3 4 5" (spaces, commas or tabs between them),
 * into ids[0..cap): exits 2 naming flag on anything that is not a list of
 * whole numbers, an empty one, or more than cap. A number beyond +-1e9
 * becomes -1, for the caller's vocabulary check to report. Returns the count. */
int cli_parse_ids(const char *prog, const char *flag, const char *s, int *ids, int cap);

#endif
