/* gemm_kernel.h - what the two halves of gemm() share: the block sizes, the
 * packing workspace, and one thread's blocked product.
 *
 *   gemm.c         the driver: a workspace per thread, cutting C into chunks
 *                  for the threads, gemm() and gemm_many(), cut along K
 *   gemm_kernel.c  one thread's product: packing, the micro-kernels and the
 *                  five blocked loops around them (gemm_blocked)
 *
 * Internal to those two files; everyone else includes gemm.h. */
#ifndef GEMM_KERNEL_H
#define GEMM_KERNEL_H

#include <stddef.h>

/* ---- block sizes ------------------------------------------------------------
 * MR x NR: the register tile (see each kernel in gemm_kernel.c). KC,
 * KC_BIG: the depth of one block of the sum (gemm.c's kc_of), KC also the
 * block of a cut along K. MC: rows of A per packed block (multiple of MR).
 * NC: columns of B per packed panel (multiple of NR). */
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
 * (gemm.c's kc_of): KC for a C of under 1 MiB, KC_BIG from 1 MiB up. A big C
 * (every product of the Annotated model) does not stay in the caches from
 * one block to the next, so each block costs a pass over C (load, add,
 * store): deeper blocks halve them, at the price of a B micro-panel (64
 * KiB) that streams from L2 instead of sitting in L1. On this project's
 * 2-core AMD EPYC VM (48 KiB L1, 1 MiB L2) KC_BIG 512 took the Annotated
 * training step from 177.6-180.8 to 170.8-173.6 ms (four alternating runs
 * each); 384, 768 and 1024 were no better. A small C stays in cache, and a
 * small model's weight gradients, cut along K into blocks of KC rows (see
 * "cut along K" in gemm.c), want short blocks: 512 would cut chapter 08's dW over
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
static inline int a_rows_collide(int transA, int lda) { return MR > 8 && !transA && lda % 1024 == 0; }

/* Full tiles of A read in place (kernel_direct_*), or packed: in place,
 * unless its rows collide in L1 (above) or, with AVX2, A is transposed:
 * then the MR = 6 values of one k are 6 of a cache line's 16, and a tile's
 * kc lines (32 KiB at kc 512) fill L1 for 12 KiB of values. (AVX2 on one
 * Zen 3 core: A^T B, 512x800 . 800x2048, 45-46 GFLOP/s in place, 64-67
 * packed; h W2 and dX = dH W1^T, whose 6 rows share an 8-way L1 set
 * unpacked, 53-55 packed, 63-65 in place.) */
static inline int a_in_place(int transA, int lda) {
#if defined(__AVX512F__)
    return !a_rows_collide(transA, lda);
#else
    return !transA && !a_rows_collide(transA, lda);
#endif
}

/* ---- the per-thread packing workspace (made by gemm.c's ws_get) ------------- */
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

/* C (+)= alpha * op(A) @ op(B) (see gemm.h) on one thread, through ws's
 * packing buffers, in blocks of the sum `depth` deep (kc_of of the whole
 * product's C, so that any cut of C sums every element in the same order).
 * M, N, K > 0; gemm_kernel.c. */
void gemm_blocked(Workspace *ws, int depth, int transA, int transB, int M, int N, int K,
                  float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc);

#endif
