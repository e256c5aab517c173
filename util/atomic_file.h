/* Output files written whole or not at all: the checkpoint (--save), the CSV log (--log) and
 * mlp_bench's results.
 *
 * atomic_file_write writes a temporary file beside the target (TARGET.tmp.PID), forces it to
 * the disk (fsync), renames it over the target and forces the rename to the disk (fsync on the
 * directory): a crash or a power cut leaves the old file or the new one, never half of one.
 *
 * Targets: a regular file is replaced; a path that does not exist is created. A symbolic link
 * is followed: the file it points to is replaced and the link keeps pointing at it (a link to
 * nothing is refused). Anything else that exists (a device such as /dev/full, a FIFO, a
 * directory, a socket) is refused, never replaced. */
#ifndef MLP_ATOMIC_FILE_H
#define MLP_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Between the target's name and the writing process's id in the temporary file's name. */
#define ATOMIC_FILE_TEMP_INFIX ".tmp."

/* Writes the whole contents to out; false (errno set) if a write failed. */
typedef bool atomic_file_writer(FILE *out, const void *contents);

/* Whether atomic_file_write(path) could succeed, found out before the work that produces the
 * contents: the target is one that may be replaced (see above) and a temporary file can be
 * created beside it (it is removed again). False with "PATH: problem" in err. */
bool atomic_file_check(const char *path, char *err, size_t err_size);

/* Replaces path with what write produces, as above. On failure the target is as it was, no
 * temporary file is left, and err holds "PATH: problem". */
bool atomic_file_write(const char *path, atomic_file_writer *write, const void *contents,
                       char *err, size_t err_size);

#endif
