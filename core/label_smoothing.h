/* Label smoothing (--label-smoothing e): training aims each row's softmax at
 *   target[c] = (1 - e)·[c == label] + e / classes
 * instead of the one-hot label. A row's loss is the cross-entropy against that target,
 *   loss = logsumexp(z) - sum over c of target[c]·z[c],
 * and its gradient w.r.t. the logits is softmax(z) - target. With e = 0 the target is the one-hot
 * label, to the bit. Evaluation (validation and test sets) always measures the plain loss.
 * C and CUDA. */
#ifndef MLP_LABEL_SMOOTHING_H
#define MLP_LABEL_SMOOTHING_H

#include "core/host_device.h"

/* The target's two values, worked out once (a division) before the rows that use them. */
typedef struct {
    float label; /* 1 - e + e / classes */
    float other; /* e / classes: 0 exactly when there is no smoothing */
} smoothed_targets;

MLP_HOST_DEVICE static inline smoothed_targets label_targets(float smoothing, int classes) {
    float other = smoothing / (float)classes;
    smoothed_targets t = {1.0f - smoothing + other, other};
    return t;
}

#endif
