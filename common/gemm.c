/* gemm.c - the fast matrix multiply every layer calls.
 * (Placeholder until the blocked SIMD kernel lands: the reference loop.) */
#include "ops.h"

#ifdef USE_OPENBLAS
#include <cblas.h>
#endif

void gemm(int transA, int transB, int M, int N, int K,
          float alpha, const float *A, int lda, const float *B, int ldb,
          float beta, float *C, int ldc) {
#ifdef USE_OPENBLAS
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    gemm_ref(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}
