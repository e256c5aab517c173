#include "core/optimizer.h"
#include "util/host_memory.h"

#include <stdio.h>
#include <stdlib.h>

const char *optimizer_name(optimizer_kind kind) { return kind == OPTIMIZER_ADAM ? "adam" : "sgd"; }

/* The rate over every layer's weights, its biases left out. */
static weight_decay decay_of_weights(float rate, const mlp_shape *shape) {
    _Static_assert(MLP_MAX_LAYERS <= WEIGHT_DECAY_MAX_SPANS, "a span for each layer's weights");
    weight_decay decay = {.rate = rate, .spans = shape->layers};
    for (int l = 0; l < decay.spans; l++) {
        decay.begin[l] = (int64_t)shape->weight_offset[l];
        decay.end[l] = decay.begin[l] + (int64_t)shape->width[l] * shape->width[l + 1];
    }
    return decay;
}

optimizer *optimizer_create(backend *be, optimizer_config config, const mlp_shape *shape) {
    size_t count = shape->param_count;
    optimizer *opt = zalloc_or_exit(sizeof *opt, "the optimizer");
    opt->config = config;
    opt->be = be;
    opt->count = count;
    if (config.weight_decay != 0.0f) {
        weight_decay decay = decay_of_weights(config.weight_decay, shape);
        opt->decay = be->alloc(be, sizeof decay);
        be->upload(be, opt->decay, &decay, sizeof decay);
    }
    opt->state_arrays = config.kind == OPTIMIZER_ADAM ? 2 : 1;
    float *zeros = zalloc_or_exit(count * sizeof(float), "the optimizer's initial state");
    for (int i = 0; i < opt->state_arrays; i++) {
        opt->state[i] = be->alloc(be, count * sizeof(float));
        be->upload(be, opt->state[i], zeros, count * sizeof(float));
    }
    free(zeros);
    return opt;
}

void optimizer_destroy(optimizer *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->state_arrays; i++) opt->be->release(opt->be, opt->state[i]);
    if (opt->decay) opt->be->release(opt->be, opt->decay);
    free(opt);
}

void optimizer_step(optimizer *opt, float *params, const float *grads, pass_cursor *cursor,
                    int rows) {
    backend *be = opt->be;
    const optimizer_config *c = &opt->config;
    lr_schedule lr = optimizer_schedule(c);
    if (c->kind == OPTIMIZER_ADAM)
        be->adam_step(be, params, opt->state[0], opt->state[1], grads, opt->count, lr, c->beta1,
                      c->beta2, c->eps, opt->decay, cursor, rows);
    else
        be->sgd_momentum_step(be, params, opt->state[0], grads, opt->count, lr, c->momentum,
                              opt->decay, cursor, rows);
}
