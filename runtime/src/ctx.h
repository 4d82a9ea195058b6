/* ctx.h — private: the daemon and per-component context structures shared
 * by daemon.c (the lockstep loop) and ctx.c (the component-facing API). */
#ifndef RT_CTX_PRIVATE_H
#define RT_CTX_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rt/buf.h"
#include "rt/component.h"
#include "rt/event.h"
#include "rt/job.h"
#include "rt/msg.h"
#include "rt/trace.h"
#include "rt/wire.h"

struct rt_stat {
	char *name;        /* owned; checked by rt_stat_name_check */
	char *unit;        /* owned; "" when not declared */
	char *description; /* owned; "" when not declared */
	uint64_t value;
	bool is_max;       /* merged by max instead of sum */
	bool per_instance; /* not merged into totals / by_kind */
};

struct rt_ctx {
	struct rt_daemon *daemon;
	uint32_t id;
	const struct rt_component_desc *desc;
	void *state;             /* the component's zeroed state block */
	uint64_t seq;            /* per-source sequence: sends and timers */
	uint64_t delivered;      /* messages delivered to it */
	uint64_t digest;         /* hash over its deliveries */
	uint64_t last_ps;        /* time of its last event */
	uint64_t last_off_ps;    /* time fast-forwarded before it (ff.c) */
	uint64_t clock_ps;       /* its own clock, if ahead (rt_note_clock) */
	uint64_t oplog_seq;      /* op log records written */
	/* its links' latencies by destination (link_latency in ctx.c): built
	 * on its first send, so a send does not search the topology */
	uint64_t *lat;           /* lat[dst - lat_lo], 0: no link; NULL: none yet */
	uint32_t lat_lo, lat_n;
	bool lat_search;         /* too sparse for a table: search each time */
	struct rt_stat *stats;
	size_t n_stats;
	size_t cap_stats;
	enum rt_err stat_err;    /* first bad rt_stat_* call (sticky) ... */
	char stat_err_line[320]; /* ... and what was wrong */
	char *unfinished;        /* what fini said is left undone (owned) */
	struct rt_path end_path; /* critical path to its end (rt_path_report) */
	bool has_end_path;
	uint64_t end_segment;    /* 1 + its segment record (0: none) */
	struct rt_buf cpath;     /* pending segment records (rt/path.h) */
	uint64_t n_segments;     /* written so far */
	bool segments;           /* the trace is on: write them */
	FILE *cpath_file;
	struct rt_trace_writer oplog; /* binary op log records (rt_oplog_bin) and
				       * their strings, flushed past 1 MiB */
	bool oplog_on;           /* write every record (--op-log on) ... */
	bool oplog_dma;          /* ... or, off, still a DMA engine's: the
				  * launcher sums HBM busy time from them */
	uint16_t oplog_last[3];  /* last ids of engine, op_kind, op_name */
	struct rt_trace_writer trace; /* binary records, flushed past 1 MiB */
	bool tracing;            /* trace on and this rank wanted */
	struct {                 /* call site -> trace string id, by address */
		const char *file;
		int line;
		uint16_t id;
	} sites[64];
};

struct rt_daemon {
	const struct rt_job *job;
	const struct rt_topology *topo;
	uint32_t index;
	const char *label;       /* what errors call this daemon */
	struct rt_ctx **by_id;   /* component id -> local context or NULL */
	struct rt_ctx *ctxs;
	uint32_t n_local;
	uint32_t n_inited;       /* components whose init ran (fini owed) */
	struct rt_queue queue;
	struct rt_ff *ff;        /* fast-forward (ff.c), NULL when off */
	uint64_t now;            /* time of the event being run */
	uint64_t window;         /* next window expected */
	uint64_t window_end;     /* end of the window being run */
	uint64_t events;         /* events run */
	Kb__Envelope **outbound; /* messages for other daemons, this window */
	size_t n_out;
	size_t cap_out;
	struct rt_arena arena;   /* payload decoding */
	Kb__Payload *heap_msg;   /* a payload too big for the arena, on the heap */
	struct rt_msg_pool pool; /* blocks of in-flight local messages */
	struct rt_event *delivering; /* the event whose handler runs, or NULL */
	bool kept;               /* its local message's block was rt_keep'd */
	struct rt_path path;     /* the delivering message's path (rt_delivery) */
	struct rt_buf frame;     /* sync frame encoding */
	void *zctx;
	void *sock;
	bool own_zctx;
	bool threaded;           /* hosted as a thread of the launcher */
	const char *token;       /* routing id the coordinator gave it */
	uint64_t beat_ms;        /* last PROGRESS heartbeat (monotonic ms) */
	uint64_t read_ms;        /* last clock read for it (monotonic ms) */
	uint32_t beat_stride;    /* events between clock reads (daemon.c) */
	uint32_t beat_count;     /* events since the last read */
	Kb__ComponentReport *reports;   /* BYE's, kept until the daemon closes */
	Kb__ComponentReport **report_ptrs;
	Kb__Stat *stats, **stat_ptrs;
	char fault_kind[16];     /* KB_FAULT test hook aimed here ("" none) */
	uint64_t fault_window;   /* ... from this window on */
	uint8_t *memory[RT_MAX_MEMORIES];     /* mapped lazily (data mode) */
	uint64_t memory_bytes[RT_MAX_MEMORIES];
};

/* Fast-forward's time skipped so far (0 when `ff` is NULL), and the
 * critical path's share of it per class, added to `path` (ff.c). */
uint64_t rt_ff_offset(const struct rt_ff *ff);
void rt_ff_offset_path(const struct rt_ff *ff, struct rt_path *path);

enum rt_err rt_ctx_init(struct rt_ctx *c, struct rt_daemon *d, uint32_t id);
void rt_ctx_release(struct rt_ctx *c);
/* Records a delivered message: digest (`content` is rt_msg_digest of
 * it), count, trace flow end. */
void rt_ctx_note_delivery(struct rt_ctx *c, const struct rt_event *ev,
			  const Kb__Payload *msg, uint64_t content);
/* Writes pending output; `final` also closes the part files. */
enum rt_err rt_ctx_flush(struct rt_ctx *c, bool final);
/* RT_EOK, or the first bad rt_stat_* call of this component (rt_fail'd). */
enum rt_err rt_ctx_stat_error(const struct rt_ctx *c);
/* Fills `r` (whose stats array `stats`, of c->n_stats entries, the caller
 * provides) with the component's end-of-run report; points into `c`. */
void rt_ctx_report(const struct rt_ctx *c, Kb__ComponentReport *r, Kb__Stat *stats,
		   Kb__Stat **stat_ptrs);
void rt_ctx_free_outbound(struct rt_daemon *d);
void rt_ctx_unmap_memory(struct rt_daemon *d);

#endif
