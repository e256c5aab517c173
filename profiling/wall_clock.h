/* Wall-clock time from the monotonic clock (never clock(), which counts CPU time of all threads). */
#ifndef MLP_WALL_CLOCK_H
#define MLP_WALL_CLOCK_H

/* Seconds since an arbitrary fixed point; only differences mean anything. */
double wall_seconds(void);

#endif
