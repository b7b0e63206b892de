/* backend.c - finding the CUDA backend: a shared object opened with dlopen()
 * the first time a program asks for it, so a program that never asks never
 * maps cudart or cuBLAS (and starts on a machine that has neither). The
 * CPU's table is linked in (backend_cpu.c); device.c chooses between them. */
#include "model/backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/fail.h"

#define CUDA_LIB "libaiyn_cuda.so"

static void *cuda_handle;
static const Backend *cuda_backend;
static int cuda_tried;
static char cuda_why[512];

/* path of libaiyn_cuda.so beside the running program (/proc/self/exe) */
static int beside_program(char *path, size_t len) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0;
    return snprintf(path, len, "%s/%s", exe, CUDA_LIB) < (int)len ? 0 : -1;
}

/* dlopen path and ask its aiyn_backend_cuda() for the table; NULL and why in err */
static const Backend *open_so(const char *path, void **handle, char *err, size_t errlen) {
    *handle = NULL;
    if (access(path, R_OK)) {
        fail(err, errlen, "this build has no CUDA backend (%s not found; build with nvcc on PATH)", path);
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fail(err, errlen, "the CUDA backend %s cannot be loaded (%s)", path, dlerror());
        return NULL;
    }
    /* the .so's entry point: its table, or NULL and why (no GPU, old driver) */
    const Backend *(*get)(char *, size_t) = (const Backend *(*)(char *, size_t))dlsym(h, "aiyn_backend_cuda");
    if (!get) {
        fail(err, errlen, "%s has no aiyn_backend_cuda()", path);
        dlclose(h);
        return NULL;
    }
    char why[400] = "";
    const Backend *be = get(why, sizeof why);
    if (!be) {
        fail(err, errlen, "%s", why);
        dlclose(h);
        return NULL;
    }
    if (be->abi != BACKEND_ABI) {
        fail(err, errlen, "%s was built for backend ABI %d, this program for %d (rebuild both)",
             path, be->abi, BACKEND_ABI);
        dlclose(h);
        return NULL;
    }
    *handle = h;
    return be;
}

const Backend *backend_open(const char *path, char *err, size_t errlen) {
    void *h;
    return open_so(path, &h, err, errlen);   /* dlopen counts: the same path, the same library */
}

static void open_cuda(void) {
    char path[PATH_MAX + 32];
    const char *env = getenv("AIYN_CUDA_LIB");
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else if (beside_program(path, sizeof path)) {
        fail(cuda_why, sizeof cuda_why, "cannot find the program's folder to look for " CUDA_LIB);
        return;
    }
    cuda_backend = open_so(path, &cuda_handle, cuda_why, sizeof cuda_why);
}

const Backend *backend_cuda(char *err, size_t errlen) {
    if (!cuda_tried) {
        cuda_tried = 1;
        open_cuda();
    }
    if (!cuda_backend) fail(err, errlen, "%s", cuda_why);
    return cuda_backend;
}

void *backend_cuda_symbol(const char *name) {
    return cuda_handle ? dlsym(cuda_handle, name) : NULL;
}
