#define _POSIX_C_SOURCE 200809L
#include "core/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "profiling/wall_clock.h"

/* Redraw at most this often, so drawing never costs measurable time. */
#define REDRAW_SECONDS 0.1
/* In plain (non-terminal) mode, stay quiet for epochs shorter than this. */
#define PLAIN_QUIET_SECONDS 5.0
#define BAR_WIDTH 30

void progress_init(progress *p, bool enabled) {
    *p = (progress){0};
    p->enabled = enabled;
    p->terminal = enabled && isatty(STDERR_FILENO);
}

void progress_epoch_start(progress *p, int epoch, int epochs, long steps) {
    p->epoch = epoch;
    p->epochs = epochs;
    p->steps = steps;
    p->started = p->last_drawn = wall_seconds();
    p->last_quarter = 0;
}

static void draw_bar(const progress *p, long done, double elapsed) {
    int filled = (int)(BAR_WIDTH * done / (p->steps ? p->steps : 1));
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    fprintf(stderr, "\repoch %d/%d [%s] %3ld%%  %ld/%ld batches  %.1f s", p->epoch, p->epochs, bar,
            100 * done / (p->steps ? p->steps : 1), done, p->steps, elapsed);
    fflush(stderr);
}

void progress_step(progress *p, long steps_done) {
    if (!p->enabled) return;
    double now = wall_seconds();
    if (now - p->last_drawn < REDRAW_SECONDS) return;
    p->last_drawn = now;
    double elapsed = now - p->started;
    if (p->terminal) {
        draw_bar(p, steps_done, elapsed);
        return;
    }
    int quarter = (int)(4 * steps_done / (p->steps ? p->steps : 1));
    if (elapsed >= PLAIN_QUIET_SECONDS && quarter > p->last_quarter) {
        p->last_quarter = quarter;
        fprintf(stderr, "epoch %d/%d: %d%% (%ld/%ld batches, %.1f s)\n", p->epoch, p->epochs,
                25 * quarter, steps_done, p->steps, elapsed);
    }
}

void progress_epoch_end(progress *p) {
    if (p->terminal) {
        fprintf(stderr, "\r%*s\r", 90, "");
        fflush(stderr);
    }
}
