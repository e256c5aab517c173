/* A scratch directory for the tests that write files (test_idx, test_checkpoint): created under
 * $TMPDIR (or /tmp) at the start, removed with everything in it at the end. Header-only, like
 * check.h, whose failure count is per test program. */
#ifndef MLP_TEST_TEMP_DIR_H
#define MLP_TEST_TEMP_DIR_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

#define PATH_SIZE 4096

static char temp_dir[PATH_SIZE];

/* Creates temp_dir as $TMPDIR/<test_name>.XXXXXX; false (with the reason on stderr) if it cannot. */
static bool temp_dir_create(const char *test_name) {
    const char *tmp = getenv("TMPDIR");
    snprintf(temp_dir, sizeof temp_dir, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", test_name);
    if (mkdtemp(temp_dir)) return true;
    perror(temp_dir);
    return false;
}

/* path = dir/name; a path that does not fit stops the test. */
static void join_path(char *path, const char *dir, const char *name) {
    int length = snprintf(path, PATH_SIZE, "%s/%s", dir, name);
    if (length < 0 || length >= PATH_SIZE) {
        fprintf(stderr, "path too long: %s/%s\n", dir, name);
        exit(1);
    }
}

/* path = temp_dir/name */
static void temp_path(char *path, const char *name) { join_path(path, temp_dir, name); }

/* Removes path and, for a directory, everything in it. */
static void remove_tree(const char *path) {
    struct stat info;
    if (lstat(path, &info) != 0) return;
    if (S_ISDIR(info.st_mode)) {
        DIR *dir = opendir(path);
        struct dirent *entry;
        while (dir && (entry = readdir(dir)) != NULL) {
            if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
            char child[PATH_SIZE];
            join_path(child, path, entry->d_name);
            remove_tree(child);
        }
        if (dir) closedir(dir);
        CHECK(rmdir(path) == 0, "cannot remove %s", path);
    } else {
        CHECK(unlink(path) == 0, "cannot remove %s", path);
    }
}

#endif
