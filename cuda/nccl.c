/* nccl.c - the gradient sum between GPUs over NCCL (chapter 13, common/dist/dist.c).
 *
 * Data parallel on GPUs, as llm.c does it: the gradients stay in device
 * memory and NCCL moves them GPU to GPU (NVLink or PCIe), instead of two
 * copies through the host and MPI per step. MPI still starts the ranks
 * and bootstraps NCCL: rank 0 makes an ncclUniqueId, MPI_Bcast hands it
 * to everyone, every rank calls ncclCommInitRank.
 *
 * Built into libaiyn_cuda.so only when the Makefile finds nccl.h and
 * libnccl (make NCCL=0: never). No program links NCCL: dist.c looks these
 * functions up with backend_cuda_symbol, and a .so without them means the
 * gradients go through the host. Every function returns 0, or -1 with a
 * message in err. All work is on the legacy default stream, the one the
 * backend's kernels use, and each call waits for it to finish.
 *
 * NCCL wants one GPU per rank (two ranks on one GPU: "duplicate GPU"), so
 * dist.c first compares the ranks' PCI bus ids and keeps the host path when
 * any two share a device. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

static ncclComm_t g_comm;
static int g_on;

static int nccl_fail(ncclResult_t r, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "%s: %s", what, ncclGetErrorString(r));
    return -1;
}

/* bytes of an ncclUniqueId (what rank 0 broadcasts) */
size_t aiyn_nccl_id_bytes(void) { return sizeof(ncclUniqueId); }

/* rank 0: a fresh id into id (aiyn_nccl_id_bytes() bytes) */
int aiyn_nccl_get_id(void *id, char *err, size_t errlen) {
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess) return nccl_fail(r, "ncclGetUniqueId", err, errlen);
    memcpy(id, &u, sizeof u);
    return 0;
}

/* "0000:3b:00.0": the PCI bus id of this rank's current device */
int aiyn_nccl_bus_id(char *buf, int len, char *err, size_t errlen) {
    int d = 0;
    cudaError_t c = cudaGetDevice(&d);
    if (c == cudaSuccess) c = cudaDeviceGetPCIBusId(buf, len, d);
    if (c != cudaSuccess) {
        snprintf(err, errlen, "the GPU's PCI bus id: %s", cudaGetErrorString(c));
        return -1;
    }
    return 0;
}

/* every rank, with rank 0's id: one communicator over the P ranks */
int aiyn_nccl_init(const void *id, int rank, int size, char *err, size_t errlen) {
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = ncclCommInitRank(&g_comm, size, u, rank);
    if (r != ncclSuccess) return nccl_fail(r, "ncclCommInitRank", err, errlen);
    g_on = 1;
    return 0;
}

static int wait_stream(char *err, size_t errlen) {
    cudaError_t c = cudaStreamSynchronize(0);
    if (c != cudaSuccess) {
        snprintf(err, errlen, "after an NCCL call: %s", cudaGetErrorString(c));
        return -1;
    }
    return 0;
}

/* One round of dist.c's tree: send n floats of device memory to peer and
 * receive as many from it into recv, both at once (a group, so neither
 * waits for the other to post first). */
int aiyn_nccl_exchange(const float *send, float *recv, size_t n, int peer, char *err, size_t errlen) {
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) r = ncclSend(send, n, ncclFloat, peer, g_comm, 0);
    if (r == ncclSuccess) r = ncclRecv(recv, n, ncclFloat, peer, g_comm, 0);
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess) r = e;
    if (r != ncclSuccess) return nccl_fail(r, "ncclSend/ncclRecv", err, errlen);
    return wait_stream(err, errlen);
}

/* g summed over every rank in place (any number of ranks; NCCL's order) */
int aiyn_nccl_allreduce(float *g, size_t n, char *err, size_t errlen) {
    ncclResult_t r = ncclAllReduce(g, g, n, ncclFloat, ncclSum, g_comm, 0);
    if (r != ncclSuccess) return nccl_fail(r, "ncclAllReduce", err, errlen);
    return wait_stream(err, errlen);
}

void aiyn_nccl_free(void) {
    if (g_on) ncclCommDestroy(g_comm);
    g_on = 0;
}

/* "NCCL 2.28.9" */
void aiyn_nccl_version(char *buf, size_t len) {
    int v = 0;
    ncclGetVersion(&v);
    snprintf(buf, len, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}
