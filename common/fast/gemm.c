/* gemm.c - the fast matrix multiply every layer calls.
 *
 *   C = alpha * op(A) @ op(B) + beta * C        (BLAS sgemm, row-major; see gemm.h)
 *
 * Every linear layer of the Transformer is one of these: x W_Q, x W_1 (Eq. 2),
 * the output projection onto the vocabulary (Sec. 3.4), and in the backward
 * pass dX = dY W^T and dW = X^T dY. Almost all of a training step's time is
 * spent here, so this file and gemm_kernel.c are where speed comes from.
 * gemm_ref() in ref/ops.c is the three-loop version that says WHAT is
 * computed; these two files say how to compute the same thing 50-100x
 * faster on a CPU. bench/README.md measures each step below.
 *
 * Why the triple loop is slow: per multiply-add it loads two numbers, and
 * for large matrices those loads miss the caches. A core can do 2 fused
 * multiply-adds (FMA) on 16 floats each per cycle (AVX-512), i.e. 64 flops
 * per cycle, but it can only load ~2 vectors per cycle from L1 and far fewer
 * from memory. The cure (Goto & van de Geijn 2008, "Anatomy of
 * High-Performance Matrix Multiplication"; BLIS) has four layers:
 *
 *  1. Micro-kernel in registers. Keep an MR x NR tile of C in vector
 *     registers (AVX-512: 14 rows x 32 columns = 28 zmm registers of the 32)
 *     and walk k: each step loads one row of NR B values (2 vectors) and
 *     broadcasts MR A values, then does MR*NR/16 = 28 FMAs. 28 FMAs per 16
 *     loads: the FMA units, not the loads, are the limit. 28 independent
 *     accumulators also hide the FMA latency (4 cycles x 2 units = at least
 *     8 needed in flight). AVX2 (8 floats a register, 16 registers): a
 *     6 x 16 tile in 12 ymm registers, 12 FMAs per 8 loads.
 *  2. Packing. The micro-kernel wants A's MR values for one k, and B's NR
 *     values for one k, next to each other in memory. Copying ("packing")
 *     a block of A and a block of B into that order once costs O(MK + KN);
 *     the kernel then reads them O(MNK / tile) times as unit-stride streams
 *     with no TLB or cache-set conflicts. Packing also absorbs transA /
 *     transB and lda/ldb, so there is one kernel for all four cases, and it
 *     zero-pads the ragged edges so the kernel never branches inside its loop.
 *     (With AVX-512, full 14-row tiles of A turned out faster read in place
 *     - the kernel broadcasts each value straight from A - so only B and a
 *     ragged last tile of A are packed, unless A's rows are a multiple of
 *     4 KiB apart, which is the cache-set conflict above: a_rows_collide.
 *     AVX2 does the same with its 6-row tiles, except that a transposed A
 *     is packed: a_in_place.)
 *  3. Cache blocking. Choose the packed blocks to fit the caches (kc, the
 *     depth of a block of the sum, is 256, or 512 for a C of 1 MiB or more):
 *       MR x kc  A tile         in L1/L2 (14*512*4 = 28 KiB; L1 is 48 KiB)
 *       kc x NC  B panel        stays in L2 (512*256*4 = 512 KiB of 1-2 MiB)
 *       MC x kc  A block        packed (with AVX-512 only a ragged last tile, mostly)
 *     so every float brought from memory is used many times before it leaves.
 *     A big C gets the deep block although its B micro-panel then streams
 *     from L2 (per k the kernel reads 128 bytes of it for 28 FMAs, 14
 *     cycles, which L2 serves easily): every block means one more pass over
 *     a C tile that is not in cache (below, KC).
 *  4. Threads. The C matrix is cut into chunks of whole tiles along its
 *     columns (3 per thread) or rows (1 per thread); the threads take
 *     chunks in turn (parallel_run), each with its own packing buffers. A
 *     small C summed over many rows (a small model's weight gradient) is
 *     cut along K instead, in blocks of kc rows (see "cut along K").
 *
 * Steps 1-3 are one thread's product, in gemm_kernel.c (gemm_blocked; the
 * block sizes MR, NR, KC, MC, NC are at the top of gemm_kernel.h). This
 * file is step 4: the workspaces, the cutting of C among the threads,
 * gemm() itself, gemm_many() and the cut along K.
 *
 * Determinism: every C element is summed in the same order - blocks of k
 * as deep as the whole product's kc, in increasing order, k increasing
 * inside a block, one FMA per k - whatever the thread count, the slab
 * boundaries or whether its tile is at an edge (a cut along K adds its
 * blocks to C in that order too). So the result
 * is bit-for-bit the same for the same inputs, with 1 or 64 threads.
 * (Different builds - AVX-512, AVX2, portable - round differently.)
 *
 * Memory: ops never allocate per call. Each thread that calls gemm gets one
 * packing workspace (A block + B panel, about 0.85 MiB with AVX-512), made
 * the first time that thread needs it, kept for the next call, and freed at
 * exit by an atexit handler that owns the list of all workspaces. So the
 * memory is bounded by (threads that ever ran gemm) x 0.85 MiB, plus up to
 * 4 MiB per calling thread for blocks of a cut along K kept aside.
 */
#include "fast/gemm.h"
#include "fast/gemm_kernel.h"
#include "fast/parallel.h"
#include "ref/ops.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef USE_OPENBLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef USE_OPENBLAS

/* Below this many multiply-adds (about 5 microseconds of one core's work)
 * one thread does the whole product. Handing chunks to the pool's spinning
 * worker costs well under a microsecond; on a busy machine a worker that
 * is not running takes no chunk and costs nothing (parallel_run), so this
 * can be low enough that chapter 08's d_model = 64 layers are shared. */
#define GEMM_MIN_PARALLEL (1L << 19)

/* Chunks per thread when a product is shared (see gemm, cut_along_n). Cut
 * along N, each chunk packs only its own columns of B, and several per
 * thread let a faster core do more of them. Cut along M, each chunk packs
 * all of B again, so one chunk per thread (at 800x2048 . 2048x512, before
 * such products were cut along N: 459 against 423 GFLOP/s with three). */
#define GEMM_CHUNKS_PER_THREAD 3
#define GEMM_CHUNKS_PER_THREAD_M 1
#define GEMM_CUT_N_MIN 512
#define GEMM_MIN_CHUNK_TILES 4
#define GEMM_MIN_CHUNK_TILES_PACKED_A (NC / NR)   /* a whole B panel: see a_in_place */

/* ---- per-thread packing workspace ------------------------------------------ */
/* initial-exec: a fixed offset from the thread pointer, also in the CUDA
 * shim (a dlopen()ed copy of the library), whose dynamic TLS blocks
 * LeakSanitizer fails to scan in the pool's worker threads */
static _Thread_local Workspace *tls_ws __attribute__((tls_model("initial-exec")));   /* this thread's, or NULL */
static Workspace *all_ws;                 /* owner of every workspace  */
static pthread_mutex_t ws_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;

static void ws_free_all(void) {
    pthread_mutex_lock(&ws_lock);
    while (all_ws) {
        Workspace *w = all_ws;
        all_ws = w->next;
        free(w->a);
        free(w->b);
        free(w->aside);
        free(w);
    }
    pthread_mutex_unlock(&ws_lock);
}

static void ws_register_exit(void) { atexit(ws_free_all); }

/* This thread's workspace, made on first use; NULL when there is no memory
 * for one. A library must not end the program over that, and gemm() has no
 * error to return: its caller then does the product with gemm_ref(), which
 * needs no memory (see gemm_part). Said once on stderr, since that is much
 * slower. */
static Workspace *ws_get(void) {
    if (tls_ws) return tls_ws;
    pthread_once(&ws_once, ws_register_exit);
    Workspace *w = calloc(1, sizeof *w);
    /* 64-byte alignment: one packed row of NR floats starts a cache line,
     * so the kernel's aligned vector loads never split a line. */
    if (w) w->a = aligned_alloc(64, sizeof(float) * (MC * KC_MAX + A_SLACK));
    if (w && w->a) w->b = aligned_alloc(64, sizeof(float) * KC_MAX * NC);
    if (!w || !w->a || !w->b) {
        static atomic_flag warned = ATOMIC_FLAG_INIT;
        if (!atomic_flag_test_and_set(&warned))
            fprintf(stderr, "warning: no memory for the matrix-multiply buffers (%zu KiB): "
                    "using gemm_ref's triple loop (slow)\n", sizeof(float) * (MC * KC_MAX + KC_MAX * NC) / 1024);
        if (w) free(w->a);
        free(w);
        return NULL;
    }
    pthread_mutex_lock(&ws_lock);
    w->next = all_ws;
    all_ws = w;
    pthread_mutex_unlock(&ws_lock);
    tls_ws = w;
    return w;
}

/* The depth of the blocks of the sum for a product with C (M, N): see KC. */
static int kc_of(int M, int N) { return (long)M * N >= KC_BIG_MIN_C ? KC_BIG : KC; }

/* One thread's part of a product: the blocked kernel with this thread's
 * workspace, in blocks of the whole product's depth (kc_of of its C, not of
 * this part's), or, if there was no memory for a workspace, the triple loop
 * of ref/ops.c (the same product summed in double: slower, and it may differ
 * from the kernel's in the last bit, but it is the right answer). */
static void gemm_part(Workspace *ws, int depth, int transA, int transB, int M, int N, int K,
                      float alpha, const float *A, int lda, const float *B, int ldb,
                      float beta, float *C, int ldc) {
    if (ws) gemm_blocked(ws, depth, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else gemm_ref(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* C = beta * C, the whole answer when K == 0 or alpha == 0 (BLAS then
 * reads neither A nor B). beta == 0 writes zeros without reading C. */
static void scale_c(float *C, int ldc, int M, int N, float beta) {
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        if (beta == 0.0f) memset(c, 0, sizeof(float) * N);
        else if (beta != 1.0f) for (int j = 0; j < N; j++) c[j] *= beta;
    }
}


/* Tiles per chunk when `units` tiles of C are shared by `threads` (A read
 * with stride lda, transposed or not). */
static long chunk_tiles(long units, int threads, int split_n, int transA, int lda) {
    long chunks = (long)threads * (split_n ? GEMM_CHUNKS_PER_THREAD : GEMM_CHUNKS_PER_THREAD_M);
    long per = (units + chunks - 1) / chunks;
    /* columns: at least 4 tiles (128) a chunk when there are that many per
     * thread (800x512 . 512x512 on 2 threads: 6 chunks of 96 columns ran
     * at 446 GFLOP/s, 4 of 128 at 501) */
    long least = a_in_place(transA, lda) ? GEMM_MIN_CHUNK_TILES : GEMM_MIN_CHUNK_TILES_PACKED_A;
    if (split_n && per < least && units >= least * threads) per = least;
    /* A packed: whole B panels a chunk (the nearest multiple of NC), or the
     * last panel of each chunk is narrow and its packed A serves a few
     * micro-panels: AVX2's dW1 = X^T dH, 512 x 2048 over 800 rows, was cut
     * into 6 chunks of 352 columns (256 + 96), A packed 12 times; now 8 of
     * 256, A packed 8 times */
    if (split_n && !a_in_place(transA, lda) && per > least) per = (per + least / 2) / least * least;
    return per;
}

/* Cut C along N (columns) when it is at least as wide as tall, or wide
 * enough anyway: then each chunk packs only its own columns of B, where a
 * cut along M packs all of B once per thread (the Annotated configuration's
 * 800 x 512 products: step 181.7 -> 174.0 ms). A small model's narrow
 * products (d_model 64) stay cut along M, by rows, as the ops around them
 * are (see parallel_run). */
static int cut_along_n(int M, int N) { return N >= M || N >= GEMM_CUT_N_MIN; }

/* One product (gemm.h's GemmArgs), cut into chunks of whole tiles along N
 * (split_n) or M. */
typedef struct {
    GemmArgs g;
    int split_n, unit;
} GemmJob;

/* tiles [u0, u1) of the split side: a smaller product on this thread's
 * workspace. Every element of C is still summed in the same order (the k
 * loop does not depend on the cut), so any cut gives the same bits. */
static void gemm_chunk(void *ctx, long u0, long u1) {
    const GemmJob *j = ctx;
    const GemmArgs *g = &j->g;
    int n = j->split_n ? g->N : g->M;
    int lo = (int)(u0 * j->unit), hi = (int)(u1 * j->unit) < n ? (int)(u1 * j->unit) : n;
    int depth = kc_of(g->M, g->N);   /* the whole product's */
    if (j->split_n)
        gemm_part(ws_get(), depth, g->transA, g->transB, g->M, hi - lo, g->K, g->alpha, g->A, g->lda,
                  g->transB ? g->B + (size_t)lo * g->ldb : g->B + lo, g->ldb, g->beta, g->C + lo, g->ldc);
    else
        gemm_part(ws_get(), depth, g->transA, g->transB, hi - lo, g->N, g->K, g->alpha,
                  g->transA ? g->A + lo : g->A + (size_t)lo * g->lda, g->lda, g->B, g->ldb, g->beta,
                  g->C + (size_t)lo * g->ldc, g->ldc);
}

static int split_k_blocks(const GemmArgs *x);   /* see gemm_many */

#endif /* !USE_OPENBLAS */

void gemm(int transA, int transB, int M, int N, int K,
          float alpha, const float *A, int lda, const float *B, int ldb,
          float beta, float *C, int ldc) {
#ifdef USE_OPENBLAS
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(C, ldc, M, N, beta);
        return;
    }
    int threads = (long)M * N * K >= GEMM_MIN_PARALLEL ? parallel_threads() : 1;
    /* Split the wider side of C, in whole tiles, so every chunk is big
     * enough to keep a micro-kernel busy. */
    int split_n = cut_along_n(M, N);
    int unit = split_n ? NR : MR, n = split_n ? N : M;
    long units = (n + unit - 1) / unit;
    if (threads <= 1 || units < 2) {
        gemm_part(ws_get(), kc_of(M, N), transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    GemmArgs x = {transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
    if (split_k_blocks(&x)) {                     /* a weight gradient of a small model */
        gemm_many(1, &x);
        return;
    }
    /* Chunks of whole tiles, taken in turn (see parallel_run): a core
     * slowed by another program does fewer of them instead of holding the
     * others up. Each chunk packs its own share of B. */
    long per = chunk_tiles(units, threads, split_n, transA, lda);
    GemmJob job = {{transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc}, split_n, unit};
    parallel_run(units, per, gemm_chunk, &job);
#endif
}

#ifdef USE_OPENBLAS
void gemm_many(int count, const GemmArgs *g) {
    for (int i = 0; i < count; i++)
        gemm(g[i].transA, g[i].transB, g[i].M, g[i].N, g[i].K, g[i].alpha, g[i].A, g[i].lda, g[i].B,
             g[i].ldb, g[i].beta, g[i].C, g[i].ldc);
}
long gemm_blocks_kept_aside(void) { return 0; }
#else
/* ---- cut along K ------------------------------------------------------------------
 * A weight gradient of a small model, dW = X^T dY (chapter 08: 64 x 192,
 * summed over B*T = 1280 rows), has few tiles of C and many rows to sum.
 * Cut along M or N, every chunk reads every row of X and dY, and with two
 * threads about half of those rows were written by the other core (the
 * caller does the first rows of every op, a worker the last: parallel.c),
 * a trip between the cores for every cache line. Cut along K instead, a
 * chunk is one KC block of rows, so each thread sums the rows it wrote.
 *
 * The bits stay gemm()'s. The kernel sums one KC block in registers (acc)
 * and then does C = fma(alpha, acc, C), the blocks in increasing order (the
 * first block: alpha*acc, or fma(alpha, acc, beta*C)). A block whose
 * predecessors are all in C already (front == its index) does exactly
 * that, in place. Any other block keeps its acc aside (a product with
 * alpha = 1, beta = 0 stores acc itself), and when the job is done the
 * caller adds the kept blocks to C in order with that same fma. Every
 * element sees the same operations in the same order either way. Memory
 * for the blocks kept aside is the caller's (Workspace.aside). */
#define GEMM_MANY_CHUNKS 64              /* chunks of one product at most      */
#define SPLIT_K_MAX_BLOCKS 32            /* K up to 8192 (a C cut along K is small: KC deep) */
#define SPLIT_K_MAX_FLOATS (1L << 18)    /* blocks x M x N kept aside: 1 MiB */

/* KC blocks if x is better cut along K (above), else 0: at least two
 * blocks, K at least 4 x the longer side of C (so the Annotated model's
 * 512 x 512 gradients over 800 rows, and decoding's one-row products, are
 * cut as before), and the blocks kept aside small. */
static int split_k_blocks(const GemmArgs *x) {
    int d = kc_of(x->M, x->N);
    long nb = ((long)x->K + d - 1) / d, side = x->M > x->N ? x->M : x->N;
    if (x->K < 2 * d || x->K < 4 * side || nb > SPLIT_K_MAX_BLOCKS) return 0;
    if ((long)x->M * x->N * nb > SPLIT_K_MAX_FLOATS) return 0;
    return (int)nb;
}

/* The caller's room for blocks kept aside: at least n floats, or NULL. */
static float *ws_aside(Workspace *w, size_t n) {
    if (!w) return NULL;
    if (w->aside_n < n) {
        free(w->aside);
        w->aside = aligned_alloc(64, sizeof(float) * ((n + 15) / 16 * 16));
        w->aside_n = w->aside ? n : 0;
    }
    return w->aside;
}

/* Blocks kept aside so far (split_k_finish): the tests check that the
 * path they mean to test ran. */
static _Atomic long aside_count;
long gemm_blocks_kept_aside(void) { return atomic_load(&aside_count); }

/* The products' chunks, in the order the threads take them (see gemm_many):
 * product prod's tiles [u0, u1) of the side it is cut along, or its KC block
 * u0 when it is cut along K; at is where the chunk starts along its
 * product, 0..1. Taken in that order, the caller (from the front) gets the
 * first rows of every product, so the rows of every product cut along K
 * are summed by the thread that wrote them, the caller's in one piece. */
typedef struct {
    int prod;
    long u0, u1;
    double at;
} GemmChunk;
typedef struct {
    int count, nch;
    GemmJob job[GEMM_MANY_MAX];
    int nb[GEMM_MANY_MAX];              /* cut along K: its KC blocks; else 0      */
    _Atomic int front[GEMM_MANY_MAX];   /* cut along K: blocks [0, front) are in C */
    float *aside[GEMM_MANY_MAX];        /* cut along K: (nb, M, N) blocks kept aside */
    GemmChunk ch[GEMM_MANY_MAX * GEMM_MANY_CHUNKS];
} GemmMany;

/* Block b (rows b*depth.. of the sum) of product i, cut along K. */
static void split_k_block(GemmMany *g, int i, int b) {
    const GemmArgs *x = &g->job[i].g;
    int d = kc_of(x->M, x->N), pc = b * d, kc = x->K - pc < d ? x->K - pc : d;
    const float *A = x->transA ? x->A + (size_t)pc * x->lda : x->A + pc;
    const float *B = x->transB ? x->B + pc : x->B + (size_t)pc * x->ldb;
    if (atomic_load_explicit(&g->front[i], memory_order_acquire) == b) {
        gemm_part(ws_get(), d, x->transA, x->transB, x->M, x->N, kc, x->alpha, A, x->lda, B, x->ldb,
                  b == 0 ? x->beta : 1.0f, x->C, x->ldc);
        atomic_store_explicit(&g->front[i], b + 1, memory_order_release);
    } else {
        gemm_part(ws_get(), d, x->transA, x->transB, x->M, x->N, kc, 1.0f, A, x->lda, B, x->ldb, 0.0f,
                  g->aside[i] + (size_t)b * x->M * x->N, x->N);
    }
}

/* After the job: the blocks kept aside, into C in order. */
static void split_k_finish(GemmMany *g, int i) {
    const GemmArgs *x = &g->job[i].g;
    for (int b = atomic_load(&g->front[i]); b < g->nb[i]; b++) {
        const float *p = g->aside[i] + (size_t)b * x->M * x->N;
        for (int r = 0; r < x->M; r++) {
            float *c = x->C + (size_t)r * x->ldc;
            const float *pr = p + (size_t)r * x->N;
            SIMD
            for (int j = 0; j < x->N; j++) c[j] = fmaf(x->alpha, pr[j], c[j]);
        }
        atomic_fetch_add(&aside_count, 1);
    }
}

/* Chunks [c0, c1). All of them (the pool ran the job in one call: one
 * thread): each product whole, as gemm() on one thread does it. */
static void gemm_many_chunk(void *ctx, long c0, long c1) {
    GemmMany *g = ctx;
    if (c0 == 0 && c1 == g->nch) {
        for (int i = 0; i < g->count; i++) {
            const GemmArgs *x = &g->job[i].g;
            gemm_part(ws_get(), kc_of(x->M, x->N), x->transA, x->transB, x->M, x->N, x->K, x->alpha, x->A,
                      x->lda, x->B, x->ldb, x->beta, x->C, x->ldc);
            atomic_store(&g->front[i], g->nb[i]);
        }
        return;
    }
    for (long c = c0; c < c1; c++) {
        int i = g->ch[c].prod;
        if (g->nb[i]) split_k_block(g, i, (int)g->ch[c].u0);
        else gemm_chunk(&g->job[i], g->ch[c].u0, g->ch[c].u1);
    }
}

void gemm_many(int count, const GemmArgs *a) {
    assert(count >= 0 && count <= GEMM_MANY_MAX);
    int threads = parallel_threads();
    GemmMany g = {0};
    size_t aside = 0;
    for (int i = 0; i < count; i++) {
        const GemmArgs *x = &a[i];
        /* the edge cases, and everything on one thread: gemm() itself */
        if (threads <= 1 || x->M <= 0 || x->N <= 0 || x->K <= 0 || x->alpha == 0.0f) {
            gemm(x->transA, x->transB, x->M, x->N, x->K, x->alpha, x->A, x->lda, x->B, x->ldb, x->beta, x->C,
                 x->ldc);
            continue;
        }
        int k = g.count++;
        int small = (long)x->M * x->N * x->K < GEMM_MIN_PARALLEL;
        g.nb[k] = small ? 0 : split_k_blocks(x);
        g.job[k].g = *x;
        aside += (size_t)g.nb[k] * x->M * x->N;
    }
    float *room = aside ? ws_aside(ws_get(), aside) : NULL;
    for (int k = 0, used = 0; k < g.count; k++) {
        const GemmArgs *x = &g.job[k].g;
        if (g.nb[k] && !room) g.nb[k] = 0;                /* no memory: cut as before */
        if (g.nb[k]) {
            g.aside[k] = room + used;
            used += g.nb[k] * x->M * x->N;
            for (long b = 0; b < g.nb[k]; b++) g.ch[g.nch++] = (GemmChunk){k, b, b + 1, (double)b / g.nb[k]};
            continue;
        }
        int split_n = cut_along_n(x->M, x->N), unit = split_n ? NR : MR, n = split_n ? x->N : x->M;
        long units = (n + unit - 1) / unit;
        /* a small product is one chunk; a large one is cut as gemm() cuts it */
        long per = (long)x->M * x->N * x->K < GEMM_MIN_PARALLEL ? units : chunk_tiles(units, threads, split_n, x->transA, x->lda);
        if ((units + per - 1) / per > GEMM_MANY_CHUNKS) per = (units + GEMM_MANY_CHUNKS - 1) / GEMM_MANY_CHUNKS;
        g.job[k].split_n = split_n;
        g.job[k].unit = unit;
        for (long u = 0; u < units; u += per)
            g.ch[g.nch++] = (GemmChunk){k, u, u + per < units ? u + per : units, (double)u / units};
    }
    /* in order of at (a stable insertion sort: a few dozen chunks) */
    for (int c = 1; c < g.nch; c++) {
        GemmChunk t = g.ch[c];
        int d = c;
        for (; d > 0 && g.ch[d - 1].at > t.at; d--) g.ch[d] = g.ch[d - 1];
        g.ch[d] = t;
    }
    if (g.nch) parallel_run(g.nch, 1, gemm_many_chunk, &g);
    for (int k = 0; k < g.count; k++)
        if (g.nb[k]) split_k_finish(&g, k);
}
#endif
