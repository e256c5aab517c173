/* Writing output files whole or not at all; see atomic_file.h. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* realpath */
#include "util/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file to replace: path itself, or the file a symbolic link at path points to; malloc'd.
 * NULL, with the reason in err, for a target that must not be replaced. */
static char *resolve_target(const char *path, char *err, size_t err_size) {
    struct stat info;
    if (lstat(path, &info) != 0) {
        if (errno == ENOENT) return strdup(path); /* a new file (or a missing folder: found later) */
        snprintf(err, err_size, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *target = S_ISLNK(info.st_mode) ? realpath(path, NULL) : strdup(path);
    if (!target) {
        snprintf(err, err_size, "%s: a symbolic link to nothing (%s); give the file itself",
                 path, strerror(errno));
        return NULL;
    }
    if (stat(target, &info) == 0 && !S_ISREG(info.st_mode)) {
        snprintf(err, err_size,
                 "%s: exists and is not a regular file (%s); mlp_train replaces only regular files",
                 path, S_ISDIR(info.st_mode) ? "a directory" : "a device, FIFO or socket");
        free(target);
        return NULL;
    }
    return target;
}

static char *temp_name_for(const char *target) {
    size_t size = strlen(target) + sizeof ATOMIC_FILE_TEMP_INFIX + 24;
    char *temp = malloc(size);
    if (temp) snprintf(temp, size, "%s" ATOMIC_FILE_TEMP_INFIX "%ld", target, (long)getpid());
    return temp;
}

bool atomic_file_check(const char *path, char *err, size_t err_size) {
    char *target = resolve_target(path, err, err_size);
    if (!target) return false;
    char *temp = temp_name_for(target);
    bool ok = temp != NULL;
    if (!ok) snprintf(err, err_size, "%s: out of host memory", path);
    if (ok) {
        int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        ok = fd >= 0 || errno == EEXIST; /* EEXIST: a crash's leftover, not ours to remove */
        if (fd >= 0) {
            close(fd);
            unlink(temp);
        } else if (!ok) {
            snprintf(err, err_size, "%s: cannot write there: %s", path, strerror(errno));
        }
    }
    free(temp);
    free(target);
    return ok;
}

/* Writes the contents into a new file at temp and forces it to the disk; on failure removes
 * temp and explains. */
static bool write_durably(const char *path, const char *temp, atomic_file_writer *write,
                          const void *contents, char *err, size_t err_size) {
    FILE *f = fopen(temp, "wb");
    if (!f) {
        snprintf(err, err_size, "%s: cannot create its temporary file %s: %s", path, temp,
                 strerror(errno));
        return false;
    }
    bool ok = write(f, contents) && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        snprintf(err, err_size, "%s: cannot write: %s", temp, strerror(saved));
        remove(temp);
    }
    return ok;
}

static bool replace(const char *temp, const char *path, char *err, size_t err_size) {
    if (rename(temp, path) == 0) return true;
    snprintf(err, err_size, "%s: cannot replace: %s", path, strerror(errno));
    remove(temp);
    return false;
}

/* Forces a rename in path's directory to the disk (fsync on the directory). File systems that
 * cannot sync a directory (EINVAL) have nothing more to do. */
static bool sync_directory_of(const char *path, char *err, size_t err_size) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) {
        snprintf(err, err_size, "%s: out of host memory", path);
        return false;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bool ok = fd >= 0 && (fsync(fd) == 0 || errno == EINVAL);
    if (!ok)
        snprintf(err, err_size, "%s: written, but its directory %s cannot be synced: %s", path, dir,
                 strerror(errno));
    if (fd >= 0) close(fd);
    free(dir);
    return ok;
}

bool atomic_file_write(const char *path, atomic_file_writer *write, const void *contents,
                       char *err, size_t err_size) {
    char *target = resolve_target(path, err, err_size);
    if (!target) return false;
    char *temp = temp_name_for(target);
    bool ok = temp != NULL;
    if (!ok) snprintf(err, err_size, "%s: out of host memory", path);
    ok = ok && write_durably(path, temp, write, contents, err, err_size) &&
         replace(temp, target, err, err_size) && sync_directory_of(target, err, err_size);
    free(temp);
    free(target);
    return ok;
}
