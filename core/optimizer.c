#include "core/optimizer.h"
#include "util/host_memory.h"

#include <stdio.h>
#include <stdlib.h>

const char *optimizer_name(optimizer_kind kind) { return kind == OPTIMIZER_ADAM ? "adam" : "sgd"; }

/* The rate over every layer's weights, its biases left out, in [first, last) and counted from
 * first (a weight outside it gives an empty span). */
static weight_decay decay_of_weights(float rate, const mlp_shape *shape, size_t first,
                                     size_t last) {
    _Static_assert(MLP_MAX_LAYERS <= WEIGHT_DECAY_MAX_SPANS, "a span for each layer's weights");
    weight_decay decay = {.rate = rate, .spans = shape->layers};
    for (int l = 0; l < decay.spans; l++) {
        int64_t begin = (int64_t)shape->weight_offset[l];
        int64_t end = begin + (int64_t)shape->width[l] * shape->width[l + 1];
        begin = begin > (int64_t)first ? begin : (int64_t)first;
        end = end < (int64_t)last ? end : (int64_t)last;
        decay.begin[l] = begin - (int64_t)first;
        decay.end[l] = (end > begin ? end : begin) - (int64_t)first;
    }
    return decay;
}

static void upload_decay(optimizer *opt) {
    if (!opt->decay) return;
    weight_decay decay =
        decay_of_weights(opt->config.weight_decay, &opt->shape, opt->first, opt->last);
    opt->be->upload(opt->be, opt->decay, &decay, sizeof decay);
}

optimizer *optimizer_create(backend *be, optimizer_config config, const mlp_shape *shape) {
    size_t count = shape->param_count;
    optimizer *opt = zalloc_or_exit(sizeof *opt, "the optimizer");
    opt->config = config;
    opt->be = be;
    opt->count = count;
    opt->first = 0;
    opt->last = count;
    opt->shape = *shape;
    if (config.weight_decay != 0.0f) opt->decay = be->alloc(be, sizeof(weight_decay));
    upload_decay(opt);
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

void optimizer_shard(optimizer *opt, size_t first, size_t last) {
    opt->first = first;
    opt->last = last;
    upload_decay(opt);
}

void optimizer_step(optimizer *opt, float *params, const float *grads, pass_cursor *cursor,
                    int rows) {
    backend *be = opt->be;
    const optimizer_config *c = &opt->config;
    lr_schedule lr = optimizer_schedule(c);
    size_t f = opt->first, n = opt->last - opt->first;
    if (c->kind == OPTIMIZER_ADAM)
        be->adam_step(be, params + f, opt->state[0] + f, opt->state[1] + f, grads + f, n, lr,
                      c->beta1, c->beta2, c->eps, opt->decay, cursor, rows);
    else
        be->sgd_momentum_step(be, params + f, opt->state[0] + f, grads + f, n, lr, c->momentum,
                              opt->decay, cursor, rows);
}
