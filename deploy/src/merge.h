/* merge.h — bounded-memory merging of sorted runs, for the launcher's
 * outputs (op_log.jsonl, trace files).
 *
 * A run is a byte range of a file whose items are already in order: a
 * whole part a daemon wrote in order, or a chunk of a part that the
 * launcher sorted and appended to a run file. A source reads one run
 * through a small buffer; a heap of sources yields the items of all runs
 * in order. Memory is the sources' buffers plus one chunk being sorted,
 * whatever the size of the output (issue: the launcher used to hold and
 * sort every part at once, ~0.9 x the output size). */
#ifndef KB_MERGE_H
#define KB_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rt/err.h"
#include "rt/job.h"

/* Sorted chunks a merge may keep in memory instead of a run file, in
 * chunks: a trace of up to this many chunks is never written twice. */
#define KB_MERGE_IN_MEMORY 8

/* Total bytes of source buffers while merging (split over the runs). */
#define KB_MERGE_BUDGET (24u << 20)

/* One run being read: [off, end) of `path` through a small buffer. The
 * file is opened per refill, so any number of runs needs no descriptors. */
struct kb_src {
	const char *path; /* not owned: outlives the source */
	uint64_t off;     /* next byte of the file to read */
	uint64_t end;     /* end of the run in the file */
	char *buf;
	size_t cap, pos, len; /* buf[pos, len) is read but not yet taken */
};

void kb_src_init(struct kb_src *s, const char *path, uint64_t off, uint64_t end, size_t cap);
void kb_src_release(struct kb_src *s);
/* The next `size`-byte item (valid until the next call), NULL at the end
 * of the run; a run that ends inside an item is an RT_EPROTOCOL error. */
enum rt_err kb_src_fixed(struct kb_src *s, size_t size, const void **item);
/* The next line without its '\n' (valid until the next call), NULL at the
 * end; the buffer grows for a line longer than it. */
enum rt_err kb_src_line(struct kb_src *s, const char **line, size_t *len);
/* Bytes of a part sorted at a time: 8 MiB, or KB_MERGE_CHUNK from the
 * environment (the tests make it small to cut parts into many runs). */
size_t kb_merge_chunk_bytes(void);
/* Buffer size per source when `n_runs` runs are merged at once. */
size_t kb_merge_buf_size(size_t n_runs);

/* Array `items` of *cap elements of `size` bytes, holding `n`, with room
 * for one more (doubled, `first` at the start): the array to use from now
 * on, or NULL when out of memory (then `items` is left as it was). */
void *kb_grow(void *items, size_t *cap, size_t n, size_t size, size_t first);

/* A min-heap of source ids ordered by the caller's comparison of their
 * current heads. */
typedef int kb_heap_cmp_fn(const void *ctx, uint32_t a, uint32_t b);

struct kb_heap {
	uint32_t *ids;
	uint32_t n;
	kb_heap_cmp_fn *cmp;
	const void *ctx;
};

enum rt_err kb_heap_init(struct kb_heap *h, uint32_t cap, kb_heap_cmp_fn *cmp, const void *ctx);
void kb_heap_release(struct kb_heap *h);
/* Adds `id` (room for `cap` was made at init). */
void kb_heap_push(struct kb_heap *h, uint32_t id);
/* Restores order after the top's head changed; drops the top if `gone`. */
void kb_heap_fix_top(struct kb_heap *h, bool gone);

/* Appends sorted chunks to one run file; each chunk becomes a run. */
struct kb_runs_file {
	char path[RT_PATH_MAX + 64];
	FILE *f;
	uint64_t size; /* bytes written so far: the next run's offset */
};

enum rt_err kb_runs_file_open(struct kb_runs_file *rf, const char *dir, const char *name);
enum rt_err kb_runs_file_write(struct kb_runs_file *rf, const void *bytes, size_t len);
/* Flushes before the runs are read; the file stays until the parts folder
 * is removed. */
enum rt_err kb_runs_file_close(struct kb_runs_file *rf);

#endif
