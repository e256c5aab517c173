/* The output layer of a training step on the CPU in one OpenMP region (backend.h,
 * output_layer_step): what the unfused step does in five (three GEMMs, the softmax and the
 * hidden layer's bias sums), each a parallel region whose start and barrier cost more than the
 * thin layer's work at 16 threads. cpu_output_layer.c says how. */
#ifndef MLP_CPU_OUTPUT_LAYER_H
#define MLP_CPU_OUTPUT_LAYER_H

#include <stddef.h>

#include "core/backend.h"

/* The most classes it holds (labels are bytes). */
#define CPU_OUTPUT_LAYER_MAX_CLASSES 256

/* Floats of scratch for a layer of in inputs and classes outputs, batches of up to max_rows. */
size_t cpu_output_layer_scratch_floats(int max_rows, int in, int classes);

/* Runs step on the OpenMP team; row_loss and row_correct are written at step->cursor's row
 * (each unless NULL). The same bits for any thread count. */
void cpu_output_layer(const output_layer_step *step, float *scratch);

#endif
