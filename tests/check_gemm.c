/* check_gemm.c - the fast gemm() against the reference triple loop gemm_ref().
 *
 * gemm() packs, blocks and tiles (common/fast/gemm.c, gemm_kernel.c); every
 * one of those steps has an edge case: sizes that are not multiples of the
 * register tile (MR x NR), of the cache blocks (MC, KC, NC), of the thread
 * slabs; transposed inputs; leading dimensions wider than the matrix. The
 * sweep below hits sizes on both sides of each boundary (1, 2, 3, 7, 13,
 * 17, 31, 33, 64, 65, 127, 129, 255, 257, 511) with all four transpose
 * combinations.
 *
 * Tolerance: float sums of K products carry a rounding error of at most
 * about K * eps * sum_k |a_ik b_kj| (Higham, "Accuracy and Stability of
 * Numerical Algorithms", Sec. 3.1). The test computes that bound for every
 * element (gemm_ref on |A|, |B|, |C|) and asserts each error is under it, so
 * the tolerance grows with K as the true error does - and a missing or
 * doubled k block, which is off by O(1), fails.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include "fast/parallel.h"
#include "fast/gemm.h"
#include "ref/ops.h"
#include "core/rng.h"
#include "core/clock.h"
#include "testutil.h"

/* A matrix of rows x cols stored with leading dimension ld >= cols; the
 * padding columns hold NaN so that reading them poisons the result. */
static float *padded_matrix(Rng *rng, int rows, int cols, int ld) {
    float *x = malloc(sizeof(float) * ((size_t)rows * ld + 1));
    ck_assert_ptr_nonnull(x);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < ld; j++)
            x[(size_t)i * ld + j] = j < cols ? rng_uniform(rng) * 2.0f - 1.0f : NAN;
    return x;
}

static float *abs_copy(const float *x, size_t n) {
    float *y = malloc(sizeof(float) * (n + 1));
    ck_assert_ptr_nonnull(y);
    for (size_t i = 0; i < n; i++) y[i] = isnan(x[i]) ? 0.0f : fabsf(x[i]);
    return y;
}

/* Runs gemm and gemm_ref on one case and checks: every element within the
 * per-element rounding bound, padding columns of C untouched. pad adds that
 * many columns to every leading dimension. */
static void check_case(Rng *rng, int tA, int tB, int M, int N, int K, float alpha, float beta, int pad) {
    int ar = tA ? K : M, ac = tA ? M : K;     /* A as stored */
    int br = tB ? N : K, bc = tB ? K : N;     /* B as stored */
    int lda = ac + pad, ldb = bc + pad, ldc = N + pad;
    float *A = padded_matrix(rng, ar, ac, lda);
    float *B = padded_matrix(rng, br, bc, ldb);
    float *C = padded_matrix(rng, M, N, ldc);
    float *want = malloc(sizeof(float) * ((size_t)M * ldc + 1));
    memcpy(want, C, sizeof(float) * (size_t)M * ldc);
    float *Aa = abs_copy(A, (size_t)ar * lda), *Ba = abs_copy(B, (size_t)br * ldb);
    float *bound = abs_copy(C, (size_t)M * ldc);

    gemm(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    gemm_ref(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, want, ldc);
    gemm_ref(tA, tB, M, N, K, fabsf(alpha), Aa, lda, Ba, ldb, fabsf(beta), bound, ldc);

    double slack = (K + 4) * (double)FLT_EPSILON;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < ldc; j++) {
            size_t at = (size_t)i * ldc + j;
            /* plain ifs, ck_abort_msg only on failure: every ck_assert call
             * logs its location, which costs a write per element */
            if (j >= N) {   /* padding: must still be the NaN we put there */
                if (!isnan(C[at]))
                    ck_abort_msg("tA=%d tB=%d M=%d N=%d K=%d: C padding (%d,%d) was written",
                                 tA, tB, M, N, K, i, j);
                continue;
            }
            double err = fabs((double)C[at] - (double)want[at]);
            double tol = slack * bound[at] + 1e-30;
            if (!(err <= tol))
                ck_abort_msg("tA=%d tB=%d M=%d N=%d K=%d alpha=%g beta=%g ld pad %d: C[%d][%d] = %.9g, "
                             "reference %.9g, |diff| %.3g > bound %.3g",
                             tA, tB, M, N, K, alpha, beta, pad, i, j, C[at], want[at], err, tol);
        }
    }
    free(A); free(B); free(C); free(want); free(Aa); free(Ba); free(bound);
}

/* ---- Core: a product small enough to check by hand ------------------------ */
START_TEST(test_hand_checked) {
    /* [1 2 3; 4 5 6] @ [1 0; 0 1; 1 1] = [4 5; 10 11] */
    float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1};
    float At[6] = {1, 4, 2, 5, 3, 6}, Bt[6] = {1, 0, 1, 0, 1, 1};
    float want[4] = {4, 5, 10, 11};
    float C[4];
    gemm(0, 0, 2, 2, 3, 1.0f, A, 3, B, 2, 0.0f, C, 2);
    ck_assert_close_arrays(C, want, 4, 0.0);
    gemm(1, 0, 2, 2, 3, 1.0f, At, 2, B, 2, 0.0f, C, 2);
    ck_assert_close_arrays(C, want, 4, 0.0);
    gemm(0, 1, 2, 2, 3, 1.0f, A, 3, Bt, 3, 0.0f, C, 2);
    ck_assert_close_arrays(C, want, 4, 0.0);
    gemm(1, 1, 2, 2, 3, 1.0f, At, 2, Bt, 3, 0.0f, C, 2);
    ck_assert_close_arrays(C, want, 4, 0.0);
    /* alpha and beta: C = 2 * A B + 0.5 * C  = [8+2 10+2.5; 20+5 22+5.5] */
    float C2[4] = {4, 5, 10, 11}, want2[4] = {10, 12.5f, 25, 27.5f};
    gemm(0, 0, 2, 2, 3, 2.0f, A, 3, B, 2, 0.5f, C2, 2);
    ck_assert_close_arrays(C2, want2, 4, 0.0);
}
END_TEST

/* ---- Loop: the size sweep -------------------------------------------------- */
static const int sizes[] = {1, 2, 3, 7, 13, 17, 31, 33, 64, 65, 127, 129, 255, 257, 511};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Loop index i picks M = sizes[i] and pairs it with N and K further along
 * the list, so each size meets small and large partners; the 4 transposes
 * and a few alpha/beta/padding settings rotate with it. */
START_TEST(test_sweep) {
    Rng rng;
    rng_seed(&rng, 1000 + _i);
    static const float alphas[] = {1.0f, -0.5f, 2.0f}, betas[] = {0.0f, 1.0f, -1.5f};
    for (int step = 0; step < 3; step++) {
        int M = sizes[_i];
        int N = sizes[(_i * 7 + 4 * step + 3) % NSIZES];
        int K = sizes[(_i * 11 + 5 * step + 8) % NSIZES];
        /* keep the reference loop affordable (it also runs under valgrind) */
        while ((long)M * N * K > 2000000L) K = K / 2 + 1;
        for (int t = 0; t < 4; t++)
            check_case(&rng, t & 1, t >> 1, M, N, K, alphas[step], betas[(step + t) % 3], (_i + t) % 3 == 0 ? 0 : 3);
    }
}
END_TEST

/* Every size for one of M, N, K with the others fixed at awkward values, so
 * each of the three dimensions crosses every block boundary on its own. */
START_TEST(test_each_dimension) {
    Rng rng;
    rng_seed(&rng, 77 + _i);
    int s = sizes[_i];
    check_case(&rng, 0, 0, s, 33, 17, 1.0f, 0.0f, 1);
    check_case(&rng, 1, 1, 13, s, 65, 1.0f, 1.0f, 0);
    check_case(&rng, 0, 1, 31, 7, s, -1.0f, 0.5f, 2);
    check_case(&rng, 1, 0, 17, 129, s, 1.0f, 0.0f, 0);
}
END_TEST

/* Cache blocks crossed, threaded: M past MC (168 with AVX-512) with K past
 * KC (256, for a C this small) twice, and five times; N past NC (256). */
START_TEST(test_big_blocks) {
    Rng rng;
    rng_seed(&rng, 5);
    check_case(&rng, 0, 0, 181, 97, 523, 1.0f, 0.0f, 0);
    check_case(&rng, 0, 1, 15, 1061, 300, 1.0f, 0.0f, 1);
    check_case(&rng, 1, 1, 350, 97, 300, 0.5f, 1.0f, 5);   /* M > N: threads split rows */
    check_case(&rng, 1, 0, 20, 45, 1100, 1.0f, -1.5f, 3);  /* five KC blocks */
}
END_TEST

/* A row of C gets the same bits whichever tile it falls in: the first m
 * rows of a product of 28 rows (two full 14-row tiles with AVX-512) against
 * the product of those m rows alone, where they make a ragged tile (its
 * kernel does only the rows it has, rounded up: 2, 4, 8 or 14), for A
 * transposed or not, over two KC blocks, with ragged columns too. */
START_TEST(test_edge_tiles_bits) {
#ifdef USE_OPENBLAS
    test_skip("gemm", "edge tiles: this build's gemm() is OpenBLAS (BLAS=openblas)");
    return;
#endif
    Rng rng;
    rng_seed(&rng, 14);
    int M = 28, N = 45, K = 300;
    for (int tA = 0; tA < 2; tA++) {
        float *A = padded_matrix(&rng, tA ? K : M, tA ? M : K, tA ? M : K);
        float *B = padded_matrix(&rng, K, N, N);
        float *full = malloc(sizeof(float) * M * N), *part = malloc(sizeof(float) * M * N);
        gemm(tA, 0, M, N, K, 1.0f, A, tA ? M : K, B, N, 0.0f, full, N);
        for (int m = 1; m <= 14; m++) {
            gemm(tA, 0, m, N, K, 1.0f, A, tA ? M : K, B, N, 0.0f, part, N);
            ck_assert_msg(memcmp(part, full, sizeof(float) * m * N) == 0,
                          "tA=%d: the first %d rows alone differ from the same rows in a full tile", tA, m);
        }
        free(A); free(B); free(full); free(part);
    }
}
END_TEST

/* Rows of A a multiple of 4 KiB apart collide in L1, so gemm() packs such
 * an A instead of reading it in place (gemm_kernel.h: a_rows_collide), and cuts
 * C in wider chunks. The result must not tell: the same A stored 1024
 * floats apart and 1000 apart gives the same bits, with C wider than an
 * NC panel, K in 4 KC blocks and a ragged last tile of rows (100 = 7 x 14
 * + 2), and both are right. */
START_TEST(test_packed_a_bits) {
    Rng rng;
    rng_seed(&rng, 15);
    int M = 100, N = 520, K = 1000;
    float *A = padded_matrix(&rng, M, K, 1024), *B = padded_matrix(&rng, K, N, N);
    float *A2 = malloc(sizeof(float) * M * K);
    for (int i = 0; i < M; i++) memcpy(A2 + (size_t)i * K, A + (size_t)i * 1024, sizeof(float) * K);
    float *packed = malloc(sizeof(float) * M * N), *in_place = malloc(sizeof(float) * M * N);
    gemm(0, 0, M, N, K, 1.0f, A, 1024, B, N, 0.0f, packed, N);
    gemm(0, 0, M, N, K, 1.0f, A2, K, B, N, 0.0f, in_place, N);
    ck_assert_msg(memcmp(packed, in_place, sizeof(float) * M * N) == 0,
                  "A with rows 4 KiB apart (packed) differs from the same A read in place");
    free(A); free(A2); free(B); free(packed); free(in_place);
    check_case(&rng, 0, 0, M, N, K, 1.0f, 0.5f, 24);   /* lda = 1024 */
    check_case(&rng, 0, 1, 30, 70, 2048, 1.0f, 0.0f, 0);   /* lda = 2048, B transposed */
}
END_TEST

/* ---- Limits ------------------------------------------------------------------ */
START_TEST(test_beta_zero_ignores_garbage) {
    /* beta == 0: C is output only; NaN and inf already there must vanish. */
    Rng rng;
    rng_seed(&rng, 9);
    int M = 37, N = 45, K = 29;
    float *A = padded_matrix(&rng, M, K, K), *B = padded_matrix(&rng, K, N, N);
    float *C = malloc(sizeof(float) * M * N), *want = malloc(sizeof(float) * M * N);
    for (int i = 0; i < M * N; i++) C[i] = i % 2 ? NAN : INFINITY;
    gemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
    gemm_ref(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, want, N);
    for (int i = 0; i < M * N; i++)
        if (!isfinite(C[i])) ck_abort_msg("C[%d] = %g: garbage in C leaked through beta = 0", i, C[i]);
    ck_assert_close_arrays(C, want, (size_t)M * N, 1e-5);
    free(A); free(B); free(C); free(want);
}
END_TEST

START_TEST(test_k_zero_and_alpha_zero) {
    /* K == 0: the sum is empty, so C = beta * C; A and B are not read. */
    float C[6] = {1, 2, 3, 4, 5, 6}, half[6] = {0.5f, 1, 1.5f, 2, 2.5f, 3}, zero[6] = {0};
    gemm(0, 0, 2, 3, 0, 1.0f, NULL, 1, NULL, 3, 0.5f, C, 3);
    ck_assert_close_arrays(C, half, 6, 0.0);
    float G[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    gemm(1, 1, 2, 3, 0, 1.0f, NULL, 2, NULL, 1, 0.0f, G, 3);
    ck_assert_close_arrays(G, zero, 6, 0.0);
    /* alpha == 0 with beta == 1 leaves C as it was (A, B not read) */
    gemm(0, 0, 2, 3, 4, 0.0f, NULL, 4, NULL, 3, 1.0f, C, 3);
    ck_assert_close_arrays(C, half, 6, 0.0);
    /* M == 0 or N == 0: nothing to do, nothing touched */
    gemm(0, 0, 0, 3, 4, 1.0f, NULL, 4, NULL, 3, 0.0f, NULL, 3);
    gemm(0, 0, 2, 0, 4, 1.0f, NULL, 4, NULL, 1, 0.0f, NULL, 1);
}
END_TEST

START_TEST(test_vectors) {
    /* M = 1 (a row vector times a matrix) and N = 1 (matrix times a column) */
    Rng rng;
    rng_seed(&rng, 3);
    check_case(&rng, 0, 0, 1, 300, 200, 1.0f, 0.0f, 0);
    check_case(&rng, 0, 1, 300, 1, 200, 1.0f, 1.0f, 2);
    check_case(&rng, 1, 0, 1, 1, 1000, 1.0f, 0.0f, 1);
}
END_TEST

/* ---- No memory ------------------------------------------------------------------
 * gemm() keeps one packing workspace per thread, made on first use. With no
 * memory for it, gemm() must not end the program (it is library code): it
 * computes the product with gemm_ref's loop instead, so the answer is then
 * gemm_ref's to the bit. The memory is taken away with an address-space limit
 * just above what the process has mapped, inside the child process Check runs
 * the test in, for a thread that has not called gemm yet (so it has no
 * workspace; it is started before the limit, which would refuse its stack).
 * Skipped under AddressSanitizer (its allocator aborts under such a limit
 * instead of returning NULL) and with CK_FORK=no (the limit would outlive
 * the test). */
typedef struct {
    const float *A, *B;
    float *C;
    int M, N, K;
    pthread_barrier_t *go;
} GemmJob;

static void *gemm_job(void *arg) {
    GemmJob *j = arg;
    pthread_barrier_wait(j->go);          /* wait for the limit */
    gemm(0, 0, j->M, j->N, j->K, 1.0f, j->A, j->K, j->B, j->N, 0.0f, j->C, j->N);
    return NULL;
}

START_TEST(test_no_memory_for_workspace) {
#if defined(__SANITIZE_ADDRESS__)
    test_skip("gemm", "the no-memory test under AddressSanitizer");
    return;
#endif
#ifdef USE_OPENBLAS
    /* OpenBLAS has buffers of its own and exits when it cannot get them */
    test_skip("gemm", "the no-memory test: this build's gemm() is OpenBLAS");
    return;
#endif
    const char *fork_env = getenv("CK_FORK");
    if (fork_env && strcmp(fork_env, "no") == 0) {
        test_skip("gemm", "the no-memory test under CK_FORK=no");
        return;
    }
    enum { M = 37, N = 45, K = 301 };
    Rng rng;
    rng_seed(&rng, 21);
    float *A = padded_matrix(&rng, M, K, K), *B = padded_matrix(&rng, K, N, N);
    float *C = malloc(sizeof(float) * M * N), *R = malloc(sizeof(float) * M * N);
    float *F = malloc(sizeof(float) * M * N);
    gemm_ref(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, R, N);
    gemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, F, N);
    /* the packed kernel rounds differently from gemm_ref somewhere, so the
     * bit comparison below can tell which of the two ran */
    ck_assert_msg(memcmp(F, R, sizeof(float) * M * N) != 0, "gemm and gemm_ref agree to the bit here");

    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    GemmJob job = {A, B, C, M, N, K, &go};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, gemm_job, &job), 0);
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%ld", &pages), 1);
    fclose(f);
    /* 64 KiB more than is mapped now: less than the 1 MiB workspace */
    struct rlimit lim = {.rlim_cur = (rlim_t)pages * sysconf(_SC_PAGESIZE) + (64 << 10)};
    struct rlimit old;
    getrlimit(RLIMIT_AS, &old);
    lim.rlim_max = old.rlim_max;
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
    /* qemu-user (make test-arm64) accepts the limit and ignores it: if 2 MiB
     * can still be had, gemm will find its workspace and nothing is tested */
    void *probe = mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int binds = probe == MAP_FAILED;
    if (!binds) munmap(probe, 2 << 20);
    pthread_barrier_wait(&go);
    pthread_join(t, NULL);
    setrlimit(RLIMIT_AS, &old);
    if (binds)
        ck_assert_msg(memcmp(C, R, sizeof(float) * M * N) == 0, "without a workspace gemm should give gemm_ref's answer");
    else
        test_skip("gemm", "the no-memory test: RLIMIT_AS has no effect here (qemu-user ignores it)");
    pthread_barrier_destroy(&go);
    free(A); free(B); free(C); free(R); free(F);
}
END_TEST

/* ---- Determinism ----------------------------------------------------------------
 * Same inputs, same bits: twice in a row, and with 1 thread versus all. */
START_TEST(test_deterministic) {
    Rng rng;
    rng_seed(&rng, 11);
    int M = 150, N = 301, K = 300;   /* 13.5M multiply-adds: above the threading threshold */
    float *A = padded_matrix(&rng, K, M, M), *B = padded_matrix(&rng, N, K, K);
    float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
    gemm(1, 1, M, N, K, 1.0f, A, M, B, K, 0.0f, C1, N);
    gemm(1, 1, M, N, K, 1.0f, A, M, B, K, 0.0f, C2, N);
    ck_assert_msg(memcmp(C1, C2, sizeof(float) * M * N) == 0, "two identical calls differ");
    /* 1 thread versus all (when more than one is allowed: under valgrind
     * the suite runs with OMP_NUM_THREADS=1, see the Makefile) */
    int threads = parallel_threads();
    if (threads > 1) {
        parallel_set_threads(1);
        gemm(1, 1, M, N, K, 1.0f, A, M, B, K, 0.0f, C2, N);
        parallel_set_threads(threads);
        ck_assert_msg(memcmp(C1, C2, sizeof(float) * M * N) == 0, "1 thread differs from %d", threads);
    }
    free(A); free(B); free(C1); free(C2);
}
END_TEST

/* A C of 1 MiB or more (512 x 512 here) is summed in deeper blocks (gemm.c:
 * kc_of), and the depth is the whole product's: cut into chunks of 128
 * columns, each under 1 MiB, it must still give 1 thread's bits, and
 * gemm_many the same as gemm(). */
START_TEST(test_deterministic_big_c) {
    Rng rng;
    rng_seed(&rng, 13);
    int M = 512, N = 512, K = 600;   /* two blocks of 512, or three of 256 */
    float *A = padded_matrix(&rng, M, K, K), *B = padded_matrix(&rng, K, N, N);
    float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
    gemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
    gemm_many(1, &(GemmArgs){0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C2, N});
    ck_assert_msg(memcmp(C1, C2, sizeof(float) * M * N) == 0, "gemm_many differs from gemm");
    int threads = parallel_threads();
    parallel_set_threads(threads > 1 ? 1 : 2);
    gemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C2, N);
    parallel_set_threads(threads);
    ck_assert_msg(memcmp(C1, C2, sizeof(float) * M * N) == 0, "1 and 2 threads differ");
    free(A); free(B); free(C1); free(C2);
}
END_TEST

/* gemm_many: several products in one job give each gemm()'s bits, small
 * (one chunk each) and large (cut in chunks), transposed or not, beta 0
 * and 1, with a degenerate one (K = 0) among them, on 1 thread and all. */
START_TEST(test_many_matches_gemm) {
    Rng rng;
    rng_seed(&rng, 12);
    struct { int tA, tB, M, N, K; float beta; } c[4] = {
        {0, 0, 1280, 64, 64, 0.0f}, {1, 0, 64, 64, 1280, 1.0f}, {0, 1, 200, 300, 150, 1.0f}, {0, 0, 7, 9, 0, 0.5f}};
    float *A[4], *B[4], *C1[4], *C2[4];
    GemmArgs g[4];
    for (int i = 0; i < 4; i++) {
        int M = c[i].M, N = c[i].N, K = c[i].K > 0 ? c[i].K : 1;
        A[i] = padded_matrix(&rng, c[i].tA ? K : M, c[i].tA ? M : K, c[i].tA ? M : K);
        B[i] = padded_matrix(&rng, c[i].tB ? N : K, c[i].tB ? K : N, c[i].tB ? K : N);
        C1[i] = padded_matrix(&rng, M, N, N);
        C2[i] = malloc(sizeof(float) * M * N);
        memcpy(C2[i], C1[i], sizeof(float) * M * N);
        g[i] = (GemmArgs){c[i].tA, c[i].tB, M, N, c[i].K, 1.0f, A[i], c[i].tA ? M : K, B[i], c[i].tB ? K : N,
                          c[i].beta, C2[i], N};
    }
    for (int i = 0; i < 4; i++)
        gemm(g[i].transA, g[i].transB, g[i].M, g[i].N, g[i].K, 1.0f, g[i].A, g[i].lda, g[i].B, g[i].ldb,
             g[i].beta, C1[i], g[i].ldc);
    int threads = parallel_threads();
    for (int t = 0; t < 2; t++) {
        parallel_set_threads(t == 0 ? 1 : (threads > 1 ? threads : 2));
        float *saved[4];   /* C before the products, restored after each round */
        for (int i = 0; i < 4; i++) {
            saved[i] = malloc(sizeof(float) * c[i].M * c[i].N);
            memcpy(saved[i], C2[i], sizeof(float) * c[i].M * c[i].N);
        }
        gemm_many(4, g);
        for (int i = 0; i < 4; i++) {
            ck_assert_msg(memcmp(C1[i], C2[i], sizeof(float) * c[i].M * c[i].N) == 0,
                          "round %d: product %d differs from gemm()", t, i);
            memcpy(C2[i], saved[i], sizeof(float) * c[i].M * c[i].N);   /* back to the start */
            free(saved[i]);
        }
    }
    parallel_set_threads(threads);
    for (int i = 0; i < 4; i++) {
        free(A[i]); free(B[i]); free(C1[i]); free(C2[i]);
    }
}
END_TEST

/* Cut along K (a small model's weight gradient; gemm.c): blocks of rows
 * that a worker summed aside and the caller then added in order give the
 * bits of one thread's gemm, for every kind of alpha and beta (beta = 0
 * over NaN), K not a multiple of KC, A or B transposed, through gemm() and
 * gemm_many(). The rounds go on until a worker has kept blocks aside (it
 * takes blocks from the back while the caller takes them from the front),
 * so the test fails if that path never ran. */
START_TEST(test_cut_along_k) {
#if defined(USE_OPENBLAS)
    test_skip("gemm", "cut along K: this build's gemm() is OpenBLAS (BLAS=openblas)");
#else
    /* at least 2 threads (the pool is POSIX threads, with OpenMP or without) */
    int threads = parallel_threads(), team = threads > 1 ? threads : 2;
    Rng rng;
    rng_seed(&rng, 13);
    struct { int tA, tB, M, N, K; float alpha, beta; } c[4] = {
        {1, 0, 64, 192, 1280, 1.0f, 1.0f},     /* chapter 08's dW = X^T dY (+=)        */
        {1, 1, 48, 37, 1100, -0.5f, 0.0f},     /* C holds NaN: beta = 0 must not read it */
        {0, 0, 30, 64, 777, 2.0f, -1.5f},
        {0, 1, 17, 45, 600, 1.0f, 0.5f}};
    float *A[4], *B[4], *C0[4], *want[4], *got[4];
    GemmArgs g[4];
    for (int i = 0; i < 4; i++) {
        int M = c[i].M, N = c[i].N, K = c[i].K;
        A[i] = padded_matrix(&rng, c[i].tA ? K : M, c[i].tA ? M : K, c[i].tA ? M : K);
        B[i] = padded_matrix(&rng, c[i].tB ? N : K, c[i].tB ? K : N, c[i].tB ? K : N);
        C0[i] = padded_matrix(&rng, M, N, N);
        if (c[i].beta == 0.0f)
            for (int e = 0; e < M * N; e++) C0[i][e] = NAN;
        want[i] = malloc(sizeof(float) * M * N);
        got[i] = malloc(sizeof(float) * M * N);
        memcpy(want[i], C0[i], sizeof(float) * M * N);
        g[i] = (GemmArgs){c[i].tA, c[i].tB, M, N, K, c[i].alpha, A[i], c[i].tA ? M : K, B[i], c[i].tB ? K : N,
                          c[i].beta, got[i], N};
        parallel_set_threads(1);
        gemm(g[i].transA, g[i].transB, M, N, K, g[i].alpha, g[i].A, g[i].lda, g[i].B, g[i].ldb, g[i].beta, want[i], N);
    }
    parallel_set_threads(team);
    /* rounds until a worker kept a block aside, for up to 5 s: on a busy
     * machine a worker may get no turn for a while and then takes no chunk
     * (the caller does them all: parallel.c), and a round takes microseconds */
    long before = gemm_blocks_kept_aside();
    double t0 = clock_wall_s();
    int rounds = 0;
    for (; clock_wall_s() - t0 < 5 && (rounds < 4 || gemm_blocks_kept_aside() == before); rounds++) {
        for (int i = 0; i < 4; i++) {
            memcpy(got[i], C0[i], sizeof(float) * c[i].M * c[i].N);
            if (rounds % 2) gemm_many(1, &g[i]);
            else gemm(g[i].transA, g[i].transB, g[i].M, g[i].N, g[i].K, g[i].alpha, g[i].A, g[i].lda, g[i].B,
                      g[i].ldb, g[i].beta, got[i], g[i].ldc);
            ck_assert_msg(memcmp(got[i], want[i], sizeof(float) * c[i].M * c[i].N) == 0,
                          "round %d, product %d: %d threads differ from 1", rounds, i, team);
        }
    }
    parallel_set_threads(threads);
    ck_assert_msg(gemm_blocks_kept_aside() > before, "no block was kept aside in %d rounds (5 s)", rounds);
    for (int i = 0; i < 4; i++) {
        free(A[i]); free(B[i]); free(C0[i]); free(want[i]); free(got[i]);
    }
#endif
}
END_TEST

Suite *gemm_suite(void) {
    Suite *s = suite_create("gemm");
    suite_case(s, "Core", test_hand_checked);
    TCase *loop = suite_case(s, "Loop", test_big_blocks, test_edge_tiles_bits, test_packed_a_bits);
    tcase_add_loop_test(loop, test_sweep, 0, NSIZES);
    tcase_add_loop_test(loop, test_each_dimension, 0, NSIZES);
    tcase_set_timeout(loop, 120);
    suite_case(s, "Limits", test_beta_zero_ignores_garbage, test_k_zero_and_alpha_zero,
               test_vectors, test_no_memory_for_workspace);
    TCase *det = suite_case(s, "Determinism", test_deterministic, test_deterministic_big_c,
                            test_many_matches_gemm, test_cut_along_k);
    tcase_set_timeout(det, 60);
    return s;
}
