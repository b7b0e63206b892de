/* model_gpu.h - gone: the model is written once (common/model.c) and runs
 * on the GPU through the backend table (common/backend.h). The one-op
 * helpers gpu_sdpa_forward_host and gpu_mha_forward_host now live in
 * common/device.h; this header only forwards there, for programs that
 * still include it. */
#include "model/device.h"
