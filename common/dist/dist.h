/* dist.h - synchronous data parallelism over MPI, as the paper trained
 * (Sec. 5.2: "one machine with 8 NVIDIA P100 GPUs", each GPU a slice of
 * every ~25,000-token batch, one optimizer step for all).
 *
 *   every rank: the same weights, the same global batch (B,T) from the one
 *               data stream, its token-balanced slices (micro-batches) of it
 *   forward + backward on each slice l     -> grad_l, mean over n_l tokens
 *   sum of (n_l / N) grad_l over the ranks -> the mean over all N tokens:
 *               the gradient of one process on the whole batch, added up
 *               in a fixed tree (train.h): the same bits as one process
 *               when the ranks are a power of two dividing the slices
 *   the same Adam step on every rank       -> the same weights, checked
 *               (a hash of the weights, gathered every K steps)
 *
 * Rank 0 alone writes checkpoints and output. The data stream and the
 * dropout bits do not depend on the number of ranks (train.h, Model.
 * drop_row0), so a checkpoint resumes with any number of ranks.
 *
 * Built with mpicc when the Makefile finds it (-DAIYN_MPI; Debian:
 * apt-get install openmpi-bin libopenmpi-dev). Without it, and in a
 * program not started by mpirun, there is one rank and every call here is
 * the identity: the same program runs either way. Only programs that call
 * these functions link libmpi; train.c reaches them through TrainDP's
 * function pointers.
 *
 * On GPUs (--device cuda) the sum goes device to device through NCCL when
 * libaiyn_cuda.so was built with it (cuda/nccl.c) and each rank has a GPU
 * of its own, in the same fixed tree (ncclSend/ncclRecv pairs, then the
 * backend's add); otherwise through host memory and MPI. DistTrainer.path
 * says which, and why.
 *
 * Failures: a rank that dies ends the whole job (mpirun kills the others
 * within seconds; each survivor says why on stderr); an MPI error prints
 * its text and calls MPI_Abort; dist_abort is the program's own way out.
 * Never a hang in a collective that one rank will not reach.
 */
#ifndef DIST_H
#define DIST_H

#include <stddef.h>
#include <stdint.h>
#include "model/train.h"

/* MPI_Init when started by a launcher (mpirun sets OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK or PMI_RANK); otherwise one rank without MPI. prog names the
 * messages. Returns the number of ranks. */
int dist_init(int *argc, char ***argv, const char *prog);
void dist_finalize(void);            /* MPI_Finalize when MPI is on */
int dist_rank(void);                 /* 0 .. dist_size()-1          */
int dist_size(void);
int dist_built_with_mpi(void);       /* 1: this binary was built with mpicc */
const char *dist_library(void);      /* "Open MPI v4.1.4 ..." or "none" */
/* The launcher as a hint should print it, for the user running this:
 * "mpirun", or "mpirun --allow-run-as-root" for root (Open MPI refuses
 * to start as root without it). */
const char *dist_mpirun(void);
/* ranks > 0: stdout goes to /dev/null (stderr stays, for errors) */
void dist_quiet_others(void);

/* collectives; with one rank each is the identity */
void dist_sum_f32(float *x, size_t n);                  /* in place, every rank gets the sum */
void dist_sum_f64(double *x, int n);
int dist_max_int(int v);                                /* e.g. "did any rank fail?" */
/* g (n floats, host) summed over the ranks as a fixed binary tree, the
 * same bits on every rank and the same pairing as one process adding the
 * ranks' parts (P a power of two; other P: dist_sum_f32). recv: n floats
 * of scratch. */
void dist_sum_tree_f32(float *g, float *recv, size_t n);
void dist_gather_u64(const uint64_t *mine, int n, uint64_t *all);   /* all[r*n + i], every rank */
void dist_barrier(void);
/* prints "prog: rank r of P: msg" and ends every rank (MPI_Abort), code:
 * for a failure of this rank alone */
_Noreturn void dist_abort(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* for a failure every rank meets at the same point (a bad flag, a batch
 * too small for the ranks): rank 0 prints "prog: error: msg", every rank
 * finalizes and exits with code - no abort, no message per rank */
_Noreturn void dist_exit(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- data-parallel training ------------------------------------------------ */
typedef struct {
    TrainDP dp;            /* what the Trainer calls (train.h)                  */
    Trainer *t;
    int check_every;       /* weights hash compared every K steps (0: never)    */
    float *host;           /* (n) host copy of the gradients, for a non-CPU backend */
    float *recv;           /* (n) the partner's sum in dist_sum_tree_f32        */
    /* GPUs: NCCL moves the gradients device to device (cuda/nccl.c) when the
     * CUDA backend was built with it and every rank has a GPU of its own */
    int nccl;              /* 1: the sum goes through NCCL                      */
    float *d_recv;         /* (n) the partner's sum, in device memory           */
    char path[160];        /* how the gradients are summed, in words            */
    /* measured, in this rank: */
    double comm_s;         /* seconds inside each step's allgather + tree sum   */
    long reduces;          /* steps reduced                                     */
    double bytes;          /* bytes this rank sent                              */
    int n_local;           /* tokens of this rank's slice at the last step      */
    float loss_local;      /* its mean loss over them                           */
    double local_sq;       /* and the sum of squares of its own mean gradient   */
    uint64_t checked_step; /* last step whose weights were compared             */
    uint64_t hash;         /* and their hash                                    */
} DistTrainer;

/* Makes t data parallel over every rank (with one rank: t->dp stays NULL,
 * one process, nothing changes). Checks that every rank starts from the
 * same weights (a fresh model from one seed, or one checkpoint) and that
 * the batch has a row for every rank. Returns 0, or 2 with a message. */
int dist_attach(DistTrainer *d, Trainer *t, int check_every, char *err, size_t errlen);
void dist_detach(DistTrainer *d);    /* frees the buffers (and NCCL's communicator); t->dp = NULL */

/* FNV-1a over the weights' bits (brought to the host first) */
uint64_t dist_weights_hash(Model *m);
/* Gathers every rank's hash of its weights; all equal: returns the hash;
 * different: rank 0 prints every rank's hash and the job ends (dist_abort). */
uint64_t dist_check_weights(Model *m, uint64_t step);

#endif
