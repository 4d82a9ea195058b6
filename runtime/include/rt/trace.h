/* trace.h — trace records as components write them, and how they are read
 * back.
 *
 * The simulation's hot path appends fixed-size binary records (no text is
 * formatted while simulating). Each component keeps a small table of the
 * strings its records name. The launcher reads every part once, sorts all
 * records by time, pairs message ends and writes the requested format
 * (deploy/src/trace_out.c). Filters (--trace-window, --trace-ranks,
 * --trace-flows) are applied where records are made, so a filtered trace is
 * also cheaper to make. */
#ifndef RT_TRACE_H
#define RT_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rt/buf.h"
#include "rt/err.h"

#define RT_TRACE_NONE 0xffffu   /* "no string" */
#define RT_TRACE_TRACKS 8       /* tracks per component (0: messages) */
#define RT_TRACE_MAX_NAMES 0xfff0u

enum rt_trace_kind {
	RT_TRACE_SLICE = 1,   /* [ts, ts + val) on `track` */
	RT_TRACE_SEND,        /* message (self, seq) leaves at ts */
	RT_TRACE_RECV,        /* message (src, seq) is delivered at ts */
	RT_TRACE_COUNTER,     /* counter `name` is `val` from ts on */
};

enum rt_trace_format { RT_TRACE_JSON, RT_TRACE_JSON_GZ, RT_TRACE_PERFETTO };

/* What the user asked to be traced, beyond --trace on|off and
 * --trace-windows (job.h carries one). */
struct rt_trace_opts {
	bool no_flows;              /* --trace-flows off */
	enum rt_trace_format format;
	uint64_t from_ps, to_ps;    /* --trace-window, in ps; to_ps 0: no end */
	uint64_t ranks;             /* --trace-ranks bit mask; 0: every rank */
};

/* One record: 40 bytes, written in host byte order (parts never leave the
 * machine that made them). */
struct rt_trace_rec {
	uint64_t ts_ps;
	uint64_t val;     /* slice: duration (ps); counter: value */
	uint64_t seq;     /* message: sender's sequence; slice: command id */
	uint32_t src;     /* message: sender's id; slice: stage index */
	uint16_t name;    /* ids in the writing component's string table */
	uint16_t cat;
	uint16_t site;    /* slice: kernel call site "file:line", or NONE */
	uint8_t kind;     /* enum rt_trace_kind */
	uint8_t track;    /* slice: 1..RT_TRACE_TRACKS-1; messages: 0 */
	uint32_t flags;   /* RT_TRACE_F_* */
};

#define RT_TRACE_F_COMMAND 1u /* slice: seq is a command id */
#define RT_TRACE_F_STAGE 2u   /* slice: src is a stage index */

/* One op log record as a component writes it (rt_oplog): 72 bytes in host
 * byte order, strings as ids in the component's own op log string table
 * (an rt_trace_writer of its own, files `<id>.oplog` and `<id>.onames`).
 * The launcher merges them by (start, end, comp, seq) and formats
 * op_log.jsonl once, at the end (ADR 0055). */
struct rt_oplog_bin {
	uint64_t start_ps, end_ps, issue_ps;
	uint64_t seq;       /* the component's record number: ties at one key */
	uint64_t bytes, elements, command;
	uint32_t comp;      /* the writing component's id */
	uint32_t stage;
	uint16_t engine, op_kind, op_name;
	uint16_t pad;       /* zero */
};

/* One component's (or the coordinator's) trace being written. */
struct rt_trace_writer {
	struct rt_buf recs;
	char **names;
	uint32_t n_names, cap_names;
	uint16_t track_name[RT_TRACE_TRACKS];
	FILE *file;
	bool full;        /* string table overflowed: names read "..." */
};

void rt_trace_writer_init(struct rt_trace_writer *w);
void rt_trace_writer_release(struct rt_trace_writer *w);
/* The id of `s` in the table (added when new). */
uint16_t rt_trace_intern(struct rt_trace_writer *w, const char *s);
/* Names track `track` (1..RT_TRACE_TRACKS-1) of this component. */
void rt_trace_name_track(struct rt_trace_writer *w, unsigned track, const char *name);
enum rt_err rt_trace_put(struct rt_trace_writer *w, const struct rt_trace_rec *r);
/* Appends pending records to `<dir>/<stem>.trace`; `final` also appends
 * the string table, its length and RT_TRACE_TAIL_MAGIC (8 bytes each),
 * and closes: a part is one file. */
enum rt_err rt_trace_flush(struct rt_trace_writer *w, const char *dir, const char *stem,
			   bool final);
/* The same as `<dir>/<stem>.<ext>`: the op log's parts use the writer too. */
enum rt_err rt_trace_flush_as(struct rt_trace_writer *w, const char *dir, const char *stem,
			      const char *ext, bool final);
#define RT_TRACE_TAIL_MAGIC 0x3153454d414e424bull /* "KBNAMES1" */
/* Reads only the string table at the end of the part file `path` (as a
 * final flush wrote it; missing or empty: no names, no records) into
 * p->names and p->track_name, p->recs left NULL, and the bytes of records
 * before it into *recs_len; released by rt_trace_part_release. */
struct rt_trace_part;
enum rt_err rt_trace_names_read(const char *path, struct rt_trace_part *p, uint64_t *recs_len);
/* Splits a part file's bytes (empty: nothing) into its records, the first
 * *recs_len bytes, and its string table; RT_EPROTOCOL when its end is not
 * a string table's length and the magic word. */
enum rt_err rt_trace_part_split(const void *bytes, size_t len, const char *what,
				size_t *recs_len, const void **names, size_t *names_len);

/* True if a record of rank `rank` spanning [from, to] is wanted. */
bool rt_trace_wanted(const struct rt_trace_opts *o, uint32_t rank, uint64_t from,
		     uint64_t to);

/* Parses "--trace-window START:END" (simulated µs, decimal, END may be
 * empty) and "--trace-ranks 0,2-3"; one clear line on error. */
enum rt_err rt_trace_parse_window(const char *s, struct rt_trace_opts *o);
enum rt_err rt_trace_parse_ranks(const char *s, struct rt_trace_opts *o);
enum rt_err rt_trace_parse_format(const char *s, struct rt_trace_opts *o);

/* A component's part as read back: records and the strings they name. */
struct rt_trace_part {
	struct rt_trace_rec *recs;
	size_t n;
	char *strings;     /* the part's string table */
	const char **names;
	uint32_t n_names;
	uint16_t track_name[RT_TRACE_TRACKS];
};

/* Reads `<dir>/<stem>.trace` (a missing file: an empty part);
 * RT_EPROTOCOL names the file if a record names a string it lacks. */
enum rt_err rt_trace_part_read(const char *dir, const char *stem, struct rt_trace_part *p);
/* The same from bytes in memory (`what` names them in errors). */
enum rt_err rt_trace_part_parse(const void *recs, size_t len, const void *names,
				size_t names_len, const char *what, struct rt_trace_part *p);
/* Only the string table of `<dir>/<stem>.trace` (recs stays NULL) and the
 * size of its records in `bytes`, for a reader that streams the records
 * and checks each with rt_trace_rec_ok. */
enum rt_err rt_trace_part_read_names(const char *dir, const char *stem, struct rt_trace_part *p,
				     uint64_t *bytes);
/* Whether a record names only strings of `p` and has a known kind and track. */
bool rt_trace_rec_ok(const struct rt_trace_part *p, const struct rt_trace_rec *r);
void rt_trace_part_release(struct rt_trace_part *p);
/* The string `id` names, "" for RT_TRACE_NONE. */
const char *rt_trace_part_str(const struct rt_trace_part *p, uint16_t id);

#endif
