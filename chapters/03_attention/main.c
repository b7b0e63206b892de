/* 03_attention - scaled dot-product attention, Eq. (1), one step at a time.
 *
 * Paper: Section 3.2.1, Eq. (1):
 *
 *     Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
 *
 * A short sentence - "the book fell because it was heavy" (the "it" that
 * must find its noun, like the book-and-table example in the reading notes)
 * - gets seeded random queries, keys and values, with one match planted:
 * the query of "it" points the same way as the key of "book". Then, with
 * the shape printed at every step:
 *   1. Q, K, V
 *   2. scores = Q K^T            (one entry written out term by term)
 *   3. scaled = scores / sqrt(d_k)
 *   4. weights = softmax(scaled) row by row (terminal heatmap + PNG)
 *   5. out = weights V           (one row written out as a weighted mix of V's rows)
 *   6. the same through the library's sdpa_forward: max difference
 *
 * Run:  build/03_attention [--seed N] [--d-k N] [--d-v N] [--input FILE]
 *                          [--device cpu|cuda] [--out DIR]
 * --input FILE reads Q, K and V from a text file (format in --help and
 * README.md; an example is chapters/03_attention/example.qkv).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fast/attention_fast.h"
#include "io/cli.h"
#include "model/device.h"
#include "qkv_file.h"
#include "core/rng.h"
#include "io/show.h"
#include "io/plot.h"
#include "core/tensor.h"

#define PROG "03_attention"

static const char *ABOUT =
    "scaled dot-product attention, Eq. (1), step by step\n"
    "\n"
    "--input FILE reads Q, K and V (one head) from plain text instead of the\n"
    "seeded example (--seed, --d-k, --d-v are then not used):\n"
    "  # comment            '#' starts a comment; blank lines are ignored\n"
    "  tokens: the cat sat  optional labels for the rows of Q and K; use\n"
    "                       q_tokens: / k_tokens: when queries and keys differ\n"
    "  Q                    a section header alone on a line, then one row of\n"
    "  1 0 2                numbers per query (d_k numbers each)\n"
    "  K                    one row per key, d_k numbers (the same d_k as Q)\n"
    "  V                    one row per key, d_v numbers\n"
    "Each of Q, K, V exactly once, any order; at most 256 rows and 256 numbers\n"
    "a row. Mistakes are reported as FILE:LINE with what was expected (exit 2).\n"
    "Example: chapters/03_attention/example.qkv";

/* The default sentence; IT looks for BOOK. */
static const char *SENTENCE[] = {"the", "book", "fell", "because", "it", "was", "heavy"};
enum { SENT_T = 7, IT = 4, BOOK = 1 };

/* Q (T,d_k), K (T,d_k), V (T,d_v) drawn N(0,1); then the key of "book" is
 * stretched to length 3 and the query of "it" set equal to it. A dot
 * product is large when two vectors point the same way: q_it . k_book =
 * |k_book|^2 = 9, while q_it . k_j for a random key k_j (entries N(0,1))
 * is distributed N(0, |q_it|^2) = N(0, 9): typically about 3, a third. */
static void seeded_qkv(float *Q, float *K, float *V, int T, int d_k, int d_v, Rng *r) {
    rng_fill_normal(r, Q, (size_t)T * d_k, 0.0f, 1.0f);
    rng_fill_normal(r, K, (size_t)T * d_k, 0.0f, 1.0f);
    rng_fill_normal(r, V, (size_t)T * d_v, 0.0f, 1.0f);
    float *kb = K + BOOK * d_k, len = 0.0f;
    for (int c = 0; c < d_k; c++) len += kb[c] * kb[c];
    len = sqrtf(len);
    for (int c = 0; c < d_k; c++) {
        kb[c] *= 3.0f / len;
        Q[IT * d_k + c] = kb[c];
    }
}

/* labels "q0".."q{n-1}" for a file without token lines; one block, freed by free() */
static char **index_labels(char prefix, int n) {
    char **l = malloc((size_t)n * (sizeof(char *) + 16));
    if (!l) cli_fail(PROG, "out of memory");
    char *text = (char *)(l + n);
    for (int i = 0; i < n; i++) {
        l[i] = text + 16 * i;
        snprintf(l[i], 16, "%c%d", prefix, i);
    }
    return l;
}

static void print_shape(float *x, const char *name, const char *dims, int a, int b, const char *note) {
    Tensor t = tensor_wrap(x, name, dims, a, b);
    show_shape(&t, note);
}

/* ---- 1. Q, K, V ----------------------------------------------------------------- */

/* One attention problem: Q (Tq,d_k), K (Tk,d_k), V (Tk,d_v) and the labels
 * of the rows of Q and K. Either read from a file (f owns the arrays) or
 * the seeded sentence (Q, K, V malloc'd here). */
typedef struct {
    int Tq, Tk, d_k, d_v;
    float *Q, *K, *V;
    const char *const *qlab, *const *klab;
    int from_file;
    QkvFile f;
    char **qlab_own, **klab_own;   /* index labels for a file without token lines */
} Problem;

static void section_qkv(Problem *p, const char *input, uint64_t seed, int d_k, int d_v, Device dev) {
    char err[512];
    show_section("1. Queries, keys and values (Section 3.2.1)");
    if (input) {
        if (qkv_load(&p->f, input, err, sizeof err) != 0)
            cli_fail(PROG, "--input: %s\n(the format is in '%s --help')", err, PROG);
        p->from_file = 1;
        p->Tq = p->f.Tq, p->Tk = p->f.Tk, p->d_k = p->f.d_k, p->d_v = p->f.d_v;
        p->Q = p->f.Q, p->K = p->f.K, p->V = p->f.V;
        if (!p->f.q_tokens) p->qlab_own = index_labels('q', p->Tq);
        if (!p->f.k_tokens) p->klab_own = index_labels('k', p->Tk);
        p->qlab = (const char *const *)(p->f.q_tokens ? p->f.q_tokens : p->qlab_own);
        p->klab = (const char *const *)(p->f.k_tokens ? p->f.k_tokens : p->klab_own);
        printf("Read from %s: %d queries, %d keys, d_k = %d, d_v = %d.\n", input, p->Tq, p->Tk, p->d_k, p->d_v);
    } else {
        p->Tq = p->Tk = SENT_T, p->d_k = d_k, p->d_v = d_v;
        p->Q = malloc(sizeof(float) * SENT_T * d_k);
        p->K = malloc(sizeof(float) * SENT_T * d_k);
        p->V = malloc(sizeof(float) * SENT_T * d_v);
        if (!p->Q || !p->K || !p->V) cli_fail(PROG, "out of memory");
        Rng rng;
        rng_seed(&rng, seed);
        seeded_qkv(p->Q, p->K, p->V, SENT_T, d_k, d_v, &rng);
        p->qlab = p->klab = SENTENCE;
        printf("Sentence: \"the book fell because it was heavy\" - self-attention, so\n"
               "every token is a query and a key. Q, K, V are random N(0,1) (seed %llu),\n"
               "except that the key of \"book\" is stretched to length 3 and the query\n"
               "of \"it\" set equal to it: we plant the match (\"it\" means the book)\n"
               "that a trained model would have to learn.\n",
               (unsigned long long)seed);
    }
    printf("Device: %s.\n", device_name(dev));
    printf("A query row says what a token looks for, a key row what it offers, a\n"
           "value row what it hands over when attended to.\n\n");
    print_shape(p->Q, "Q", "query d_k", p->Tq, p->d_k, "one row per query");
    print_shape(p->K, "K", "key d_k", p->Tk, p->d_k, "one row per key (same width d_k: q.k must exist)");
    print_shape(p->V, "V", "key d_v", p->Tk, p->d_v, "one row per key (d_v need not equal d_k)");
    show_matrix("Q", p->Q, p->Tq, p->d_k, p->qlab, NULL);
    show_matrix("K", p->K, p->Tk, p->d_k, p->klab, NULL);
    show_matrix("V", p->V, p->Tk, p->d_v, p->klab, NULL);
}

static void problem_free(Problem *p) {
    free(p->qlab_own);
    free(p->klab_own);
    if (p->from_file) qkv_free(&p->f);
    else { free(p->Q); free(p->K); free(p->V); }
}

/* ---- 2. scores = Q K^T ----------------------------------------------------------- */

/* scores (Tq,Tk) */
static void section_scores(float *scores, const Problem *p) {
    int Tq = p->Tq, Tk = p->Tk, d_k = p->d_k;
    show_section("2. scores = Q K^T: every query dotted with every key");
    for (int i = 0; i < Tq; i++)
        for (int j = 0; j < Tk; j++) {
            float s = 0.0f;
            for (int c = 0; c < d_k; c++) s += p->Q[i * d_k + c] * p->K[j * d_k + c];
            scores[i * Tk + j] = s;
        }
    print_shape(scores, "scores", "query key", Tq, Tk, "= Q [query, d_k] x K^T [d_k, key]");
    show_matrix("scores (row = query, column = key)", scores, Tq, Tk, p->qlab, p->klab);
}

/* ---- 3. scale ---------------------------------------------------------------------- */

/* scaled (Tq,Tk) = scores (Tq,Tk) / sqrt(d_k) */
static void section_scale(float *scaled, const float *scores, const Problem *p) {
    int Tq = p->Tq, Tk = p->Tk, d_k = p->d_k;
    show_section("3. scaled = scores / sqrt(d_k)");
    float inv = 1.0f / sqrtf((float)d_k);
    for (int i = 0; i < Tq * Tk; i++) scaled[i] = scores[i] * inv;
    printf("d_k = %d, sqrt(d_k) = %.4f. Why: a dot product of d_k terms with unit\n"
           "variance has variance d_k; dividing by sqrt(d_k) keeps the scores near 1\n"
           "so softmax does not saturate (Section 3.2.1; chapters 01 and 02).\n",
           d_k, sqrt((double)d_k));
    print_shape(scaled, "scaled", "query key", Tq, Tk, NULL);
    show_matrix("scaled scores", scaled, Tq, Tk, p->qlab, p->klab);
}

/* ---- 4. softmax -------------------------------------------------------------------- */

/* The query row worked out by hand in sections 4 and 5, and its top key. */
typedef struct { int query, key; } Star;

/* weights (Tq,Tk) = softmax of each row of scaled (Tq,Tk); scores for the
 * worked example. Returns the row to work out: "it" in the seeded example;
 * for a file, the query whose attention is most focused (largest single
 * weight). */
static Star section_softmax(float *weights, const float *scaled, const float *scores, const Problem *p,
                            const char *out_dir) {
    int Tq = p->Tq, Tk = p->Tk, d_k = p->d_k;
    const char *const *qlab = p->qlab, *const *klab = p->klab;
    show_section("4. weights = softmax(scaled), one row per query (Eq. 1)");
    for (int i = 0; i < Tq; i++) {
        const float *x = scaled + i * Tk;
        float *y = weights + i * Tk;
        float max = x[0], sum = 0.0f;
        for (int j = 1; j < Tk; j++) max = x[j] > max ? x[j] : max;
        for (int j = 0; j < Tk; j++) { y[j] = expf(x[j] - max); sum += y[j]; }   /* stable: exp <= 1 */
        for (int j = 0; j < Tk; j++) y[j] /= sum;
    }
    print_shape(weights, "weights", "query key", Tq, Tk, "each row sums to 1");
    show_heatmap("attention weights (row = query, column = key)", weights, Tq, Tk, qlab, klab);
    plot_heatmap(out_dir, "weights", "Attention weights softmax(QK^T/sqrt(d_k)), Eq. (1)",
                 weights, Tq, Tk, qlab, klab, "key", "query");
    plot_heatmap(out_dir, "scores", "Scaled scores QK^T/sqrt(d_k)", scaled, Tq, Tk, qlab, klab, "key", "query");

    int input = p->from_file;
    Star st = {input ? 0 : IT, 0};
    float best = -1.0f;
    for (int i = 0; i < Tq; i++)
        for (int j = 0; j < Tk; j++)
            if ((input || i == IT) && weights[i * Tk + j] > best) {
                best = weights[i * Tk + j];
                st.query = i;
                st.key = j;
            }
    printf("%s \"%s\"%s gives %.1f%% of its attention to \"%s\".\n", input ? "The most focused query," : "Query",
           qlab[st.query], input ? "," : "", 100.0 * best, klab[st.key]);
    printf("Its score for \"%s\" written out, q . k =\n   ", klab[st.key]);
    for (int c = 0; c < d_k && c < 4; c++)
        printf("%s(%.3f)(%.3f)", c ? " + " : "", (double)p->Q[st.query * d_k + c], (double)p->K[st.key * d_k + c]);
    printf("%s\n   = %.4f;  / sqrt(d_k) = / %.4f -> %.4f\n", d_k > 4 ? " + ..." : "",
           (double)scores[st.query * Tk + st.key], sqrt((double)d_k), (double)scaled[st.query * Tk + st.key]);
    return st;
}

/* ---- 5. out = weights V ------------------------------------------------------------ */

/* out (Tq,d_v) = weights (Tq,Tk) V (Tk,d_v); row st.query written out */
static void section_mix(float *out, const float *weights, const Problem *p, Star st) {
    int Tq = p->Tq, Tk = p->Tk, d_v = p->d_v, star = st.query;
    const float *V = p->V;
    show_section("5. out = weights V: each output row is a weighted mix of V's rows");
    for (int i = 0; i < Tq; i++)
        for (int c = 0; c < d_v; c++) {
            float s = 0.0f;
            for (int j = 0; j < Tk; j++) s += weights[i * Tk + j] * V[j * d_v + c];
            out[i * d_v + c] = s;
        }
    print_shape(out, "out", "query d_v", Tq, d_v, "= weights [query, key] x V [key, d_v]");
    show_matrix("out", out, Tq, d_v, p->qlab, NULL);
    printf("Row \"%s\" worked out (terms sorted by weight, largest first):\n", p->qlab[star]);
    /* order the keys by weight so the big contributions come first */
    int *order = malloc(sizeof(int) * Tk);
    double *mix = calloc((size_t)d_v, sizeof(double));
    if (!order || !mix) cli_fail(PROG, "out of memory");
    for (int j = 0; j < Tk; j++) order[j] = j;
    for (int a = 1; a < Tk; a++)
        for (int b = a; b > 0 && weights[star * Tk + order[b]] > weights[star * Tk + order[b - 1]]; b--) {
            int t = order[b]; order[b] = order[b - 1]; order[b - 1] = t;
        }
    int shown_terms = Tk < 8 ? Tk : 8;
    for (int a = 0; a < Tk; a++) {
        int j = order[a];
        for (int c = 0; c < d_v; c++) mix[c] += (double)weights[star * Tk + j] * V[j * d_v + c];
        if (a >= shown_terms) continue;
        printf("  %s %.4f x [", a ? "+" : " ", (double)weights[star * Tk + j]);
        for (int c = 0; c < d_v && c < 4; c++) printf("%s%7.4f", c ? ", " : "", (double)V[j * d_v + c]);
        printf("%s]   v of \"%s\"\n", d_v > 4 ? ", ..." : "", p->klab[j]);
    }
    if (Tk > shown_terms) printf("  + %d smaller terms\n", Tk - shown_terms);
    printf("  = [");
    for (int c = 0; c < d_v && c < 6; c++) printf("%s%.4f", c ? ", " : "", mix[c]);
    printf("%s]   (row \"%s\" of out above)\n", d_v > 6 ? ", ..." : "", p->qlab[star]);
    free(order);
    free(mix);
}

/* ---- 6. the library ---------------------------------------------------------------- */

/* sdpa_forward (and on --device cuda its GPU twin) against the steps above:
 * weights (Tq,Tk), out (Tq,d_v). Returns 1 if they agree. */
static int section_library(const float *weights, const float *out, const Problem *p, Device dev) {
    int Tq = p->Tq, Tk = p->Tk, d_k = p->d_k, d_v = p->d_v;
    float *w_lib = malloc(sizeof(float) * Tq * Tk);     /* (Tq,Tk) */
    float *out_lib = malloc(sizeof(float) * Tq * d_v);  /* (Tq,d_v) */
    if (!w_lib || !out_lib) cli_fail(PROG, "out of memory");
    show_section("6. Eq. (1) in the library: sdpa_forward (common/fast/attention_fast.c)");
    sdpa_forward(out_lib, w_lib, p->Q, p->K, p->V, NULL, 1, 1, Tq, Tk, d_k, d_v);
    Diff dw = diff_arrays(w_lib, weights, (size_t)Tq * Tk);
    Diff dout = diff_arrays(out_lib, out, (size_t)Tq * d_v);
    printf("sdpa_forward does steps 2-5 for a whole batch and every head at once\n"
           "([batch=1, heads=1] here), with its own loops, not gemm() and softmax_forward:\n"
           "one pass per query row (scores, stable softmax, weighted sum of V) while\n"
           "the row is in cache. sdpa_forward_ref beside it is the plain version.\n");
    printf("  weights: max |library - step by step| = %.3g\n", dw.max_abs);
    printf("  out:     max |library - step by step| = %.3g\n", dout.max_abs);
    /* qkv_load refuses inputs whose scores overflow float32, so a
     * difference here is not the input's fault; still, say what was seen */
    int agree = dw.max_abs < 1e-5 && dout.max_abs < 1e-4;
    printf("  %s (float32 rounding in a different summation order is ~1e-7)\n",
           agree ? "they agree" : "THEY DISAGREE by more than float32 rounding explains");
    if (dev == DEVICE_CUDA) {
        /* the same call on the GPU: upload Q, K, V, cuda_sdpa_forward, download */
        char err[512];
        float *w_gpu = malloc(sizeof(float) * Tq * Tk), *out_gpu = malloc(sizeof(float) * Tq * d_v);
        if (!w_gpu || !out_gpu) cli_fail(PROG, "out of memory");
        if (gpu_sdpa_forward_host(out_gpu, w_gpu, p->Q, p->K, p->V, NULL, 1, 1, Tq, Tk, d_k, d_v, err, sizeof err))
            cli_fail(PROG, "--device cuda: %s", err);
        Diff gw = diff_arrays(w_gpu, w_lib, (size_t)Tq * Tk), go = diff_arrays(out_gpu, out_lib, (size_t)Tq * d_v);
        printf("  GPU vs CPU: max |diff| = %.3g (weights), %.3g (out)  [cuda_sdpa_forward, cuda/attention.cu]\n",
               gw.max_abs, go.max_abs);
        agree &= gw.max_abs < 1e-5 && go.max_abs < 1e-4;
        free(w_gpu);
        free(out_gpu);
    }
    free(w_lib);
    free(out_lib);
    return agree;
}

int main(int argc, char **argv) {
    uint64_t seed = 42;
    int d_k = 4, d_v = 3;
    const char *input = NULL, *device = "cpu", *out_dir = "out/03_attention";
    CliOption opts[] = {
        {"--seed",   CLI_U64,    &seed,    "random seed for Q, K, V", 0, 0},
        {"--d-k",    CLI_INT,    &d_k,     "width of queries and keys", 1, 64},
        {"--d-v",    CLI_INT,    &d_v,     "width of values", 1, 64},
        {"--input",  CLI_STRING, &input,   "read Q, K, V from this text file (format above)", 0, 0},
        CLI_OPT_DEVICE(device),
        CLI_OPT_OUT(out_dir),
    };
    cli_parse(argc, argv, PROG, ABOUT, opts, CLI_COUNT(opts));
    show_lecture_sections(6);   /* its banners: "1." .. "6." */
    Device dev;
    if (device_select(device, &dev) != 0) cli_fail(PROG, "--device must be cpu or cuda, got '%s'", device);
    if (plot_mkdir(out_dir) != 0) cli_fail(PROG, "--out: cannot use folder '%s'", out_dir);

    Problem p = {0};
    section_qkv(&p, input, seed, d_k, d_v, dev);                       /* 1. Q, K, V          */
    size_t nw = (size_t)p.Tq * p.Tk;
    float *scores = malloc(sizeof(float) * nw);                         /* (Tq,Tk)             */
    float *scaled = malloc(sizeof(float) * nw);                         /* (Tq,Tk)             */
    float *weights = malloc(sizeof(float) * nw);                        /* (Tq,Tk)             */
    float *out = malloc(sizeof(float) * p.Tq * p.d_v);                  /* (Tq,d_v)            */
    if (!scores || !scaled || !weights || !out) cli_fail(PROG, "out of memory");
    section_scores(scores, &p);                                         /* 2. Q K^T            */
    section_scale(scaled, scores, &p);                                  /* 3. / sqrt(d_k)      */
    Star st = section_softmax(weights, scaled, scores, &p, out_dir);    /* 4. softmax          */
    section_mix(out, weights, &p, st);                                  /* 5. weights V        */
    int agree = section_library(weights, out, &p, dev);                 /* 6. sdpa_forward     */

    free(scores); free(scaled); free(weights); free(out);
    problem_free(&p);
    return agree ? 0 : 1;
}
