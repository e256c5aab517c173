/* The learning-rate schedules (core/lr_schedule.h) against their closed forms, worked out here by
 * hand at chosen updates: the warm-up's ramp, the points where step divides, cosine's half and
 * end, onecycle's line, the clamp past the run's end, and the constant rate to the bit. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "core/lr_schedule.h"

static void expect(lr_schedule s, int32_t t, double want, const char *what) {
    double got = schedule_lr(s, t);
    CHECK(fabs(got - want) <= 1e-6 * fabs(want) + 1e-9, "%s schedule, update %d (%s): %.9g, want %.9g",
          schedule_name(s.kind), t, what, got, want);
}

int main(void) {
    const float lr = 0.2f;
    /* 10 warm-up updates, then 100 more: p = (t - 10) / 100 */
    lr_schedule constant = {SCHEDULE_CONSTANT, lr, 0, 110};
    float bits = schedule_lr(constant, 57);
    CHECK(memcmp(&bits, &lr, sizeof lr) == 0, "constant: not lr to the bit");
    CHECK(!schedule_varies(constant), "constant without warm-up varies");

    for (int k = 0; k < SCHEDULE_KINDS; k++) {
        lr_schedule s = {(schedule_kind)k, lr, 10, 110};
        CHECK(schedule_varies(s), "%s with warm-up does not vary", schedule_name(s.kind));
        expect(s, 0, lr * 1 / 10.0, "first warm-up update");
        expect(s, 4, lr * 5 / 10.0, "mid warm-up");
        expect(s, 9, lr, "last warm-up update");
    }
    lr_schedule step = {SCHEDULE_STEP, lr, 10, 110};
    expect(step, 10, lr, "p = 0");
    expect(step, 59, lr, "p = 0.49");
    expect(step, 60, lr / 10, "p = 0.5");
    expect(step, 84, lr / 10, "p = 0.74");
    expect(step, 85, lr / 100, "p = 0.75");
    lr_schedule cosine = {SCHEDULE_COSINE, lr, 10, 110};
    expect(cosine, 10, lr, "p = 0");
    expect(cosine, 35, lr * (1 + cos(M_PI / 4)) / 2, "p = 0.25");
    expect(cosine, 60, lr / 2, "p = 0.5");
    expect(cosine, 110, 0.0, "p = 1");
    expect(cosine, 500, 0.0, "past the end");
    lr_schedule onecycle = {SCHEDULE_ONECYCLE, lr, 10, 110};
    expect(onecycle, 10, lr, "p = 0");
    expect(onecycle, 70, lr * 0.4, "p = 0.6");
    expect(onecycle, 110, 0.0, "p = 1");
    lr_schedule no_warmup = {SCHEDULE_COSINE, lr, 0, 100};
    expect(no_warmup, 0, lr, "first update, no warm-up");
    expect(no_warmup, 50, lr / 2, "p = 0.5, no warm-up");
    return test_exit_status("test_lr_schedule");
}
