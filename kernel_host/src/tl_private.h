/* tl_private.h — the tl runtime's internal state, shared by the files of
 * kernel_host/src only. */
#ifndef TL_PRIVATE_H
#define TL_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include "coro.h"
#include "rt/buf.h"
#include "npu/isa.h"
#include "tl_host.h"

/* A tensor as the host tracks it. */
struct tl_rec {
	uint32_t gen;       /* bumped each time the slot is reused */
	uint32_t scope;     /* serial of the scope it was allocated in */
	bool tcm;           /* space: TCM scratch (else HBM) */
	bool pinned;        /* already in TCM: consumed in place */
	bool trans;         /* transposed view */
	uint64_t addr;
	uint32_t rows, cols;/* stored dims */
	enum tl_dtype dtype;
	uint64_t producer;  /* last command writing it (0: none) */
	uint64_t row_stride;/* HBM: bytes between rows (0: contiguous) */
};

/* Internal, wire-independent form of a TensorRef. */
struct tl_tref {
	bool tcm, pinned, trans;
	uint64_t addr;
	uint32_t rows, cols;
	enum tl_dtype dtype;
	uint64_t row_stride; /* 0: contiguous */
};

#define TL_OP_MAX_OPERANDS 3
#define TL_OP_MAX_EXTRAS 4
#define TL_CMD_MAX_OPS 16
#define TL_CMD_MAX_RW 4

struct tl_extra {
	const char *name;
	bool is_f;
	int64_t i;
	double f;
};

/* Internal OpSpec. */
struct tl_op {
	const char *kind;
	int scope; /* Kb__Scope value */
	uint32_t n_operands;
	const char *operand_name[TL_OP_MAX_OPERANDS];
	struct tl_tref operand[TL_OP_MAX_OPERANDS];
	uint32_t n_extras;
	struct tl_extra extra[TL_OP_MAX_EXTRAS];
	bool has_out;
	struct tl_tref out;
};

/* Internal CompositeCmd. */
struct tl_lowered {
	uint32_t n_ops;
	struct tl_op ops[TL_CMD_MAX_OPS];
	uint32_t n_rw;
	struct tl_tref rw[TL_CMD_MAX_RW];
};

enum tl_cmd_kind { TL_CMD_COMPOSITE, TL_CMD_DMA, TL_CMD_COPY, TL_CMD_RECV, TL_CMD_BARRIER };

/* A command the host issued (or an IPCQ receive it waits for). */
struct tl_cmd {
	enum tl_cmd_kind kind;
	bool load;               /* TL_CMD_DMA reading HBM into a tensor */
	bool done;
	uint64_t done_ps;
	uint64_t tcm_lo, tcm_hi; /* TCM bytes it touches (lo == hi: none) */
	uint64_t hbm_lo, hbm_hi; /* HBM bytes it writes */
	uint64_t hbm_rlo, hbm_rhi; /* HBM bytes it reads (bounding span) */
	struct tl_site at;       /* where the kernel issued it */
	uint32_t dir;            /* TL_CMD_RECV: the direction it receives from */
	bool p2p;                /* TL_CMD_RECV: from (src_rank, tag), not a direction */
	uint32_t src_rank, tag;
	bool has_path;           /* done_path is known */
	struct rt_path done_path;/* critical path to done_ps (rt/path.h) */
};

/* A scratch scope save point. */
struct tl_save {
	uint64_t cursor;
	uint32_t n_slots;
	uint32_t serial;
};

/* An IPCQ message that arrived before its receive was posted. */
struct tl_ipcq_msg {
	uint64_t arrive_ps;
	uint64_t nbytes;
	uint8_t *bytes; /* owned; NULL in timing mode */
	bool has_path;
	struct rt_path path; /* critical path to arrive_ps */
};

/* The receive FIFOs of one direction, or of one (source rank, tag). */
struct tl_ipcq_dir {
	struct tl_ipcq_msg *early; /* arrived, not yet received (FIFO) */
	uint32_t n_early, cap_early, head_early;
	uint64_t *posted;          /* receive command ids waiting (FIFO) */
	uint32_t n_posted, cap_posted, head_posted;
	uint64_t link_free_ps;     /* outgoing link busy until */
	/* The critical path to link_free_ps as a later message sees it: the
	 * last message's start, then its bytes as link_queueing (one PE per
	 * rank: the host is the link, src/ipcq.c). */
	struct rt_path link_free_path;
};

/* Point-to-point FIFOs, one per (source rank, tag) seen. */
struct tl_ipcq_key {
	uint32_t src_rank, tag;
	struct tl_ipcq_dir q;
};

enum tl_state { TL_IDLE, TL_RUNNING, TL_WAITING, TL_DONE, TL_FAILED };

struct tl_args {
	const struct tl_arg *items;
	uint32_t n;
	struct tl *owner; /* to end the kernel on a malformed value */
	/* a program step's (program.c): items[n_global..n) are the step's
	 * own arguments, which summary.json's args do not list */
	uint32_t n_global;
	const char *const (*binds)[2]; /* parameter, tensor; NULL-ended */
};

/* The kernel host's own statistics (tl_stats.c has their units and
 * descriptions), declared on first use and then added to by handle. */
enum tl_stat_id {
	TL_ST_DISPATCH, TL_ST_COMMANDS, TL_ST_KERNEL_PS, TL_ST_KERNEL_END, TL_ST_PEAK_SCRATCH,
	TL_ST_WAIT, TL_ST_NONFINITE_OUT, TL_ST_IPCQ_BYTES, TL_ST_IPCQ_LINK_BUSY,
	TL_ST_IPCQ_LINK_LEFT_BUSY, TL_ST_IPCQ_LINK_RIGHT_BUSY, TL_ST_IPCQ_LINK_LEFT_BYTES,
	TL_ST_IPCQ_LINK_RIGHT_BYTES, TL_ST_IPCQ_RECV_WAIT, TL_ST_BARRIERS, TL_ST_COLLECTIVES,
	TL_ST_COLLECTIVE_PS, TL_ST_COUNT
};

/* PE_CPU time spent at one call site of the kernel: dispatching the
 * commands issued there and waiting there. */
struct tl_site_acc {
	const char *file;  /* the kernel's __FILE__ (NULL: a free slot) */
	int line;
	uint32_t order;    /* first-use order: the report lists sites so */
	uint64_t dispatch_cycles;
	uint64_t wait_ps;
};

struct tl {
	struct tl_setup s;
	struct tl_args args;
	struct rt_buf args_log; /* "name\tgiven|default\tvalue\n" per name asked */
	bool inputs_asked;      /* the kernel called tl_inputs_dir */
	uint64_t cycle_ps;
	enum tl_state state;
	enum rt_err err;      /* the error that ended the kernel */
	int kernel_rc;
	uint64_t clock_ps;    /* kernel (PE_CPU) clock */
	struct rt_path path;  /* critical path to clock_ps (rt/path.h) */
	bool path_ok;         /* every completion waited on carried one */
	uint64_t start_ps;
	uint64_t now_ps;      /* event time of the current delivery */
	uint64_t waiting_for; /* command id the kernel waits on */
	struct tl_site wait_site; /* ... and where it waits (end-of-run report) */

	struct tl_rec *slots; /* slot 0 unused: TL_NONE */
	uint32_t n_slots, cap_slots;

	struct tl_cmd *cmds;  /* index = command id; 0 unused */
	uint64_t n_cmds, cap_cmds;
	uint64_t *pending;    /* ids not yet done */
	uint32_t n_pending, cap_pending;

	uint64_t cursor, peak;
	struct tl_save *saves;
	uint32_t n_saves, cap_saves;
	uint32_t scope_serial;

	/* the program being run (program.c), or NULL */
	const struct tl_program *prog;
	uint64_t *prog_addr;  /* each tensor's HBM address */
	bool *prog_out;       /* the step being run writes it (TL_OUT) */
	/* what a failing step leaves behind (tl_abort never returns to free
	 * it): the step's argument list and a parsed program text, freed by
	 * tl_program_release */
	struct tl_arg *prog_args;
	void *prog_text;
	struct rt_buf steps_log; /* one line per step run: the steps part */

	struct tl_ipcq_dir ipcq[2];
	struct tl_ipcq_key *p2p; /* tl_send_to / tl_recv_from_async */
	uint32_t n_p2p, cap_p2p, p2p_hit; /* p2p_hit: the last key found */

	/* barriers among the PEs of the rank (barrier.c) */
	uint64_t bar_epoch;   /* barriers this PE has passed */
	uint32_t bar_arrived; /* PE 0: other PEs arrived at the current one */
	uint64_t bar_cmd;     /* the barrier command this PE waits on (0: none) */
	bool bar_waiting;     /* PE 0: it reached the barrier itself */
	bool bar_has_path;    /* PE 0: bar_path is the last arrival's path */
	struct rt_path bar_path;
	struct tl_totals tot;
	uint32_t stat_h[TL_ST_COUNT]; /* handle + 1 (0: not declared yet) */
	struct tl_site_acc *sites;    /* open addressing by (file, line) */
	uint32_t n_sites, cap_sites;
	struct rt_ff_loop loops[TL_LOOP_DEPTH]; /* TL_FOR loops running (tl_loop.c) */
	uint32_t n_loops;
	uint64_t cmds_unwatched; /* commands issued outside every watched loop */
	struct tl_loop_hist {  /* ... and the host's own counters at their last
				* ticks, to add a skip's share (fast-forward) */
		uint64_t *ring;    /* n of `stride` values, the newest at head */
		uint32_t stride, n, head;
	} loop_hist[TL_LOOP_DEPTH];
	struct tl_coro coro;
	void *wire_buf;       /* reused wire form of one composite */
	void *lowering_buf;   /* reused lowering state (composite.c) */
};

/* ---- core (tl_core.c) */
/* Ends the kernel with `code` and the formatted line prefixed by the
 * kernel's name and the call site. Never returns. */
_Noreturn void tl_abort(struct tl *tl, struct tl_site at, enum rt_err code,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));
struct tl_rec *tl_rec_get(struct tl *tl, struct tl_site at, tl_tensor t,
			  const char *what);
tl_tensor tl_rec_new(struct tl *tl, struct tl_site at, struct tl_rec **out);
tl_tensor tl_scratch_tensor(struct tl *tl, struct tl_site at, uint32_t rows,
			    uint32_t cols, enum tl_dtype dtype);
uint64_t tl_cmd_new(struct tl *tl, struct tl_site at, enum tl_cmd_kind kind);
void tl_cmd_touch_tcm(struct tl *tl, uint64_t id, uint64_t addr,
		      uint64_t bytes);
void tl_wait_cmd(struct tl *tl, struct tl_site at, uint64_t id);
void tl_wait_tensor(struct tl *tl, struct tl_site at, tl_tensor t);
/* An operand's producer, for a command about to go to the scheduler: waits
 * only for what the host must see done first — a load's first use
 * (lazy-load design D2) or an IPCQ receive (the host writes its bytes).
 * A producer the scheduler runs (composite, fill, copy, ...) is ordered by
 * its strict FIFO (flat-composite design D6.3): no wait, the command is
 * dispatched at once. */
void tl_wait_operand(struct tl *tl, struct tl_site at, uint64_t id);
void tl_wait_all(struct tl *tl, struct tl_site at);
void tl_cmd_complete(struct tl *tl, uint64_t id, uint64_t at_ps);
/* Records the critical path to command `id`'s completion (NULL: none). */
void tl_cmd_set_path(struct tl *tl, uint64_t id, const struct rt_path *path);
/* Host side: resumes the kernel if it waits for command `id`. */
enum rt_err tl_resume_for(struct tl *tl, uint64_t id);
/* Charges the dispatch of `cmd` and sends it to the scheduler. */
void tl_emit(struct tl *tl, struct tl_site at, Kb__Command *cmd);
/* Charges `cycles` of PE_CPU time to the call at `at`. */
void tl_charge(struct tl *tl, struct tl_site at, uint64_t cycles);

/* ---- statistics (tl_stats.c) */
/* Adds `value` to (or maxes) the host statistic `id`. */
void tl_stat(struct tl *tl, enum tl_stat_id id, uint64_t value);
/* Accounts dispatch cycles and waiting time to the call site `at`. */
void tl_site_dispatch(struct tl *tl, struct tl_site at, uint64_t cycles);
void tl_site_wait(struct tl *tl, struct tl_site at, uint64_t ps);
/* Reports the per-site statistics (dispatch_cycles@FILE:LINE,
 * wait_ps@FILE:LINE; listed per component only) at the kernel's end. */
void tl_sites_report(struct tl *tl);
void tl_sites_release(struct tl *tl);
/* ---- TL_FOR loops (tl_loop.c) */
void tl_loops_release(struct tl *tl);
/* A command is being issued (tl_loop.c counts those outside watched loops:
 * fast-forward must not skip while the kernel moves on there). */
void tl_loop_note_cmd(struct tl *tl);
uint64_t tl_rec_bytes(const struct tl_rec *r);
struct tl_tref tl_tref_of(const struct tl_rec *r);
/* Logical dims (after a transposed view). */
uint32_t tl_rec_lrows(const struct tl_rec *r);
uint32_t tl_rec_lcols(const struct tl_rec *r);

/* ---- ops (tl_ops.c) */
/* tl_store without waiting for the tensor's producer when the scheduler
 * can order the DMA write after it (a composite, DMA or copy: its strict
 * FIFO on overlapping bytes): the kernel goes on at once. */
void tl_store_queued(struct tl *tl, struct tl_site at, uint64_t hbm_addr, tl_tensor t);
void tl_wait_tcm_range(struct tl *tl, struct tl_site at, uint64_t lo,
		       uint64_t hi);
/* Waits for every pending command reading or writing HBM [lo, hi). */
void tl_wait_hbm_range(struct tl *tl, struct tl_site at, uint64_t lo,
		       uint64_t hi);
/* Records that command `id` reads HBM [addr, addr + bytes). */
void tl_cmd_read_hbm(struct tl *tl, uint64_t id, uint64_t addr,
		     uint64_t bytes);
void tl_op_operand(struct tl_op *op, const char *name, const struct tl_rec *r);
void tl_op_extra_i(struct tl_op *op, const char *name, int64_t v);
void tl_op_extra_f(struct tl_op *op, const char *name, double v);
/* The instruction-set entry of MATH op `name` taking `arity` inputs (0:
 * any); ends the kernel at `at`, naming `api` and the op, when it is
 * unknown, not a MATH op or takes another number of inputs. */
const struct rt_isa_op *tl_isa_math(struct tl *tl, struct tl_site at,
				    const char *name, uint32_t arity,
				    const char *api);
/* The output shape of `op` on `in` (logical dims) by the instruction set's
 * shape rule; ends the kernel at `at` with `code` when it does not hold. */
void tl_isa_shape(struct tl *tl, struct tl_site at, enum rt_err code,
		  const struct rt_isa_op *op, uint32_t n_in,
		  const struct tl_rec *const *in, int64_t axis,
		  uint32_t *rows, uint32_t *cols);
/* Checks the logical-bytes cap, records what the composite touches, emits
 * it and returns its command id. */
uint64_t tl_issue_lowered(struct tl *tl, struct tl_site at,
			  const struct tl_lowered *low);

/* ---- wire (tl_wire.c): internal forms -> protobuf, in caller storage */
struct tl_wire_tref {
	Kb__TensorRef ref;
	uint32_t shape[2];
};
void tl_wire_tref(struct tl_wire_tref *w, const struct tl_tref *t);
/* Sends the lowered composite as command `id`. */
void tl_emit_composite(struct tl *tl, struct tl_site at, uint64_t id,
		       const struct tl_lowered *low);
uint64_t tl_lowered_logical_bytes(const struct tl_lowered *low);

/* ---- data (tl_data.c) */
uint8_t *tl_tcm_bytes(struct tl *tl, uint64_t addr, uint64_t n);
uint8_t *tl_hbm_bytes(struct tl *tl, uint64_t addr, uint64_t n);

/* ---- recipes (recipes.c) */
#define TL_RECIPE_MAX_OPERANDS 6
#define TL_RECIPE_MAX_SLOTS 6
#define TL_RECIPE_MAX_STEPS 10

struct tl_recipe_operand {
	const char *name;
	bool rw;
	const char *column_of; /* must be rows(column_of) x 1 */
	const char *rows_of;   /* must have rows(rows_of) rows */
};
/* Internal scratch: shaped like operand `like`, or (rows(like), 1). */
struct tl_recipe_slot {
	const char *name;
	const char *like;
	bool column;
	bool like_dtype; /* dtype of `like` (else f32) */
};
struct tl_recipe_step {
	const char *kind;
	const char *src[3]; /* operand/slot names, in engine order */
	const char *dst;
	bool has_axis;
	int axis;
};
struct tl_recipe {
	const char *name;
	struct tl_recipe_operand operands[TL_RECIPE_MAX_OPERANDS];
	struct tl_recipe_slot slots[TL_RECIPE_MAX_SLOTS];
	const char *primary_out; /* slot the head's `a` binds to, or NULL */
	struct tl_recipe_step steps[TL_RECIPE_MAX_STEPS];
};
const struct tl_recipe *tl_recipe_find(const char *name);

/* ---- programs (program.c) */
/* The steps part (steps.R.P) the launcher reads for summary.json. */
void tl_program_report(struct tl *tl);
void tl_program_release(struct tl *tl);

/* ---- ipcq (ipcq.c) */
void tl_ipcq_release(struct tl *tl);
/* Ring route of a point-to-point send (IpcqData.route). */
enum tl_route { TL_ROUTE_SHORTEST = 0, TL_ROUTE_LEFT = 1, TL_ROUTE_RIGHT = 2 };
/* tl_send_to with an explicit ring route (collectives send both ways
 * round a ring of two). */
void tl_ipcq_send_to(struct tl *tl, struct tl_site at, uint32_t rank, uint32_t tag,
		     enum tl_route route, tl_tensor t);
/* tl_recv_from_async into an existing TCM tensor `dst` (after every
 * pending command that touches its bytes). */
tl_future tl_ipcq_recv_into(struct tl *tl, struct tl_site at, uint32_t rank, uint32_t tag,
			    tl_tensor dst);
/* A 1 x cols view of columns [col, col + cols) of the 1 x N TCM tensor t:
 * the same bytes, a handle of its own (the current scope's) whose producer
 * is `producer`. */
tl_tensor tl_row_view(struct tl *tl, struct tl_site at, tl_tensor t, uint64_t col,
		      uint32_t cols, uint64_t producer);
/* The kernel waited on receive `id` from kernel clock `from_ps`: adds the
 * wait to the ring figures (docs/attention.md). */
void tl_ipcq_waited(struct tl *tl, uint64_t id, uint64_t from_ps);

#endif