/* main() for a fuzz harness built without libFuzzer (the ordinary build and the sanitizer
 * build, through CTest): runs LLVMFuzzerTestOneInput once on every file of the directories or
 * files named, e.g. the seed corpus, so the harnesses and their properties are exercised on
 * every test run. Fails when nothing was run. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size);

/* Runs the harness on one file's bytes; false if the file cannot be read. */
static bool replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    struct stat info;
    if (!f || fstat(fileno(f), &info) != 0) {
        perror(path);
        if (f) fclose(f);
        return false;
    }
    size_t size = (size_t)info.st_size;
    uint8_t *bytes = malloc(size ? size : 1);
    bool ok = bytes && fread(bytes, 1, size, f) == size;
    fclose(f);
    if (ok) LLVMFuzzerTestOneInput(bytes, size);
    else fprintf(stderr, "%s: cannot read\n", path);
    free(bytes);
    return ok;
}

/* Runs the harness on path, or on each regular file in it, counting the inputs in *count;
 * false if something named cannot be read. */
static bool replay(const char *path, int *count) {
    struct stat info;
    if (stat(path, &info) != 0) {
        perror(path);
        return false;
    }
    if (!S_ISDIR(info.st_mode)) return replay_file(path) && ++*count;
    DIR *dir = opendir(path);
    struct dirent *entry;
    bool ok = dir != NULL;
    while (dir && (entry = readdir(dir)) != NULL) {
        char file[4096];
        snprintf(file, sizeof file, "%s/%s", path, entry->d_name);
        if (stat(file, &info) != 0 || !S_ISREG(info.st_mode)) continue;
        ok = replay_file(file) && ok;
        ++*count;
    }
    if (dir) closedir(dir);
    return ok;
}

int main(int argc, char **argv) {
    int count = 0;
    for (int i = 1; i < argc; i++)
        if (!replay(argv[i], &count)) return 1;
    printf("%s: %d inputs, every property held\n", argv[0], count);
    return count > 0 ? 0 : 1;
}
