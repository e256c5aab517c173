/* Crash safety of checkpoint_save, shown the hard way. A child process saves checkpoints of a
 * few megabytes over one target, generation after generation, and the parent kills it with
 * SIGKILL at a random moment, most often in the middle of a write; this is repeated KILLS
 * times. After every kill:
 *   - the target loads, and is exactly one complete generation, no older than before the kill
 *     (the previous checkpoint is intact, or the new one is complete);
 *   - every temporary file the kill left behind is refused by checkpoint_load, or is exactly
 *     one complete generation (the kill fell between the write and the rename): a half-written
 *     file is never taken for a good one.
 * The kill delays are spread over twice the time one save takes here (measured first, not
 * asserted on), and the test fails unless some kills did land in the middle of a write.
 * Checkpoints are told apart by their generation (epochs_done) and every float is a function
 * of the generation and its index, so a file mixing two generations would be caught even if
 * its checksum were right. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "check.h"
#include "temp_dir.h"
#include "util/atomic_file.h"
#include "core/checkpoint.h"
#include "core/rng.h"

#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ERR_SIZE 1024
#define KILLS 120

/* 784-512-512-10 with SGD: 670k parameters and as much momentum, 5.4 MB a checkpoint. */
static const int WIDTHS[] = {784, 512, 512, 10};
#define LAYERS 3

/* What each kill left behind. */
typedef struct {
    int kills;
    int target_updated;     /* the target holds a newer generation than before the kill */
    int partial_refused;    /* a half-written temporary file, refused by checkpoint_load */
    long shortest_partial, longest_partial; /* their sizes in bytes */
    int complete_leftovers; /* a complete temporary file, killed before its rename */
} outcomes;

/* The bits of float i of generation g: a mix of (g, i), so no two generations share a float;
 * the exponent's top bit is cleared, so that every float is finite (checkpoint_load refuses
 * NaN and infinities). */
static uint32_t pattern(int generation, size_t i) {
    uint64_t x = (uint64_t)generation * 0x9E3779B97F4A7C15ULL + i;
    x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ULL;
    return (uint32_t)(x ^ (x >> 29)) & ~0x40000000u;
}

static void fill(float *values, size_t n, int generation, size_t first_index) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = pattern(generation, first_index + i);
        memcpy(&values[i], &bits, sizeof bits);
    }
}

static checkpoint generation_checkpoint(int generation) {
    checkpoint c = {0};
    char err[ERR_SIZE];
    if (!mlp_shape_make(&c.shape, WIDTHS[0], WIDTHS + 1, LAYERS - 1, WIDTHS[LAYERS], err,
                        sizeof err)) {
        fprintf(stderr, "mlp_shape_make: %s\n", err);
        exit(1);
    }
    size_t n = c.shape.param_count;
    c.optimizer = OPTIMIZER_SGD;
    c.state_arrays = 1;
    c.epochs_done = generation;
    c.optimizer_step = generation;
    c.input_scale = 1.0f / 255.0f;
    c.params = malloc(n * sizeof(float));
    c.state = malloc(n * sizeof(float));
    if (!c.params || !c.state) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    fill(c.params, n, generation, 0);
    fill(c.state, n, generation, n);
    return c;
}

/* c is generation c->epochs_done, whole and unmixed. */
static bool is_whole_generation(const checkpoint *c) {
    checkpoint expected = generation_checkpoint(c->epochs_done);
    size_t bytes = expected.shape.param_count * sizeof(float);
    bool same = mlp_shape_equal(&c->shape, &expected.shape) && c->state_arrays == 1 &&
                c->optimizer_step == c->epochs_done &&
                memcmp(c->params, expected.params, bytes) == 0 &&
                memcmp(c->state, expected.state, bytes) == 0;
    checkpoint_free(&expected);
    return same;
}

static void save_or_exit(const char *path, int generation, int failure_status) {
    checkpoint c = generation_checkpoint(generation);
    char err[ERR_SIZE];
    if (!checkpoint_save(path, &c, err, sizeof err)) {
        fprintf(stderr, "checkpoint_save: %s\n", err);
        exit(failure_status);
    }
    checkpoint_free(&c);
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The child: says it is ready on ready_fd, then saves generation after generation until
 * killed. A failed save exits with status 3. */
static void saver(const char *target, int first_generation, int ready_fd) {
    if (write(ready_fd, "r", 1) != 1) _exit(4);
    close(ready_fd);
    for (int generation = first_generation;; generation++) save_or_exit(target, generation, 3);
}

/* Starts a saver of generations first_generation.., waits until it runs, kills it after
 * delay_s seconds and reaps it. Returns its process id, or -1 (with a failed check) if it did
 * not die of the kill. */
static pid_t kill_saver_after(const char *target, int first_generation, double delay_s) {
    int ready[2];
    if (pipe(ready) != 0) {
        perror("pipe");
        exit(1);
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        exit(1);
    }
    if (child == 0) {
        close(ready[0]);
        saver(target, first_generation, ready[1]);
    }
    close(ready[1]);
    char byte;
    bool started = read(ready[0], &byte, 1) == 1;
    close(ready[0]);
    struct timespec delay = {(time_t)delay_s, (long)((delay_s - (double)(time_t)delay_s) * 1e9)};
    if (started) nanosleep(&delay, NULL);
    kill(child, SIGKILL);
    int status;
    waitpid(child, &status, 0);
    bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    CHECK(killed, "the saver ended by itself (status %d) instead of being killed", status);
    return killed ? child : -1;
}

/* The target after a kill: loadable, whole, and not older than `before`. Returns its generation. */
static int check_target(const char *target, int before, outcomes *seen) {
    checkpoint c;
    char err[ERR_SIZE] = "";
    bool ok = checkpoint_load(target, &c, err, sizeof err);
    CHECK(ok, "kill %d: the target does not load: %s", seen->kills, err);
    if (!ok) return before;
    int generation = c.epochs_done;
    CHECK(is_whole_generation(&c), "kill %d: the target is not one whole generation",
          seen->kills);
    CHECK(generation >= before, "kill %d: the target went back from generation %d to %d",
          seen->kills, before, generation);
    seen->target_updated += generation > before;
    checkpoint_free(&c);
    return generation;
}

/* The temporary file a killed saver may have left: refused, or one whole generation.
 * Removes it. */
static void check_leftover(const char *target, pid_t saver_pid, outcomes *seen) {
    char path[PATH_SIZE];
    int length = snprintf(path, sizeof path, "%s" ATOMIC_FILE_TEMP_INFIX "%ld", target,
                          (long)saver_pid);
    struct stat info;
    if (length < 0 || length >= PATH_SIZE || stat(path, &info) != 0) return;
    checkpoint c;
    char err[ERR_SIZE] = "";
    if (checkpoint_load(path, &c, err, sizeof err)) {
        CHECK(is_whole_generation(&c), "kill %d: %s was accepted but is not a whole generation",
              seen->kills, path);
        seen->complete_leftovers++;
        checkpoint_free(&c);
    } else {
        CHECK(strncmp(err, path, strlen(path)) == 0, "kill %d: refusal does not name %s: %s",
              seen->kills, path, err);
        if (seen->partial_refused++ == 0) seen->shortest_partial = seen->longest_partial = info.st_size;
        if (info.st_size < seen->shortest_partial) seen->shortest_partial = info.st_size;
        if (info.st_size > seen->longest_partial) seen->longest_partial = info.st_size;
    }
    CHECK(unlink(path) == 0, "cannot remove %s", path);
}

/* Files in temp_dir besides the target. */
static int other_files(void) {
    int found = 0;
    DIR *dir = opendir(temp_dir);
    struct dirent *entry;
    while (dir && (entry = readdir(dir)) != NULL)
        found += strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0 &&
                 strcmp(entry->d_name, "model.ckpt") != 0;
    if (dir) closedir(dir);
    return found;
}

int main(void) {
    rng r = rng_create(test_seed("test_checkpoint_crash"), 0);
    if (!temp_dir_create("test_checkpoint_crash")) return 1;
    char target[PATH_SIZE];
    temp_path(target, "model.ckpt");

    double start = seconds_now();
    save_or_exit(target, 0, 1); /* the first good checkpoint */
    double save_s = seconds_now() - start;
    printf("one save of %d-%d-%d-%d takes %.1f ms here; kills fall in 0..%.1f ms\n", WIDTHS[0],
           WIDTHS[1], WIDTHS[2], WIDTHS[3], 1e3 * save_s, 2e3 * save_s);

    outcomes seen = {0};
    int generation = 0;
    /* Kills fall in 0..window. A loaded machine saves slower than the calibration measured: after
     * every 20 kills in a row that no save outlived, the window doubles. */
    double window = 2.0 * save_s;
    int kills_without_update = 0;
    for (int k = 0; k < KILLS; k++) {
        seen.kills = k + 1;
        pid_t saver_pid = kill_saver_after(target, generation + 1, window * rng_uniform(&r));
        if (saver_pid < 0) break;
        int before = generation;
        generation = check_target(target, generation, &seen);
        kills_without_update = generation > before ? 0 : kills_without_update + 1;
        if (kills_without_update > 0 && kills_without_update % 20 == 0) window *= 2.0;
        check_leftover(target, saver_pid, &seen);
        CHECK(other_files() == 0, "kill %d: a file other than the target and the saver's "
                                  "temporary file is in %s", seen.kills, temp_dir);
    }
    printf("%d kills: target updated %d times; %d half-written temporary files (%ld to %ld "
           "bytes) refused; %d complete ones left before their rename; window at the end %.1f ms\n",
           seen.kills, seen.target_updated, seen.partial_refused, seen.shortest_partial,
           seen.longest_partial, seen.complete_leftovers, 1e3 * window);
    CHECK(seen.partial_refused > 0, "no kill landed in the middle of a write: nothing was shown");
    CHECK(seen.target_updated > 0, "no save completed between kills: the new checkpoint was "
                                   "never shown to arrive whole");
    remove_tree(temp_dir);
    return test_exit_status("test_checkpoint_crash");
}
