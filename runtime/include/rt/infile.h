/* infile.h — reading a user's input file with a size cap.
 *
 * A path from the command line or a YAML file may name anything: a FIFO no
 * one writes (a read blocks forever), /dev/zero (a read never ends) or a
 * multi-gigabyte file. rt_infile_read refuses what is not a regular file
 * (or, when allowed, a pipe), refuses more than `cap` bytes before reading
 * them, and never blocks on a FIFO that has no writer. */
#ifndef RT_INFILE_H
#define RT_INFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "rt/buf.h"
#include "rt/err.h"

/* Reads all of `path` into `out` (NUL-terminated). `what` names the file
 * in the error line ("config", "npy"). Pipes are read (once, up to `cap`)
 * only when `allow_pipe`; an empty pipe is an error. RT_EIO on failure. */
enum rt_err rt_infile_read(const char *path, const char *what, size_t cap,
			   bool allow_pipe, struct rt_buf *out);

/* Opens `path` for reading if it is a regular file of at most `cap` bytes
 * (following links, never blocking); returns the descriptor or -1 with
 * the error recorded. *size gets the file's size. */
int rt_infile_open(const char *path, const char *what, size_t cap, size_t *size);

#endif
