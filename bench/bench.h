/* bench.h - the teaching steps of bench/gemm_steps.c (see bench/README.md).
 * Each computes C (M,N) = A (M,K) @ B (K,N), row-major, C overwritten. */
#ifndef BENCH_H
#define BENCH_H

void gemm_step_reorder(float *C, const float *A, const float *B, int M, int N, int K);
void gemm_step_blocked(float *C, const float *A, const float *B, int M, int N, int K);
/* packA (4*256) and packB (256 * N rounded up to 16) floats of scratch */
void gemm_step_packed(float *C, const float *A, const float *B, int M, int N, int K,
                      float *packA, float *packB);

/* floor.c: FLOPs of every matrix product of one training step (forward and
 * backward) of the post-LN encoder-decoder; the 1-minute load average; a
 * cache line's round trip between two threads, in ns; a CPU-bound child
 * process for the busy-core run, on CPU cpu (-1: anywhere; hog_stop kills
 * it); busy_cpus_take confines this process and the children it starts
 * from now on to the first two CPUs it may use, into cpu[0] and cpu[1]
 * (0: it cannot, the system has fewer or gives no say), and
 * busy_cpus_give_back undoes it. */
#include <sys/types.h>
double step_matmul_flops(int N, int d_model, int d_ff, int vocab, int B, int Ts, int Tt);
double load_1min(void);
double core_trip_ns(void);
pid_t hog_start(int cpu);
void hog_stop(pid_t pid);
int busy_cpus_take(int cpu[2]);
void busy_cpus_give_back(void);

#endif
