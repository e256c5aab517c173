/* Progress of a long run, on stderr: a live bar when stderr is a terminal, otherwise a plain
 * line now and then for epochs long enough to need one. Never writes to stdout. */
#ifndef MLP_PROGRESS_H
#define MLP_PROGRESS_H

#include <stdbool.h>

typedef struct {
    bool enabled;
    bool terminal;
    int epoch, epochs;
    long steps;
    double started;        /* wall_seconds() at the epoch's start */
    double last_drawn;     /* when the bar or line was last written */
    int last_quarter;      /* plain mode: last quarter of the epoch reported */
} progress;

void progress_init(progress *p, bool enabled);
void progress_epoch_start(progress *p, int epoch, int epochs, long steps);
void progress_step(progress *p, long steps_done);
/* Clears the bar so the epoch's result line can take its place. */
void progress_epoch_end(progress *p);

#endif
