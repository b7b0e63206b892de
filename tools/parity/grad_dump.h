/* grad_dump.h - gradients on demand, one Adam step, and safetensors exports:
 * the C side of tools/parity (build/parity_dump), and chapter 08's export.
 *
 * What a reader needs to check this model's backward pass against another
 * implementation (tools/parity/ does it with PyTorch). The numbers are the
 * training step's own (model/train.h): train_grad with dropout off for the
 * gradients, train_adam for the step.
 *
 *   grad_dump_write       loss, logits and every gradient, named as in the
 *                         checkpoint, in a safetensors file
 *   adam_step_dump        one Adam step (Sec. 5.3) of a Trainer, and the new
 *                         weights and moments in a safetensors file
 *   model_export_safetensors  the weights alone, for PyTorch / JAX users
 *   grad_job_run          all of it for one batch file (parity_dump --batch-file)
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
#include "model/train.h"

/* After train_grad on b: writes "loss" [1], "logits" [B,Tt,vocab] (before the
 * softmax), "logp" [B,Tt,vocab], the ids "src" [B,Ts], "tgt_in" and "tgt_out"
 * [B,Tt] (I32), and for every parameter tensor its gradient under the
 * parameter's own name ("embed", "encoder.0.self_attn.w_q", ...). */
int grad_dump_write(const Model *m, const Batch *b, float eps_ls, float loss, const char *path,
                    char *err, size_t errlen);

/* One Adam step of t (train_adam, after train_grad): step t->step + 1 with
 * t->hp's rate schedule and constants (Sec. 5.3); t->adam_m / adam_v and
 * the weights are updated in place. Then writes every parameter tensor
 * under its name, its moments as "adam_m.<name>" and "adam_v.<name>", and
 * in the metadata step, lr, beta1, beta2, eps. *lr_out (may be NULL) gets
 * the rate. A NaN or inf gradient: 2, nothing updated or written. */
int adam_step_dump(Trainer *t, const char *path, float *lr_out, char *err, size_t errlen);

/* Every parameter tensor under its checkpoint name, float32, with the Config
 * in the metadata ("N", "d_model", ..., "pre_ln", "pad_id"). */
int model_export_safetensors(const Model *m, const char *path, char *err, size_t errlen);

/* model_load, plus the TrainState when the file has one: *ts gets owned
 * adam_m / adam_v arrays of m->params.n floats (zeros and step 0 when the
 * file has none; *has_ts says which). Free them with train_state_free. */
int model_load_with_state(Model *m, const char *path, int max_B, int max_Ts, int max_Tt, TrainState *ts,
                          int *has_ts, char *err, size_t errlen);
void train_state_free(TrainState *ts);

/* ---- parity_dump --batch-file ------------------------------------------------- */
typedef struct {
    const char *batch_path;  /* the batch file (required)                       */
    const char *load;        /* the checkpoint (required; its TrainState, if    */
                             /* any, gives Adam's moments and step)             */
    const char *grad_path;   /* --grad-dump, or NULL                            */
    const char *adam_path;   /* --adam-dump, or NULL                            */
    const char *st_path;     /* --export-safetensors, or NULL (after the step)  */
    float eps_ls;            /* label smoothing (Sec. 5.4)                      */
    int warmup;              /* for the Adam step's learning rate (Sec. 5.3)    */
} GradJob;

/* Reads the batch, loads the model with room for it, runs the training
 * step's gradient pass with dropout off (a Trainer with the paper's Adam,
 * job's eps_ls and warmup), prints what it did with shapes, and writes the
 * files the job names. Returns 0, 2 for bad input (batch, checkpoint), 1 for
 * an I/O failure, with the message in err; everything it allocated is freed. */
int grad_job_run(const GradJob *job, char *err, size_t errlen);

#endif
