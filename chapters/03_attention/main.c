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

#include "attention.h"
#include "cli.h"
#include "device.h"
#include "model_gpu.h"
#include "qkv_file.h"
#include "rng.h"
#include "show.h"
#include "tensor.h"

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

int main(int argc, char **argv) {
    uint64_t seed = 42;
    int d_k = 4, d_v = 3;
    const char *input = NULL, *device = "cpu", *out_dir = "out/03_attention";
    CliOption opts[] = {
        {"--seed",   CLI_U64,    &seed,    "random seed for Q, K, V", 0, 0},
        {"--d-k",    CLI_INT,    &d_k,     "width of queries and keys", 1, 64},
        {"--d-v",    CLI_INT,    &d_v,     "width of values", 1, 64},
        {"--input",  CLI_STRING, &input,   "read Q, K, V from this text file (format above)", 0, 0},
        {"--device", CLI_STRING, &device,  "cpu or cuda", 0, 0},
        {"--out",    CLI_STRING, &out_dir, "output folder for data, scripts and PNGs", 0, 0},
    };
    cli_parse(argc, argv, PROG, ABOUT, opts, CLI_COUNT(opts));
    Device dev;
    if (device_select(device, &dev) != 0) cli_fail(PROG, "--device must be cpu or cuda, got '%s'", device);
    if (plot_mkdir(out_dir) != 0) cli_fail(PROG, "--out: cannot use folder '%s'", out_dir);

    /* ---- 1. Q, K, V ------------------------------------------------------------ */
    QkvFile f = {0};
    char err[512];
    int Tq, Tk;
    float *Q, *K, *V;
    char **qlab_own = NULL, **klab_own = NULL;
    const char *const *qlab, *const *klab;
    show_section("1. Queries, keys and values (Section 3.2.1)");
    if (input) {
        if (qkv_load(&f, input, err, sizeof err) != 0)
            cli_fail(PROG, "--input: %s\n(the format is in '%s --help')", err, PROG);
        Tq = f.Tq, Tk = f.Tk, d_k = f.d_k, d_v = f.d_v;
        Q = f.Q, K = f.K, V = f.V;
        if (!f.q_tokens) qlab_own = index_labels('q', Tq);
        if (!f.k_tokens) klab_own = index_labels('k', Tk);
        qlab = (const char *const *)(f.q_tokens ? f.q_tokens : qlab_own);
        klab = (const char *const *)(f.k_tokens ? f.k_tokens : klab_own);
        printf("Read from %s: %d queries, %d keys, d_k = %d, d_v = %d.\n", input, Tq, Tk, d_k, d_v);
    } else {
        Tq = Tk = SENT_T;
        Q = malloc(sizeof(float) * Tq * d_k);
        K = malloc(sizeof(float) * Tk * d_k);
        V = malloc(sizeof(float) * Tk * d_v);
        if (!Q || !K || !V) cli_fail(PROG, "out of memory");
        Rng rng;
        rng_seed(&rng, seed);
        seeded_qkv(Q, K, V, SENT_T, d_k, d_v, &rng);
        qlab = klab = SENTENCE;
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
    print_shape(Q, "Q", "query d_k", Tq, d_k, "one row per query");
    print_shape(K, "K", "key d_k", Tk, d_k, "one row per key (same width d_k: q.k must exist)");
    print_shape(V, "V", "key d_v", Tk, d_v, "one row per key (d_v need not equal d_k)");
    show_matrix("Q", Q, Tq, d_k, qlab, NULL);
    show_matrix("K", K, Tk, d_k, klab, NULL);
    show_matrix("V", V, Tk, d_v, klab, NULL);

    float *scores = malloc(sizeof(float) * Tq * Tk);    /* (Tq,Tk) */
    float *scaled = malloc(sizeof(float) * Tq * Tk);    /* (Tq,Tk) */
    float *weights = malloc(sizeof(float) * Tq * Tk);   /* (Tq,Tk) */
    float *out = malloc(sizeof(float) * Tq * d_v);      /* (Tq,d_v) */
    float *w_lib = malloc(sizeof(float) * Tq * Tk);     /* (Tq,Tk) */
    float *out_lib = malloc(sizeof(float) * Tq * d_v);  /* (Tq,d_v) */
    if (!scores || !scaled || !weights || !out || !w_lib || !out_lib) cli_fail(PROG, "out of memory");

    /* ---- 2. scores = Q K^T --------------------------------------------------- */
    show_section("2. scores = Q K^T: every query dotted with every key");
    for (int i = 0; i < Tq; i++)
        for (int j = 0; j < Tk; j++) {
            float s = 0.0f;
            for (int c = 0; c < d_k; c++) s += Q[i * d_k + c] * K[j * d_k + c];
            scores[i * Tk + j] = s;
        }
    print_shape(scores, "scores", "query key", Tq, Tk, "= Q [query, d_k] x K^T [d_k, key]");
    show_matrix("scores (row = query, column = key)", scores, Tq, Tk, qlab, klab);

    /* ---- 3. scale -------------------------------------------------------------- */
    show_section("3. scaled = scores / sqrt(d_k)");
    float inv = 1.0f / sqrtf((float)d_k);
    for (int i = 0; i < Tq * Tk; i++) scaled[i] = scores[i] * inv;
    printf("d_k = %d, sqrt(d_k) = %.4f. Why: a dot product of d_k terms with unit\n"
           "variance has variance d_k; dividing by sqrt(d_k) keeps the scores near 1\n"
           "so softmax does not saturate (Section 3.2.1; chapters 01 and 02).\n",
           d_k, sqrt((double)d_k));
    print_shape(scaled, "scaled", "query key", Tq, Tk, NULL);
    show_matrix("scaled scores", scaled, Tq, Tk, qlab, klab);

    /* ---- 4. softmax ------------------------------------------------------------ */
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

    /* The row worked out by hand: "it" in the seeded example; for a file,
     * the query whose attention is most focused (largest single weight). */
    int star = input ? 0 : IT, star_key = 0;
    float best = -1.0f;
    for (int i = 0; i < Tq; i++)
        for (int j = 0; j < Tk; j++)
            if ((input || i == IT) && weights[i * Tk + j] > best) {
                best = weights[i * Tk + j];
                star = i;
                star_key = j;
            }
    printf("%s \"%s\"%s gives %.1f%% of its attention to \"%s\".\n", input ? "The most focused query," : "Query",
           qlab[star], input ? "," : "", 100.0 * best, klab[star_key]);
    printf("Its score for \"%s\" written out, q . k =\n   ", klab[star_key]);
    for (int c = 0; c < d_k && c < 4; c++)
        printf("%s(%.3f)(%.3f)", c ? " + " : "", (double)Q[star * d_k + c], (double)K[star_key * d_k + c]);
    printf("%s\n   = %.4f;  / sqrt(d_k) = / %.4f -> %.4f\n", d_k > 4 ? " + ..." : "", (double)scores[star * Tk + star_key],
           sqrt((double)d_k), (double)scaled[star * Tk + star_key]);

    /* ---- 5. out = weights V --------------------------------------------------- */
    show_section("5. out = weights V: each output row is a weighted mix of V's rows");
    for (int i = 0; i < Tq; i++)
        for (int c = 0; c < d_v; c++) {
            float s = 0.0f;
            for (int j = 0; j < Tk; j++) s += weights[i * Tk + j] * V[j * d_v + c];
            out[i * d_v + c] = s;
        }
    print_shape(out, "out", "query d_v", Tq, d_v, "= weights [query, key] x V [key, d_v]");
    show_matrix("out", out, Tq, d_v, qlab, NULL);
    printf("Row \"%s\" worked out (terms sorted by weight, largest first):\n", qlab[star]);
    {
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
            printf("%s]   v of \"%s\"\n", d_v > 4 ? ", ..." : "", klab[j]);
        }
        if (Tk > shown_terms) printf("  + %d smaller terms\n", Tk - shown_terms);
        printf("  = [");
        for (int c = 0; c < d_v && c < 6; c++) printf("%s%.4f", c ? ", " : "", mix[c]);
        printf("%s]   (row \"%s\" of out above)\n", d_v > 6 ? ", ..." : "", qlab[star]);
        free(order);
        free(mix);
    }

    /* ---- 6. the library -------------------------------------------------------- */
    show_section("6. Eq. (1) in the library: sdpa_forward (common/attention.c)");
    sdpa_forward(out_lib, w_lib, Q, K, V, NULL, 1, 1, Tq, Tk, d_k, d_v);
    Diff dw = diff_arrays(w_lib, weights, (size_t)Tq * Tk);
    Diff dout = diff_arrays(out_lib, out, (size_t)Tq * d_v);
    printf("sdpa_forward does steps 2-5 with gemm() and the library softmax, for a\n"
           "whole batch and every head at once ([batch=1, heads=1] here).\n");
    printf("  weights: max |library - step by step| = %.3g\n", dw.max_abs);
    printf("  out:     max |library - step by step| = %.3g\n", dout.max_abs);
    /* qkv_load refuses inputs whose scores overflow float32, so a
     * difference here is not the input's fault; still, say what was seen */
    int agree = dw.max_abs < 1e-5 && dout.max_abs < 1e-4;
    printf("  %s (float32 rounding in a different summation order is ~1e-7)\n",
           agree ? "they agree" : "THEY DISAGREE by more than float32 rounding explains");
    if (dev == DEVICE_CUDA) {
        /* the same call on the GPU: upload Q, K, V, cuda_sdpa_forward, download */
        float *w_gpu = malloc(sizeof(float) * Tq * Tk), *out_gpu = malloc(sizeof(float) * Tq * d_v);
        if (!w_gpu || !out_gpu) cli_fail(PROG, "out of memory");
        if (gpu_sdpa_forward_host(out_gpu, w_gpu, Q, K, V, NULL, 1, 1, Tq, Tk, d_k, d_v, err, sizeof err))
            cli_fail(PROG, "--device cuda: %s", err);
        Diff gw = diff_arrays(w_gpu, w_lib, (size_t)Tq * Tk), go = diff_arrays(out_gpu, out_lib, (size_t)Tq * d_v);
        printf("  GPU vs CPU: max |diff| = %.3g (weights), %.3g (out)  [cuda_sdpa_forward, cuda/attention.cu]\n",
               gw.max_abs, go.max_abs);
        agree &= gw.max_abs < 1e-5 && go.max_abs < 1e-4;
        free(w_gpu);
        free(out_gpu);
    }

    free(scores); free(scaled); free(weights); free(out); free(w_lib); free(out_lib);
    free(qlab_own); free(klab_own);
    if (input) qkv_free(&f);
    else { free(Q); free(K); free(V); }
    return agree ? 0 : 1;
}
