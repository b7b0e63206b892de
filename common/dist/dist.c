/* dist.c - data parallelism over MPI (dist.h), with a one-rank fallback.
 *
 * Compiled with mpicc -DAIYN_MPI when the Makefile finds Open MPI; with gcc
 * alone otherwise, and then every rank count below is 1. */
#include "dist/dist.h"
#include "core/clock.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/backend.h"
#include "core/fail.h"

#ifdef AIYN_MPI
#include <mpi.h>
#endif

static int g_on __attribute__((unused));   /* MPI initialised by dist_init */
static int g_rank, g_size = 1;
static const char *g_prog = "dist";

int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }

#ifdef AIYN_MPI
int dist_built_with_mpi(void) { return 1; }

/* An MPI error on any call: say which, on which rank, and end the job.
 * (The default, MPI_ERRORS_ARE_FATAL, also ends it, with less to go on.) */
static void on_mpi_error(MPI_Comm *comm, int *code, ...) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(*code, msg, &len);
    fprintf(stderr, "%s: rank %d of %d: MPI error: %s; ending the job\n", g_prog, g_rank, g_size, msg);
    fflush(stderr);
    MPI_Abort(*comm, 1);
}

/* mpirun ends the survivors with SIGTERM when a rank dies: say so (write(2)
 * is safe in a signal handler; the line was made at init) and go. A
 * checkpoint being written is a temporary until its rename (model_save), so
 * the last complete one stays as it was. */
static char g_term_msg[256];
static void on_sigterm(int sig) {
    (void)sig;
    ssize_t w = write(2, g_term_msg, strlen(g_term_msg));
    (void)w;
    _exit(143);
}
#else
int dist_built_with_mpi(void) { return 0; }
#endif

int dist_init(int *argc, char ***argv, const char *prog) {
    g_prog = prog;
#ifdef AIYN_MPI
    /* started by a launcher? (a plain ./program stays one rank, no MPI) */
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK")) {
        if (MPI_Init(argc, argv) != MPI_SUCCESS) {
            fprintf(stderr, "%s: MPI_Init failed\n", prog);
            exit(1);
        }
        g_on = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_size);
        MPI_Errhandler eh;
        MPI_Comm_create_errhandler(on_mpi_error, &eh);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
        snprintf(g_term_msg, sizeof g_term_msg,
                 "%s: rank %d of %d: stopped by mpirun (another rank failed or the job was cancelled)\n",
                 prog, g_rank, g_size);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigterm;
        sigaction(SIGTERM, &sa, NULL);
    }
#else
    (void)argc, (void)argv;
    /* mpirun started several copies of a binary that cannot talk to the
     * others: each would think it is the only one and write the same files */
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (n && strcmp(n, "1") != 0) {
        fprintf(stderr, "%s: error: started by mpirun as one of %s ranks, but built without MPI.\n"
                "  Install Open MPI and rebuild: apt-get install -y openmpi-bin libopenmpi-dev && make\n", prog, n);
        exit(2);
    }
#endif
    return g_size;
}

void dist_finalize(void) {
#ifdef AIYN_MPI
    if (g_on) MPI_Finalize();
    g_on = 0;
#endif
}

const char *dist_library(void) {
#ifdef AIYN_MPI
    static char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    char *nl = strpbrk(v, ",\n");   /* "Open MPI v4.1.4, package: ..." -> the name */
    if (nl) *nl = 0;
    return v;
#else
    return "none";
#endif
}

const char *dist_mpirun(void) { return geteuid() == 0 ? "mpirun --allow-run-as-root" : "mpirun"; }

void dist_quiet_others(void) {
    if (g_rank > 0 && !freopen("/dev/null", "w", stdout)) fprintf(stderr, "%s: rank %d: cannot silence stdout\n", g_prog, g_rank);
}

/* MPI counts are int: big arrays go in chunks of 2^30 elements */
void dist_sum_f32(float *x, size_t n) {
#ifdef AIYN_MPI
    if (!g_on || g_size == 1) return;
    for (size_t i = 0; i < n; i += (size_t)1 << 30) {
        size_t k = n - i < ((size_t)1 << 30) ? n - i : (size_t)1 << 30;
        MPI_Allreduce(MPI_IN_PLACE, x + i, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
#else
    (void)x, (void)n;
#endif
}

void dist_sum_f64(double *x, int n) {
#ifdef AIYN_MPI
    if (g_on && g_size > 1) MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)x, (void)n;
#endif
}

int dist_max_int(int v) {
#ifdef AIYN_MPI
    if (g_on && g_size > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#endif
    return v;
}

void dist_gather_u64(const uint64_t *mine, int n, uint64_t *all) {
#ifdef AIYN_MPI
    if (g_on && g_size > 1) {
        MPI_Allgather(mine, n, MPI_UINT64_T, all, n, MPI_UINT64_T, MPI_COMM_WORLD);
        return;
    }
#endif
    memcpy(all, mine, (size_t)n * sizeof *mine);
}

void dist_barrier(void) {
#ifdef AIYN_MPI
    if (g_on && g_size > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

_Noreturn void dist_abort(int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(msg, sizeof msg, "%s: rank %d of %d: ", g_prog, g_rank, g_size);
    vsnprintf(msg + k, sizeof msg - k, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "%s\n", msg);   /* one write: ranks' lines do not interleave */
    fflush(stderr);
#ifdef AIYN_MPI
    if (g_on && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    exit(code);
}

_Noreturn void dist_exit(int code, const char *fmt, ...) {
    if (g_rank == 0) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fflush(stdout);
        fprintf(stderr, "%s: error: %s\n", g_prog, msg);
    }
    dist_finalize();
    exit(code);
}

/* ---- data-parallel training ------------------------------------------------ */

/* MPI counts are int: a big exchange goes in chunks of 2^30 floats */
static void exchange_f32(const float *send, float *recv, size_t n, int partner) {
#ifdef AIYN_MPI
    for (size_t i = 0; i < n; i += (size_t)1 << 30) {
        size_t k = n - i < ((size_t)1 << 30) ? n - i : (size_t)1 << 30;
        MPI_Sendrecv(send + i, (int)k, MPI_FLOAT, partner, 19, recv + i, (int)k, MPI_FLOAT, partner, 19,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
#else
    (void)send, (void)recv, (void)n, (void)partner;
#endif
}

/* The rest of the gradient tree (train.h), P a power of two: in round
 * j = 0, 1, ... rank r swaps its sum with rank r XOR 2^j and adds them,
 * lower rank's first, so after the round every group of 2^(j+1) ranks
 * holds the sum of its 2^(j+1) subtrees: the tree one process adds,
 * pairing the same halves. (a + b == b + a in IEEE arithmetic, so both
 * partners get the same bits.) log2(P) rounds of n floats each way: for P
 * = 2 what a ring allreduce sends, for P = 4 2n instead of 1.5n. Any other
 * P: MPI_Allreduce, whose order MPI does not fix - equal to rounding. */
void dist_sum_tree_f32(float *g, float *recv, size_t n) {
    if (g_size == 1) return;
    if (g_size & (g_size - 1)) {
        dist_sum_f32(g, n);
        return;
    }
    for (int mask = 1; mask < g_size; mask <<= 1) {
        int partner = g_rank ^ mask;
        exchange_f32(g, recv, n, partner);
        if (g_rank < partner)
            for (size_t i = 0; i < n; i++) g[i] = g[i] + recv[i];   /* mine + theirs */
        else
            for (size_t i = 0; i < n; i++) g[i] = recv[i] + g[i];   /* theirs + mine */
    }
}

/* ---- NCCL (cuda/nccl.c, inside libaiyn_cuda.so when it was built with it) ---- */
typedef struct {
    size_t (*id_bytes)(void);
    int (*get_id)(void *id, char *err, size_t errlen);
    int (*bus_id)(char *buf, int len, char *err, size_t errlen);
    int (*init)(const void *id, int rank, int size, char *err, size_t errlen);
    int (*exchange)(const float *send, float *recv, size_t n, int peer, char *err, size_t errlen);
    int (*allreduce)(float *g, size_t n, char *err, size_t errlen);
    void (*free)(void);
    void (*version)(char *buf, size_t len);
} Nccl;
static Nccl g_nccl;

/* the functions, or 0 when the CUDA backend has none of them */
static int nccl_find(void) {
    void *f[8] = {backend_cuda_symbol("aiyn_nccl_id_bytes"), backend_cuda_symbol("aiyn_nccl_get_id"),
                  backend_cuda_symbol("aiyn_nccl_bus_id"),   backend_cuda_symbol("aiyn_nccl_init"),
                  backend_cuda_symbol("aiyn_nccl_exchange"), backend_cuda_symbol("aiyn_nccl_allreduce"),
                  backend_cuda_symbol("aiyn_nccl_free"),     backend_cuda_symbol("aiyn_nccl_version")};
    for (int i = 0; i < 8; i++)
        if (!f[i]) return 0;
    /* (data pointers to function pointers: what dlsym hands out, POSIX) */
    memcpy(&g_nccl.id_bytes, &f[0], sizeof f[0]);
    memcpy(&g_nccl.get_id, &f[1], sizeof f[1]);
    memcpy(&g_nccl.bus_id, &f[2], sizeof f[2]);
    memcpy(&g_nccl.init, &f[3], sizeof f[3]);
    memcpy(&g_nccl.exchange, &f[4], sizeof f[4]);
    memcpy(&g_nccl.allreduce, &f[5], sizeof f[5]);
    memcpy(&g_nccl.free, &f[6], sizeof f[6]);
    memcpy(&g_nccl.version, &f[7], sizeof f[7]);
    return 1;
}

/* NCCL for this GPU trainer, if it can be had: every rank finds the
 * functions, every rank's GPU is another one (PCI bus ids gathered), rank
 * 0's id reaches everyone (MPI_Bcast) and every communicator starts. Every
 * rank takes the same decision; d->path says what it was. */
static void nccl_start(DistTrainer *d, const Backend *be, size_t n) {
    char err[256] = "";
    int have = nccl_find();
    if (dist_max_int(!have)) {
        snprintf(d->path, sizeof d->path, "host memory + MPI (the CUDA backend was built without NCCL)");
        return;
    }
    enum { BUS = 32 };
    char bus[BUS] = "";
    uint64_t mine[BUS / 8], *all = malloc(sizeof(uint64_t) * (BUS / 8) * g_size);
    int bad = !all || g_nccl.bus_id(bus, BUS, err, sizeof err);
    memcpy(mine, bus, BUS);
    if (dist_max_int(bad)) {
        free(all);
        snprintf(d->path, sizeof d->path, "host memory + MPI (%s)", bad ? err : "a rank could not name its GPU");
        return;
    }
    dist_gather_u64(mine, BUS / 8, all);
    int shared = 0;
    for (int a = 0; a < g_size; a++)
        for (int b = a + 1; b < g_size; b++) shared |= !memcmp(all + a * (BUS / 8), all + b * (BUS / 8), BUS);
    free(all);
    if (shared) {
        snprintf(d->path, sizeof d->path, "host memory + MPI (ranks share a GPU; NCCL needs one GPU per rank)");
        return;
    }
    unsigned char id[512];
    bad = g_nccl.id_bytes() > sizeof id || (g_rank == 0 && g_nccl.get_id(id, err, sizeof err));
    if (dist_max_int(bad)) dist_abort(1, "NCCL: %s", bad ? err : "rank 0 could not make an id");
#ifdef AIYN_MPI
    MPI_Bcast(id, (int)g_nccl.id_bytes(), MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
    bad = g_nccl.init(id, g_rank, g_size, err, sizeof err) || !(d->d_recv = be->alloc(n * sizeof(float)));
    if (dist_max_int(bad)) dist_abort(1, "NCCL: %s", bad ? (*err ? err : "out of GPU memory") : "another rank failed to start");
    d->nccl = 1;
    char v[64];
    g_nccl.version(v, sizeof v);
    snprintf(d->path, sizeof d->path, "%s, GPU to GPU", v);
}

/* dist_sum_tree_f32 on device memory: the same rounds and pairs, each an
 * ncclSend/ncclRecv pair, and the backend's add (lower rank's first);
 * P not a power of two: ncclAllReduce */
static void nccl_sum_tree(const Backend *be, float *g, float *recv, size_t n) {
    char err[256];
    if (g_size & (g_size - 1)) {
        if (g_nccl.allreduce(g, n, err, sizeof err)) dist_abort(1, "NCCL: %s", err);
        return;
    }
    for (int mask = 1; mask < g_size; mask <<= 1) {
        int partner = g_rank ^ mask;
        if (g_nccl.exchange(g, recv, n, partner, err, sizeof err)) dist_abort(1, "NCCL: %s", err);
        if (g_rank < partner) be->residual_forward(g, g, recv, n);   /* mine + theirs */
        else be->residual_forward(g, recv, g, n);                    /* theirs + mine */
    }
}

/* TrainDP.reduce. One process on the whole batch computes
 *   loss = (1/N) sum_i l_i,  grad = (1/N) sum_i d l_i / d w    (N tokens)
 * Leaf l (a slice of n_l tokens) computed the same over its own tokens,
 * and train.c scaled its gradient by n_l / N before adding it into this
 * rank's subtree. So the global values are the sum over all leaves: every
 * rank's (loss_l, n_l) gathered (k doubles each, a small allgather), then
 * the subtrees' gradients summed (dist_sum_tree_f32, n floats). */
static void dp_reduce(TrainDP *dp, const Backend *be, float *grad, size_t n, const double *mine, int k,
                      double *all) {
    DistTrainer *d = (DistTrainer *)dp;
    double t0 = clock_wall_s(), ln = 0, nt = 0;
    for (int i = 0; i + 1 < k; i += 2) ln += mine[i] * mine[i + 1], nt += mine[i + 1];
    d->n_local = (int)nt;
    d->loss_local = nt > 0 ? (float)(ln / nt) : 0.0f;
#ifdef AIYN_MPI
    if (g_on && g_size > 1) MPI_Allgather(mine, k, MPI_DOUBLE, all, k, MPI_DOUBLE, MPI_COMM_WORLD);
    else
#endif
        memcpy(all, mine, (size_t)k * sizeof *mine);
    double tot = 0;
    for (int i = 1; i < k * g_size; i += 2) tot += all[i];
    /* Gradients in host memory (the CPU) go to MPI as they are; on a GPU
     * they go GPU to GPU through NCCL, or else through the host buffer (MPI
     * over host memory: two copies per step). Their norm is taken where
     * they live, before the sum. */
    double sq = be->sum_squares(grad, n);
    float *g = be->host_memory || d->nccl ? grad : d->host;
    if (g != grad) be->download(g, grad, n * sizeof(float));
    /* this rank's part, for the chapter: its own mean gradient is its part / (n_r / N) */
    d->local_sq = nt > 0 ? sq * (tot / nt) * (tot / nt) : 0;
    if (d->nccl) nccl_sum_tree(be, g, d->d_recv, n);
    else dist_sum_tree_f32(g, d->recv, n);
    if (g != grad) be->upload(grad, g, n * sizeof(float));
    d->comm_s += clock_wall_s() - t0;
    d->reduces++;
    int rounds = 0;
    for (int m = 1; m < g_size; m <<= 1) rounds++;
    d->bytes += (double)k * g_size * sizeof(double) + (double)rounds * n * sizeof(float);
}

uint64_t dist_weights_hash(Model *m) {
    model_pull(m);
    const uint32_t *w = (const uint32_t *)m->params.mem;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < m->params.n; i++) {
        for (int b = 0; b < 4; b++) {
            h ^= (w[i] >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

uint64_t dist_check_weights(Model *m, uint64_t step) {
    uint64_t h = dist_weights_hash(m);
    uint64_t *all = malloc((size_t)g_size * sizeof *all);
    if (!all) dist_abort(1, "out of memory for %d hashes", g_size);
    dist_gather_u64(&h, 1, all);
    int same = 1;
    for (int r = 1; r < g_size; r++) same &= all[r] == all[0];
    if (!same) {
        if (g_rank == 0) {
            fprintf(stderr, "%s: the weights differ across ranks after step %llu:\n", g_prog, (unsigned long long)step);
            for (int r = 0; r < g_size; r++)
                fprintf(stderr, "  rank %d: %016llx%s\n", r, (unsigned long long)all[r], all[r] == all[0] ? "" : "  <- differs from rank 0");
        }
        free(all);
        dist_barrier();   /* rank 0's table first */
        dist_abort(1, "weights not identical across ranks after step %llu: stopping (every rank must take the same "
                   "Adam step on the same summed gradient)", (unsigned long long)step);
    }
    free(all);
    return h;
}

/* TrainDP.after_step: the weights compared every check_every steps */
static void dp_after_step(TrainDP *dp, Model *m, uint64_t step) {
    DistTrainer *d = (DistTrainer *)dp;
    if (d->check_every > 0 && step % (uint64_t)d->check_every == 0) {
        d->hash = dist_check_weights(m, step);
        d->checked_step = step;
    }
}

int dist_attach(DistTrainer *d, Trainer *t, int check_every, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    d->t = t;
    d->check_every = check_every;
    t->dp = NULL;
    snprintf(d->path, sizeof d->path, "one rank: nothing to sum");
    if (g_size == 1) return 0;   /* one process: nothing to share */
    int bad = t->B < g_size;
    if (dist_max_int(bad))
        return fail(err, errlen, "a batch of %d sequences cannot be split over %d ranks (each needs at least one)",
                    t->B, g_size);
    if (!t->be->host_memory && !(d->host = malloc(t->n * sizeof(float)))) bad = 1;
    if (!(d->recv = malloc(t->n * sizeof(float)))) bad = 1;
    if (dist_max_int(bad)) {
        free(d->host), free(d->recv);
        d->host = d->recv = NULL;
        return fail(err, errlen, "out of memory for the host copies of %zu gradients", t->n);
    }
    d->dp = (TrainDP){.rank = g_rank, .size = g_size, .reduce = dp_reduce, .after_step = dp_after_step};
    /* the tree's level 0 even with one micro-batch (train.c) */
    t->dp = &d->dp;
    char e2[256];
    bad = trainer_set_micro(t, t->micro, e2, sizeof e2) != 0;
    t->dp = NULL;
    if (dist_max_int(bad)) {
        free(d->host), free(d->recv);
        d->host = d->recv = NULL;
        return fail(err, errlen, "%s", e2);
    }
    snprintf(d->path, sizeof d->path, "MPI, host memory");
    if (!t->be->host_memory) nccl_start(d, t->be, t->n);   /* or the host path, saying why */
    /* the same start on every rank, or the run is not one run */
    d->hash = dist_check_weights(t->model, t->step);
    d->checked_step = t->step;
    t->dp = &d->dp;
    return 0;
}

void dist_detach(DistTrainer *d) {
    if (d->t) d->t->dp = NULL;
    free(d->host);
    free(d->recv);
    if (d->nccl) {
        d->t->be->free(d->d_recv);
        g_nccl.free();
    }
    memset(d, 0, sizeof *d);
}
