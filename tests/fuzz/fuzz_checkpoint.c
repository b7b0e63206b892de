/* fuzz_checkpoint.c - libFuzzer target for the checkpoint loader.
 *
 * Every input is written to a file and given to model_load (weights only,
 * then as a TrainState with caller arrays, then model_load_train). Whatever
 * the bytes, the loader must return 0 or 2 with a message, never crash,
 * leak, read out of bounds (ASan) or overflow (UBSan); a file it accepts
 * must hold only finite numbers. Run by `make fuzz` (tests/fuzz/run.sh).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io/checkpoint.h"
#include "model/model.h"

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) snprintf(path, sizeof path, "/dev/shm/fuzz_checkpoint_%ld.ckpt", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f)) abort();

    Model m;
    char err[1024];
    if (model_load(&m, path, 1, 1, 1, NULL, NULL, err, sizeof err) == 0) {
        for (size_t i = 0; i < m.params.n; i++)
            if (!isfinite(m.params.mem[i])) abort();   /* accepted a non-finite weight */
        model_free(&m);
    } else if (!err[0]) {
        abort();                                       /* refused without saying why */
    }
    TrainState ts = {0};
    if (model_load_train(&m, path, 1, 1, 1, &ts, err, sizeof err) == 0) {
        for (size_t i = 0; i < m.params.n; i++)
            if (!isfinite(ts.adam_m[i]) || !isfinite(ts.adam_v[i])) abort();
        free(ts.adam_m);
        free(ts.adam_v);
        model_free(&m);
    } else if (ts.adam_m || ts.adam_v) {
        abort();                                       /* a refusal must free what it allocated */
    }
    return 0;
}
