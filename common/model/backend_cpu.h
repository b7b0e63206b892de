/* backend_cpu.h - the CPU backend: backend.h's table filled with the
 * library's own functions (backend_cpu.c). Always there; a model starts on
 * it (model_build) and comes back to it (model_to). */
#ifndef BACKEND_CPU_H
#define BACKEND_CPU_H

#include "model/backend.h"

/* The CPU's table: host_memory = 1, name "cpu". Never NULL. */
const Backend *backend_cpu(void);

#endif
