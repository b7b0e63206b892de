/* gemm.c - the fast matrix multiply every layer calls.
 *
 *   C = alpha * op(A) @ op(B) + beta * C        (BLAS sgemm, row-major; see gemm.h)
 *
 * Every linear layer of the Transformer is one of these: x W_Q, x W_1 (Eq. 2),
 * the output projection onto the vocabulary (Sec. 3.4), and in the backward
 * pass dX = dY W^T and dW = X^T dY. Almost all of a training step's time is
 * spent here, so this file is where speed comes from. gemm_ref() in ops.c is
 * the three-loop version that says WHAT is computed; this file says how to
 * compute the same thing 50-100x faster on a CPU. bench/README.md measures
 * each step below.
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
#include "fast/parallel.h"

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
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#include "fast/simd.h"

#ifndef USE_OPENBLAS

/* ---- block sizes ------------------------------------------------------------
 * MR x NR: the register tile (see each kernel). KC, KC_BIG: the depth of
 * one block of the sum (kc_of), KC also the block of a cut along K. MC:
 * rows of A per packed block (multiple of MR). NC: columns of B per packed
 * panel (multiple of NR). */
#if defined(__AVX512F__)
#define GEMM_PATH "avx512"
#define MR 14
#define NR 32
#elif defined(__AVX2__) && defined(__FMA__)
#define GEMM_PATH "avx2"
#define MR 6
#define NR 16
#else
#define GEMM_PATH "portable"
#define MR 4
#define NR 16
#endif
/* KC, the depth of one block of the sum, depends on the size of C
 * (kc_of): KC for a C of under 1 MiB, KC_BIG from 1 MiB up. A big C
 * (every product of the Annotated model) does not stay in the caches from
 * one block to the next, so each block costs a pass over C (load, add,
 * store): deeper blocks halve them, at the price of a B micro-panel (64
 * KiB) that streams from L2 instead of sitting in L1. On this project's
 * 2-core AMD EPYC VM (48 KiB L1, 1 MiB L2) KC_BIG 512 took the Annotated
 * training step from 177.6-180.8 to 170.8-173.6 ms (four alternating runs
 * each); 384, 768 and 1024 were no better. A small C stays in cache, and a
 * small model's weight gradients, cut along K into blocks of KC rows (see
 * "cut along K"), want short blocks: 512 would cut chapter 08's dW over
 * 1280 rows into 3 blocks that straddle the rows each thread wrote, not 5.
 * And the small models of chapters 08-13 keep their results bit for bit.
 * The depth is the product's, never a chunk's, so every element is summed
 * in the same order on any thread count; changing either constant changes
 * the last bits of results. -DKC=... etc. to experiment. */
#ifndef KC
#define KC 256
#endif
#ifndef KC_BIG
#define KC_BIG 512
#endif
#define KC_BIG_MIN_C (1L << 18)   /* floats of C (1 MiB) from which the depth is KC_BIG */
#define KC_MAX (KC_BIG > KC ? KC_BIG : KC)
#ifndef MC
#define MC (MR * 12)
#endif
#ifndef NC
#define NC 256   /* 1024 before the ir loop moved outside jr: the Annotated step on 1 thread 326.9 -> 315.6 ms */
#endif

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

/* A's rows a multiple of 4 KiB apart (lda % 1024 == 0: the FFN's hidden
 * layer, d_ff = 2048) all fall in the same sets of L1 (its set comes from
 * address bits 6-11), and the MR = 14 rows of a tile, read in place, need
 * 14 lines of one set at once: more than its ways (8 to 12), so the broadcasts of
 * A miss L1 again and again. Such an A is packed (its MR values of one k
 * contiguous), and the chunks of C are NC wide (8 micro-panels), so that
 * each packed block serves the whole B panel. FFN h W2 800x2048 . 2048x512
 * at 260-300 GFLOP/s in place (in some runs about 400), packed 387-392.
 * A transposed reads MR contiguous floats per k (one or two lines), which
 * stays in place: packing it was slower (415 -> 332). AVX2's MR = 6 rows
 * fit in one set's 8 ways: read in place. */
static int a_rows_collide(int transA, int lda) { return MR > 8 && !transA && lda % 1024 == 0; }

/* Full tiles of A read in place (kernel_direct_*), or packed: in place,
 * unless its rows collide in L1 (above) or, with AVX2, A is transposed:
 * then the MR = 6 values of one k are 6 of a cache line's 16, and a tile's
 * kc lines (32 KiB at kc 512) fill L1 for 12 KiB of values. (AVX2 on one
 * Zen 3 core: A^T B, 512x800 . 800x2048, 45-46 GFLOP/s in place, 64-67
 * packed; h W2 and dX = dH W1^T, whose 6 rows share an 8-way L1 set
 * unpacked, 53-55 packed, 63-65 in place.) */
static int a_in_place(int transA, int lda) {
#if defined(__AVX512F__)
    return !a_rows_collide(transA, lda);
#else
    return !transA && !a_rows_collide(transA, lda);
#endif
}


/* ---- per-thread packing workspace ------------------------------------------ */
/* floats past the packed A block that packing may write (AVX2 stores a
 * panel's last k as a whole vector: pack_rows_transposed); 64 bytes */
#define A_SLACK 16

typedef struct Workspace {
    float *a;                  /* (MC, KC_MAX) packed A block, MR-row panels, + A_SLACK */
    float *b;                  /* (KC_MAX, NC) packed B panel, NR-column panels */
    float *aside;              /* gemm_many's blocks kept aside (cut along K), */
    size_t aside_n;            /*   aside_n floats; the calling thread's        */
    struct Workspace *next;    /* every workspace, for freeing at exit      */
} Workspace;

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

/* ---- packing ------------------------------------------------------------------
 * pack_a: op(A)[i0 .. i0+mc, p0 .. p0+kc] -> Ap, as ceil(mc/MR) panels; in a
 * panel, the MR values of one k are adjacent:  Ap[panel*MR*kc + k*MR + r].
 * Rows past mc are zero so the kernel can always do a full tile.
 * pack_b: op(B)[p0 .. p0+kc, j0 .. j0+nc] -> Bp as ceil(nc/NR) panels of
 * (kc, NR): Bp[panel*kc*NR + k*NR + c]; columns past nc are zero.
 *
 * Packing touches every element once per block, so it must not cost more
 * than a few percent of the kernel's time. The plain loops below move one
 * float per instruction (about 2 cycles each, 15-20% of a large multiply);
 * with AVX-512 a masked load moves a contiguous row piece in one go, and
 * values that sit one leading dimension apart (a column of a row-major
 * matrix) are read 16 rows x 16 columns at a time and transposed in
 * registers (a gather, one instruction for 16 of them, still moves one
 * float at a time). Rows far apart defeat the hardware prefetcher, so
 * packing asks for the next rows itself. */
#if defined(__AVX512F__)
/* rows ahead that packing asks the memory for (a prefetch never faults,
 * so asking past the block's end is harmless) */
#ifndef PACK_AHEAD
#define PACK_AHEAD 8
#endif
/* floats ahead along a row that pack_rows_transposed asks for: 4 cache
 * lines (16, one line, before: the Annotated step's transposed packing of
 * weights fresh from memory waited on them) */
#ifndef PACK_T_AHEAD
#define PACK_T_AHEAD 64
#endif

/* A block of `rows` (<= 16) rows of a row-major matrix, k along each row,
 * ld apart -> dst[k * dst_ld + row] for k < kc: one transpose per 16 k.
 * Rows past `rows` come out as zeros; store_mask says which of the 16 rows
 * to write (MR = 14 of them for A, all 16 for a half panel of B). */
static inline __attribute__((always_inline))
void pack_rows_transposed(float *dst, int dst_ld, __mmask16 store_mask, const float *src, size_t ld,
                          int rows, int kc) {
    for (int k = 0; k < kc; k += 16) {
        int n = kc - k < 16 ? kc - k : 16;
        __mmask16 m = (__mmask16)((1u << n) - 1);   /* n <= 16: no read past kc */
        __m512 r[16];
        for (int i = 0; i < 16; i++) {
            /* the next 16 k of this row, ahead of time: the rows are far
             * apart, and without the request each load here waits for memory */
            if (i < rows && k + PACK_T_AHEAD < kc) _mm_prefetch((const char *)(src + (size_t)i * ld + k + PACK_T_AHEAD), _MM_HINT_T0);
            r[i] = i < rows ? _mm512_maskz_loadu_ps(m, src + (size_t)i * ld + k) : _mm512_setzero_ps();
        }
        transpose16(r);
        for (int j = 0; j < n; j++) _mm512_mask_storeu_ps(dst + (size_t)(k + j) * dst_ld, store_mask, r[j]);
    }
}

static void pack_a(float *Ap, const float *A, int lda, int transA, int i0, int p0, int mc, int kc) {
    const __mmask16 tile_rows = (__mmask16)((1u << MR) - 1);
    for (int ir = 0; ir < mc; ir += MR) {
        int mr = mc - ir < MR ? mc - ir : MR;
        __mmask16 m = (__mmask16)((1u << mr) - 1);
        float *dst = Ap + (size_t)ir * kc;
        if (transA) {
            /* op(A)[i][p] = A[p][i]: the MR values of one k are contiguous */
            const float *src = A + (size_t)p0 * lda + i0 + ir;
            for (int k = 0; k < kc; k++) {
                _mm_prefetch((const char *)(src + (size_t)(k + PACK_AHEAD) * lda), _MM_HINT_T0);
                _mm512_mask_storeu_ps(dst + k * MR, tile_rows, _mm512_maskz_loadu_ps(m, src + (size_t)k * lda));
            }
        } else {
            /* op(A)[i][p] = A[i][p]: the MR values of one k are lda apart,
             * so 16 k of MR rows are read along the rows and transposed */
            pack_rows_transposed(dst, MR, tile_rows, A + (size_t)(i0 + ir) * lda + p0, (size_t)lda, mr, kc);
        }
    }
}

static void pack_b(float *Bp, const float *B, int ldb, int transB, int p0, int j0, int kc, int nc) {
    if (!transB) {
        /* op(B)[p][j] = B[p][j]: NR contiguous floats per k. Row by row:
         * each row's nc floats are read as one stream, which the hardware
         * prefetcher follows, and scattered to the NR-wide panels (B fresh
         * from memory, as a layer's weights are in a training step: panel
         * by panel, 32 floats of 512 rows at a time, defeated it; the
         * Annotated step 170.5 -> 164.2 ms in alternating runs, with the
         * transposed case's look-ahead below). Row k + PACK_AHEAD is asked
         * for meanwhile. */
        for (int k = 0; k < kc; k++) {
            const float *src = B + (size_t)(p0 + k) * ldb + j0, *ahead = src + (size_t)PACK_AHEAD * ldb;
            for (int jr = 0; jr < nc; jr += 16) _mm_prefetch((const char *)(ahead + jr), _MM_HINT_T0);
            for (int jr = 0; jr < nc; jr += NR) {
                int nr = nc - jr < NR ? nc - jr : NR;
                __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
                __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
                float *dst = Bp + (size_t)jr * kc + (size_t)k * NR;
                _mm512_store_ps(dst, _mm512_maskz_loadu_ps(m0, src + jr));
                _mm512_store_ps(dst + 16, _mm512_maskz_loadu_ps(m1, src + jr + 16));
            }
        }
        return;
    }
    for (int jr = 0; jr < nc; jr += NR) {
        /* op(B)[p][j] = B[j][p]: the NR values of one k are ldb apart;
         * each half of the panel (16 rows of B) is read along the rows
         * and transposed, 16 k at a time */
        int nr = nc - jr < NR ? nc - jr : NR;
        const float *src = B + (size_t)(j0 + jr) * ldb + p0;
        float *dst = Bp + (size_t)jr * kc;
        pack_rows_transposed(dst, NR, 0xFFFF, src, (size_t)ldb, nr < 16 ? nr : 16, kc);
        pack_rows_transposed(dst + 16, NR, 0xFFFF, src + (size_t)16 * ldb, (size_t)ldb, nr > 16 ? nr - 16 : 0, kc);
    }
}
#elif defined(__AVX2__) && defined(__FMA__)
/* The same packing with 8-float vectors: masked loads (maskload zeroes the
 * lanes it does not read) for row pieces, 8 x 8 register transposes for
 * values one leading dimension apart. */
#ifndef PACK_AHEAD
#define PACK_AHEAD 8
#endif
#ifndef PACK_T_AHEAD
#define PACK_T_AHEAD 32
#endif

/* r[0..8) rows of 8 floats -> r[j] = column j (unpack pairs of rows,
 * shuffle 2x2 blocks, swap 128-bit halves: 24 shuffles for 64 floats) */
static inline __attribute__((always_inline)) void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);       /* half h: a4h b4h a4h+1 b4h+1 */
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);   /* half h: a4h+2 b4h+2 a4h+3 b4h+3 */
    }
    for (int q = 0; q < 8; q += 4) {                     /* u[q + c], half h: rows q..q+3 of column 4h + c */
        u[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
        u[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xEE);
        u[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
        u[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* `rows` (<= 8) rows of a row-major matrix, k along each row, ld apart ->
 * dst[k * dst_ld + row] for k < kc; rows past `rows` are zeros. Each k is
 * stored as a whole vector of 8, in increasing k: with dst_ld = MR = 6 (A)
 * its last 2 lanes fall on the next k's first two, which the next store
 * writes (a masked store is slow on AMD); the last k's fall past the block,
 * on the next panel (packed after this one) or the workspace's slack
 * (ws_get). dst_ld = 16 (a half panel of B) stores 8 of 16. */
static inline __attribute__((always_inline))
void pack_rows_transposed(float *dst, int dst_ld, const float *src, size_t ld, int rows, int kc) {
    for (int k = 0; k < kc; k += 8) {
        int n = kc - k < 8 ? kc - k : 8;
        __m256i m = lanes8(n);
        __m256 r[8];
        for (int i = 0; i < 8; i++) {
            if (i < rows && k + PACK_T_AHEAD < kc) _mm_prefetch((const char *)(src + (size_t)i * ld + k + PACK_T_AHEAD), _MM_HINT_T0);
            r[i] = i < rows ? _mm256_maskload_ps(src + (size_t)i * ld + k, m) : _mm256_setzero_ps();
        }
        transpose8(r);
        for (int j = 0; j < n; j++) _mm256_storeu_ps(dst + (size_t)(k + j) * dst_ld, r[j]);
    }
}

static void pack_a(float *Ap, const float *A, int lda, int transA, int i0, int p0, int mc, int kc) {
    for (int ir = 0; ir < mc; ir += MR) {
        int mr = mc - ir < MR ? mc - ir : MR;
        float *dst = Ap + (size_t)ir * kc;
        if (transA) {
            /* op(A)[i][p] = A[p][i]: the MR values of one k are contiguous;
             * stored 8 at a time, overlapping as in pack_rows_transposed
             * (with a masked store this loop was 28% of a product A^T B) */
            const __m256i m = lanes8(mr);
            const float *src = A + (size_t)p0 * lda + i0 + ir;
            for (int k = 0; k < kc; k++) {
                _mm_prefetch((const char *)(src + (size_t)(k + PACK_AHEAD) * lda), _MM_HINT_T0);
                _mm256_storeu_ps(dst + k * MR, _mm256_maskload_ps(src + (size_t)k * lda, m));
            }
        } else {
            /* op(A)[i][p] = A[i][p]: 8 k of the MR rows at a time, transposed */
            pack_rows_transposed(dst, MR, A + (size_t)(i0 + ir) * lda + p0, (size_t)lda, mr, kc);
        }
    }
}

static void pack_b(float *Bp, const float *B, int ldb, int transB, int p0, int j0, int kc, int nc) {
    if (!transB) {
        /* op(B)[p][j] = B[p][j]: row by row, each row one stream scattered
         * to the NR-wide panels (see the AVX-512 version) */
        for (int k = 0; k < kc; k++) {
            const float *src = B + (size_t)(p0 + k) * ldb + j0, *ahead = src + (size_t)PACK_AHEAD * ldb;
            for (int jr = 0; jr < nc; jr += 16) _mm_prefetch((const char *)(ahead + jr), _MM_HINT_T0);
            for (int jr = 0; jr < nc; jr += NR) {
                float *dst = Bp + (size_t)jr * kc + (size_t)k * NR;
                if (nc - jr >= NR) {
                    _mm256_store_ps(dst, _mm256_loadu_ps(src + jr));
                    _mm256_store_ps(dst + 8, _mm256_loadu_ps(src + jr + 8));
                } else {
                    _mm256_store_ps(dst, _mm256_maskload_ps(src + jr, lanes8(nc - jr)));
                    _mm256_store_ps(dst + 8, _mm256_maskload_ps(src + jr + 8, lanes8(nc - jr - 8)));
                }
            }
        }
        return;
    }
    for (int jr = 0; jr < nc; jr += NR) {
        /* op(B)[p][j] = B[j][p]: each half of the panel (8 rows of B) read
         * along the rows and transposed, 8 k at a time */
        int nr = nc - jr < NR ? nc - jr : NR;
        const float *src = B + (size_t)(j0 + jr) * ldb + p0;
        float *dst = Bp + (size_t)jr * kc;
        pack_rows_transposed(dst, NR, src, (size_t)ldb, nr < 8 ? nr : 8, kc);
        pack_rows_transposed(dst + 8, NR, src + (size_t)8 * ldb, (size_t)ldb, nr > 8 ? nr - 8 : 0, kc);
    }
}
#else
static void pack_a(float *Ap, const float *A, int lda, int transA, int i0, int p0, int mc, int kc) {
    for (int ir = 0; ir < mc; ir += MR) {
        int mr = mc - ir < MR ? mc - ir : MR;
        float *dst = Ap + (size_t)ir * kc;
        if (transA) {
            /* op(A)[i][p] = A[p][i]: the MR values of one k are contiguous */
            for (int k = 0; k < kc; k++) {
                const float *src = A + (size_t)(p0 + k) * lda + i0 + ir;
                int r = 0;
                for (; r < mr; r++) dst[k * MR + r] = src[r];
                for (; r < MR; r++) dst[k * MR + r] = 0.0f;
            }
        } else {
            /* op(A)[i][p] = A[i][p]: read each row along k, write with stride MR */
            for (int r = 0; r < MR; r++) {
                if (r < mr) {
                    const float *src = A + (size_t)(i0 + ir + r) * lda + p0;
                    for (int k = 0; k < kc; k++) dst[k * MR + r] = src[k];
                } else {
                    for (int k = 0; k < kc; k++) dst[k * MR + r] = 0.0f;
                }
            }
        }
    }
}

static void pack_b(float *Bp, const float *B, int ldb, int transB, int p0, int j0, int kc, int nc) {
    for (int jr = 0; jr < nc; jr += NR) {
        int nr = nc - jr < NR ? nc - jr : NR;
        float *dst = Bp + (size_t)jr * kc;
        if (transB) {
            /* op(B)[p][j] = B[j][p]: read each row of B along k */
            for (int c = 0; c < NR; c++) {
                if (c < nr) {
                    const float *src = B + (size_t)(j0 + jr + c) * ldb + p0;
                    for (int k = 0; k < kc; k++) dst[k * NR + c] = src[k];
                } else {
                    for (int k = 0; k < kc; k++) dst[k * NR + c] = 0.0f;
                }
            }
        } else {
            /* op(B)[p][j] = B[p][j]: NR contiguous floats per k, a plain copy */
            for (int k = 0; k < kc; k++) {
                const float *src = B + (size_t)(p0 + k) * ldb + j0 + jr;
                memcpy(dst + k * NR, src, sizeof(float) * nr);
                for (int c = nr; c < NR; c++) dst[k * NR + c] = 0.0f;
            }
        }
    }
}
#endif

/* ---- writing a finished tile back ---------------------------------------------
 * acc holds sum_k op(A)[i][k] op(B)[k][j] over one KC block. The first block
 * applies beta (and never reads C when beta == 0, so garbage or NaN there
 * cannot leak in); later blocks add on. One fmaf per element, the same
 * operation the vector paths do, so edge tiles round exactly like full ones. */
static inline float update_one(float acc, float c_old, float alpha, float beta, int first) {
    if (!first) return fmaf(alpha, acc, c_old);
    if (beta == 0.0f) return alpha * acc;
    return fmaf(alpha, acc, beta * c_old);
}

#if !defined(__AVX512F__) && !(defined(__AVX2__) && defined(__FMA__))
/* tile (MR, NR) row-major -> the mr x nr corner of C (the portable kernel). */
static void update_tile(float *C, int ldc, const float *tile, int mr, int nr,
                        float alpha, float beta, int first) {
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++) {
            float *cp = &C[(size_t)r * ldc + c];
            *cp = update_one(tile[r * NR + c], first && beta == 0.0f ? 0.0f : *cp, alpha, beta, first);
        }
}
#endif

/* ---- micro-kernels --------------------------------------------------------------
 * kernel(kc, Ap, Bp, C, ldc, ...): C[0..mr, 0..nr] (+)= alpha * Ap-panel @ Bp-panel,
 * Ap (kc, MR) and Bp (kc, NR) packed; the tile is MR x NR, of which the
 * top-left mr x nr is real (the rest was zero-padded by packing). */
#if defined(__AVX512F__)
/* 14 x 32: 28 accumulators (14 rows x 2 vectors of 16 floats) + 2 registers
 * for the row of B + 1 for the broadcast A value = 31 of the 32 zmm
 * registers. Edges use AVX-512 masks for the columns and skip rows >= mr.
 * The A value of row r, step k is A[r*rsa + k*csa]: packed panels have
 * (rsa, csa) = (1, MR); kernel_direct reads A where it lies (see
 * gemm_blocked). Both are this one body, inlined with their own strides. */
static inline __attribute__((always_inline))
void kernel_body(int rows, int kc, const float *restrict A, size_t rsa, size_t csa, const float *restrict Bp,
                 float *C, int ldc, float alpha, float beta, int first, int mr, int nr) {
    /* Ask for the C tile now; it is needed only after the k loop, by which
     * time it has arrived. Without this the tile (14 rows, often 8 KiB
     * apart, not in L2 for big C) is fetched row by row at the end of every
     * call, a stall of hundreds of cycles per call. */
    for (int r = 0; r < mr; r++) {
        _mm_prefetch((const char *)(C + (size_t)r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(C + (size_t)r * ldc + NR - 1), _MM_HINT_T0);
    }
    __m512 acc[MR][2];
#pragma GCC unroll 14
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(Bp + k * NR);
        __m512 b1 = _mm512_load_ps(Bp + k * NR + 16);
#pragma GCC unroll 14
        for (int r = 0; r < rows; r++) {
            __m512 a = _mm512_set1_ps(A[r * rsa + k * csa]);
            acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 14
    for (int r = 0; r < rows; r++) {
        if (r >= mr) break;
        float *cp = C + (size_t)r * ldc;
        for (int h = 0; h < 2; h++) {
            __mmask16 m = h ? m1 : m0;
            __m512 out;
            if (first && beta == 0.0f) {
                out = _mm512_mul_ps(va, acc[r][h]);
            } else {
                __m512 old = _mm512_maskz_loadu_ps(m, cp + 16 * h);
                if (first) old = _mm512_mul_ps(vb, old);
                out = _mm512_fmadd_ps(va, acc[r][h], old);
            }
            _mm512_mask_storeu_ps(cp + 16 * h, m, out);
        }
    }
}

#define HAVE_KERNEL_DIRECT 1
#elif defined(__AVX2__) && defined(__FMA__)
/* 6 x 16: 12 accumulators (6 rows x 2 vectors of 8 floats) + 2 registers
 * for the row of B + 1 for the broadcast A value = 15 of the 16 ymm
 * registers; per k 12 FMAs for 2 loads of B and 6 broadcasts of A. The
 * same body as the AVX-512 kernel above (A read packed or in place, the C
 * tile asked for ahead), with lane masks for a ragged edge. */
static inline __attribute__((always_inline))
void kernel_body(int rows, int kc, const float *restrict A, size_t rsa, size_t csa, const float *restrict Bp,
                 float *C, int ldc, float alpha, float beta, int first, int mr, int nr) {
    for (int r = 0; r < mr; r++) {
        _mm_prefetch((const char *)(C + (size_t)r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(C + (size_t)r * ldc + NR - 1), _MM_HINT_T0);
    }
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(Bp + k * NR);
        __m256 b1 = _mm256_load_ps(Bp + k * NR + 8);
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m256 a = _mm256_broadcast_ss(A + r * rsa + k * csa);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    const __m256i m0 = lanes8(nr), m1 = lanes8(nr - 8);
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        if (r >= mr) break;
        float *cp = C + (size_t)r * ldc;
        for (int h = 0; h < 2; h++) {
            __m256 out;
            if (first && beta == 0.0f) {
                out = _mm256_mul_ps(va, acc[r][h]);
            } else {
                __m256 old = nr == NR ? _mm256_loadu_ps(cp + 8 * h) : _mm256_maskload_ps(cp + 8 * h, h ? m1 : m0);
                if (first) old = _mm256_mul_ps(vb, old);
                out = _mm256_fmadd_ps(va, acc[r][h], old);
            }
            if (nr == NR) _mm256_storeu_ps(cp + 8 * h, out);
            else _mm256_maskstore_ps(cp + 8 * h, h ? m1 : m0, out);
        }
    }
}
#define HAVE_KERNEL_DIRECT 1
#else
/* Portable C: the same tile idea with plain arrays; the compiler keeps what
 * it can in registers and may vectorise the c loop. A plain multiply and add
 * (not fmaf, which is a slow library call on CPUs without FMA); ISO C mode
 * (-std=c11) keeps the compiler from fusing them, so the rounding is fixed. */
static void kernel(int kc, const float *restrict Ap, const float *restrict Bp,
                   float *C, int ldc, float alpha, float beta, int first, int mr, int nr) {
    float tile[MR * NR] = {0};
    for (int k = 0; k < kc; k++)
        for (int r = 0; r < MR; r++) {
            float a = Ap[k * MR + r];
            for (int c = 0; c < NR; c++) tile[r * NR + c] += a * Bp[k * NR + c];
        }
    update_tile(C, ldc, tile, mr, nr, alpha, beta, first);
}
#endif

#ifdef HAVE_KERNEL_DIRECT
static void kernel(int kc, const float *restrict Ap, const float *restrict Bp,
                   float *C, int ldc, float alpha, float beta, int first, int mr, int nr) {
    /* a ragged last tile (800 rows = 57 x 14 + 2 with AVX-512) does only
     * the rows it has, rounded up: the same sums, a seventh of the work
     * for 2 rows */
    if (mr <= 2) kernel_body(2, kc, Ap, 1, MR, Bp, C, ldc, alpha, beta, first, mr, nr);
    else if (mr <= 4) kernel_body(4, kc, Ap, 1, MR, Bp, C, ldc, alpha, beta, first, mr, nr);
#if MR > 8
    else if (mr <= 8) kernel_body(8, kc, Ap, 1, MR, Bp, C, ldc, alpha, beta, first, mr, nr);
#endif
    else kernel_body(MR, kc, Ap, 1, MR, Bp, C, ldc, alpha, beta, first, mr, nr);
}

/* A read in place: op(A) = A^T, so the MR values of one k are adjacent
 * (A[k*lda + r]) - no copy needed. */
static void kernel_direct_t(int kc, const float *restrict A, int lda, const float *restrict Bp,
                            float *C, int ldc, float alpha, float beta, int first, int nr) {
    kernel_body(MR, kc, A, 1, (size_t)lda, Bp, C, ldc, alpha, beta, first, MR, nr);
}

/* A read in place: op(A) = A, row r of the tile is A[r*lda + k]. */
static void kernel_direct_n(int kc, const float *restrict A, int lda, const float *restrict Bp,
                            float *C, int ldc, float alpha, float beta, int first, int nr) {
    kernel_body(MR, kc, A, (size_t)lda, 1, Bp, C, ldc, alpha, beta, first, MR, nr);
}
#endif

/* The depth of the blocks of the sum for a product with C (M, N): see KC. */
static int kc_of(int M, int N) { return (long)M * N >= KC_BIG_MIN_C ? KC_BIG : KC; }

/* One MR x NR tile of C over one block of the sum (kc deep): kernel_direct_*
 * for a full tile of A read in place, kernel on the packed ragged rows
 * otherwise. */
static inline __attribute__((always_inline))
void micro_tile(Workspace *ws, int transA, const float *A, int lda, float *C, int ldc, float alpha, float beta,
                int pc, int kc, int ic, int mc, int jc, int nc, int ir, int jr, int full) {
    int nr = nc - jr < NR ? nc - jr : NR, mr = mc - ir < MR ? mc - ir : MR;
    float *c = C + (size_t)(ic + ir) * ldc + jc + jr;
    const float *bp = ws->b + (size_t)jr * kc;
#ifdef HAVE_KERNEL_DIRECT
    if (ir < full) {
        if (transA)
            kernel_direct_t(kc, A + (size_t)pc * lda + ic + ir, lda, bp, c, ldc, alpha, beta, pc == 0, nr);
        else
            kernel_direct_n(kc, A + (size_t)(ic + ir) * lda + pc, lda, bp, c, ldc, alpha, beta, pc == 0, nr);
        return;
    }
#endif
    kernel(kc, ws->a + (size_t)ir * kc, bp, c, ldc, alpha, beta, pc == 0, mr, nr);
}

/* ---- the blocked loops (one thread) ----------------------------------------------
 * The five loops around the micro-kernel, outermost first:
 *   jc: NC-wide column panels of B and C
 *   pc: kc-deep slices of the sum      -> pack B panel (kc x NC) once
 *   ic: MC-tall row blocks of A and C   -> pack A block (MC x kc) once
 *   ir: MR-tall tiles of A (stay in L1/L2 across jr)
 *   jr: NR-wide micro-panels of the packed B panel (in L2) -> one
 *       micro-kernel call
 * BLIS runs jr outside ir, so that a micro-panel of B stays in L1 while
 * every tile of A passes. Here ir is outside: each tile of A, read in place
 * from memory the first time, is reused at once for the whole row of C
 * tiles, and C is written along its rows. Inside a training step, where A
 * and C are fresh from memory, that was faster: the Annotated step
 * 174.5 -> 167.2 and 180.3 -> 174.9 ms (medians of 12 and 10 alternating
 * runs), the same bits. It needs the B panel in L2, hence NC 256. */

static void gemm_blocked(Workspace *ws, int depth, int transA, int transB, int M, int N, int K,
                         float alpha, const float *A, int lda, const float *B, int ldb,
                         float beta, float *C, int ldc) {
    for (int jc = 0; jc < N; jc += NC) {
        int nc = N - jc < NC ? N - jc : NC;
        /* Full MR-row tiles read A where it lies (kernel_direct_*: same
         * products, same order, the same result); only a ragged last tile
         * is packed, zero-padded. Packing A was meant to pay for itself by
         * being read by many NR-wide micro-panels of B, but it waits on
         * memory (A's rows are far apart) and the kernel's own reads of A
         * hide that better: in place, the Annotated training step took 6%
         * less time on an AVX-512 machine, and a narrow C (d_model = 64: 2
         * micro-panels) gains more (bench/README.md). Not when A's rows
         * collide in L1, nor for AVX2's A^T (a_in_place): then all of A
         * is packed. */
        int direct = 0;
#ifdef HAVE_KERNEL_DIRECT
        direct = a_in_place(transA, lda);
#endif
        for (int pc = 0; pc < K; pc += depth) {
            int kc = K - pc < depth ? K - pc : depth;
            pack_b(ws->b, B, ldb, transB, pc, jc, kc, nc);
            for (int ic = 0; ic < M; ic += MC) {
                int mc = M - ic < MC ? M - ic : MC;
                int full = direct ? mc / MR * MR : 0;   /* rows done in place */
                if (full < mc) pack_a(ws->a + (size_t)full * kc, A, lda, transA, ic + full, pc, mc - full, kc);
                for (int ir = 0; ir < mc; ir += MR)
                    for (int jr = 0; jr < nc; jr += NR)
                        micro_tile(ws, transA, A, lda, C, ldc, alpha, beta, pc, kc, ic, mc, jc, nc, ir, jr, full);
            }
        }
    }
}

/* One thread's part of a product: the blocked kernel with this thread's
 * workspace, in blocks of the whole product's depth (kc_of of its C, not of
 * this part's), or, if there was no memory for a workspace, the triple loop
 * of ops.c (the same product summed in double: slower, and it may differ
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
