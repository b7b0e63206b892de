/* grad_dump.h - gradients on demand, one Adam step, and safetensors exports.
 *
 * What a reader needs to check this model's backward pass against another
 * implementation (tools/parity/ does it with PyTorch):
 *
 *   model_loss_grad       forward with dropout OFF on a padded Batch, the
 *                         label-smoothed loss of Sec. 5.4, backward: every
 *                         parameter's gradient in m->grads
 *   grad_dump_write       loss, logits and every gradient, named as in the
 *                         checkpoint, in a safetensors file
 *   adam_step_dump        one Adam step (Sec. 5.3) from a TrainState, and
 *                         the new weights and moments in a safetensors file
 *   model_export_safetensors  the weights alone, for PyTorch / JAX users
 *
 * The file layouts are documented in chapters/07_transformer/README.md.
 * Each writer returns 0, 1 for an I/O failure, 2 for a bad argument, with a
 * message in err; a failed write leaves no partial file.
 */
#ifndef GRAD_DUMP_H
#define GRAD_DUMP_H

#include <stddef.h>
#include "io/batch_file.h"
#include "io/checkpoint.h"
#include "model/model.h"

/* Zeroes m->grads, runs model_forward(training = 0: no dropout) on b,
 * the label-smoothed cross-entropy with eps_ls over the non-padding targets,
 * and model_backward. dlogits (B*Tt, vocab) is scratch. b must fit m
 * (model_check_sizes) and hold valid ids (batch_pad). Returns the loss. */
float model_loss_grad(Model *m, const Batch *b, float eps_ls, float *dlogits);

/* After model_loss_grad: writes "loss" [1], "logits" [B,Tt,vocab] (before the
 * softmax), "logp" [B,Tt,vocab], the ids "src" [B,Ts], "tgt_in" and "tgt_out"
 * [B,Tt] (I32), and for every parameter tensor its gradient under the
 * parameter's own name ("embed", "encoder.0.self_attn.w_q", ...). */
int grad_dump_write(const Model *m, const Batch *b, float eps_ls, float loss, const char *path,
                    char *err, size_t errlen);

/* One Adam step on m->params with m->grads (after model_loss_grad):
 * step = ts->step + 1, lr = lr_schedule(step, d_model, warmup, factor),
 * betas (0.9, 0.98), eps 1e-9 (Sec. 5.3). ts->adam_m / adam_v are updated in
 * place and ts->step incremented. Then writes every parameter tensor under
 * its name, its moments as "adam_m.<name>" and "adam_v.<name>", and in the
 * metadata step, lr, beta1, beta2, eps. *lr_out (may be NULL) gets the rate. */
int adam_step_dump(Model *m, TrainState *ts, int warmup, float factor, const char *path, float *lr_out,
                   char *err, size_t errlen);

/* Every parameter tensor under its checkpoint name, float32, with the Config
 * in the metadata ("N", "d_model", ..., "pre_ln", "pad_id"). */
int model_export_safetensors(const Model *m, const char *path, char *err, size_t errlen);

/* model_load, plus the TrainState when the file has one: *ts gets owned
 * adam_m / adam_v arrays of m->params.n floats (zeros and step 0 when the
 * file has none; *has_ts says which). Free them with train_state_free. */
int model_load_with_state(Model *m, const char *path, int max_B, int max_Ts, int max_Tt, TrainState *ts,
                          int *has_ts, char *err, size_t errlen);
void train_state_free(TrainState *ts);

/* ---- the whole --batch-file mode of 07_transformer -------------------------- */
typedef struct {
    const char *batch_path;  /* the batch file (required)                       */
    const char *load;        /* checkpoint, or NULL: build cfg with seed        */
    const char *grad_path;   /* --grad-dump, or NULL                            */
    const char *adam_path;   /* --adam-dump, or NULL                            */
    const char *st_path;     /* --export-safetensors, or NULL (after the step)  */
    float eps_ls;            /* label smoothing (Sec. 5.4)                      */
    int warmup;              /* for the Adam step's learning rate (Sec. 5.3)    */
} GradJob;

/* Reads the batch, loads (or builds) the model with room for it, runs
 * model_loss_grad, prints what it did with shapes, and writes the files the
 * job names. Returns 0, 2 for bad input (batch, checkpoint), 1 for an I/O
 * failure, with the message in err; everything it allocated is freed. */
int grad_job_run(const GradJob *job, const Config *cfg, uint64_t seed, char *err, size_t errlen);

#endif
