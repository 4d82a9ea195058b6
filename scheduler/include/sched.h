/* sched.h — PE_SCHEDULER: turns host commands into engine stages.
 *
 * Three parts, each usable on its own:
 *   - the plan builder (flat-composite design D3/D4): a pure function from one Command to
 *     an ordered list of stages with dependencies;
 *   - the hazard tracker (flat-composite design D6.3): read/write byte ranges per command;
 *   - the core: strict-FIFO admission, staging regions and stage release,
 *     driven by plain calls so it is testable without a runtime; the
 *     component (sched_ops) is a thin adapter from messages to the core.
 *
 * The scheduler holds no recipe knowledge (flat-composite design D6.5, D7): it sees only
 * flat op lists and the stage instruction set (npu/isa.h, docs/stages.md). */
#ifndef SCHED_H
#define SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernbench.pb-c.h"
#include "rt/buf.h"
#include "rt/component.h"
#include "rt/config.h"
#include "rt/err.h"
#include "npu/isa.h"
#include "rt/wire.h"

/* ------------------------------------------------------------ plans */

#define SCHED_MAX_IN 3   /* most inputs of one stage (fma) */
#define SCHED_MAX_DEPS 4 /* most dependencies of one stage */

/* A 2-D strided window (the wire View, by value). */
struct sched_view {
	Kb__Space space;
	uint64_t addr;
	uint32_t rows;        /* stored rows */
	uint32_t cols;        /* stored cols */
	uint64_t row_stride;  /* bytes between rows */
	Kb__DType dtype;
	bool trans;           /* logical view is the transpose */
	bool staged;          /* lies in the command's staging region: moves
				 with sched_plan_rebase */
};

/* One unit of engine work and the stages it waits for. */
struct sched_stage {
	Kb__Engine engine;
	const char *op_kind;  /* "memory" | "gemm" | "math" (static) */
	const char *op_name;  /* static, or the OpSpec's kind */
	uint32_t n_in;
	struct sched_view in[SCHED_MAX_IN];
	struct sched_view out;
	bool has_acc;         /* GEMM accumulates over K tiles in `acc` */
	struct sched_view acc;
	bool first;           /* GEMM: zero acc first */
	bool last;            /* GEMM: store acc into out */
	bool stationary_held; /* GEMM: the previous GEMM stage of the plan used
			       * the same B tile (the array still holds it) */
	const Kb__OpSpec *op; /* MATH: source op (its extras ride along) */
	uint32_t n_deps;
	uint32_t deps[SCHED_MAX_DEPS]; /* earlier stage indices, ascending */
};

/* A command's plan. It points into the Command it was built from (op names,
 * extras), so that Command must outlive it. */
struct sched_plan {
	uint64_t command;           /* command id */
	struct sched_stage *stages; /* in plan order; deps point backwards */
	uint32_t n_stages;
	uint32_t cap_stages;
	uint64_t staging_base;      /* where staged views currently point */
	uint64_t staging_bytes;     /* staging used; 0: needs no region */
};

void sched_plan_init(struct sched_plan *plan);
void sched_plan_release(struct sched_plan *plan);

/* Builds the plan of `cmd` (plan is reset first), placing staging buffers
 * at `staging_base`. Pure: depends only on its arguments.
 *   composite: flat-composite design D3 placement by position and scope, D4 DMA
 *     insertion from `pinned`, double-buffered staging, K-before-V (every
 *     DMA after the prologue's last stage);
 *   dma: one DMA_READ or DMA_WRITE stage; copy: one stage (DMA when it
 *     crosses HBM/TCM, else MATH copy).
 * Errors (one line naming the command id and the problem):
 *   RT_EDECODE malformed (missing tensor, zero dim, unknown MATH op, wrong
 *     operand count, GEMM shapes that do not agree);
 *   RT_ECOMPOSITE two GEMMs (D6.1) or logical bytes over
 *     max_composite_logical_bytes (rejected, never segmented);
 *   RT_ESCRATCH staging buffers larger than one staging region. */
enum rt_err sched_plan_build(const Kb__Command *cmd,
			     const struct rt_config *cfg,
			     uint64_t staging_base, struct sched_plan *plan);
/* Moves every staged view to a region starting at `staging_base`. */
void sched_plan_rebase(struct sched_plan *plan, uint64_t staging_base);
/* Appends one deterministic line per stage (index, engine, op, deps,
 * views, acc/first/last) — the golden-file format. */
enum rt_err sched_plan_dump(const struct sched_plan *plan, struct rt_buf *out);
/* A wire Stage with storage for its views: what goes to an engine. */
struct sched_stage_msg {
	Kb__Stage stage;
	Kb__View in[SCHED_MAX_IN];
	Kb__View *in_ptrs[SCHED_MAX_IN];
	Kb__View out;
	Kb__View acc;
};
/* Fills `m` with stage `index` of command `command` (points into `st`
 * and its OpSpec for names and extras). */
void sched_stage_msg_fill(struct sched_stage_msg *m,
			  const struct sched_stage *st, uint64_t command,
			  uint32_t index);
/* "dma_read", "dma_write", "gemm", "math". */
const char *sched_engine_name(Kb__Engine engine);

/* ------------------------------------------------------------ hazards */

/* A byte range of one memory: HBM is per rank (pe = 0), TCM per PE. */
struct sched_range {
	Kb__Space space;
	uint32_t rank;
	uint32_t pe;
	uint64_t lo; /* [lo, hi) */
	uint64_t hi;
};

/* What a command reads and writes. rw_handles go into both sets. */
struct sched_hazard_set {
	struct sched_range *reads;
	uint32_t n_reads;
	struct sched_range *writes;
	uint32_t n_writes;
	uint32_t cap_reads;
	uint32_t cap_writes;
};

void sched_hazard_init(struct sched_hazard_set *set);
void sched_hazard_release(struct sched_hazard_set *set);
/* Fills `set` (reset first) from `cmd` as issued by PE (rank, pe):
 * operands and DMA/copy sources read; outs and destinations written. */
enum rt_err sched_hazard_collect(struct sched_hazard_set *set,
				 const Kb__Command *cmd, uint32_t rank,
				 uint32_t pe);
/* True on RAW, WAR or WAW overlap between `later` and `earlier`. */
bool sched_hazard_conflicts(const struct sched_hazard_set *later,
			    const struct sched_hazard_set *earlier);

/* ------------------------------------------------------------ core */

#define SCHED_REGIONS 2
#define SCHED_ENGINES 4 /* DMA_READ, DMA_WRITE, GEMM, MATH: one issue queue each */

/* One command known to the scheduler (queued or running). */
struct sched_cmd {
	Kb__Command *msg;           /* owned deep copy */
	uint64_t id;
	uint64_t issued_ps;         /* host send time, echoed in CommandDone */
	struct sched_plan plan;
	struct sched_hazard_set hazards;
	bool running;
	bool barrier;    /* conflicted: waits for every earlier command */
	int region;      /* staging region, -1 none */
	uint32_t n_done; /* stages finished */
	uint32_t *pending;   /* per stage: dependencies not yet done */
	bool *done;          /* per stage: StageDone seen */
	uint32_t *dep_start; /* CSR of dependents: stage s's dependents are */
	uint32_t *dep_list;  /*   dep_list[dep_start[s] .. dep_start[s+1]) */
	uint32_t next[SCHED_ENGINES]; /* per engine: every stage of that
				       * engine below this index was sent */
};

enum sched_action_kind {
	SCHED_SEND_STAGE,    /* send cmd->plan.stages[stage] to its engine */
	SCHED_COMMAND_DONE,  /* send CommandDone{id, issued_ps} to the host */
};

/* Something the core asks its driver to send, in this order. `cmd` is
 * valid until the next core call; NULL for COMMAND_DONE. */
struct sched_action {
	enum sched_action_kind kind;
	const struct sched_cmd *cmd;
	uint32_t stage;
	uint64_t id;
	uint64_t issued_ps;
};

/* Strict-FIFO admission of commands and release of their stages. */
struct sched_core {
	const struct rt_config *cfg; /* borrowed */
	uint32_t rank;
	uint32_t pe;
	struct sched_cmd **cmds;     /* arrival order: running and queued */
	uint32_t n_cmds;
	uint32_t cap_cmds;
	int free_regions[SCHED_REGIONS]; /* FIFO of free staging regions */
	uint32_t n_free_regions;
	struct sched_action *actions;    /* output of the last call */
	uint32_t n_actions;
	uint32_t cap_actions;
};

void sched_core_init(struct sched_core *core, const struct rt_config *cfg,
		     uint32_t rank, uint32_t pe);
void sched_core_release(struct sched_core *core);
/* Base address of staging region `region` (0 or 1). */
uint64_t sched_region_base(const struct rt_config *cfg, int region);
/* Takes a copy of `cmd`, plans it and admits it (actions: its first
 * stages) or queues it behind a hazard, the FIFO or a busy region.
 * Clears the previous call's actions. */
enum rt_err sched_core_submit(struct sched_core *core, const Kb__Command *cmd,
			      uint64_t issued_ps);
/* Records StageDone(command, index); actions: newly ready stages, the
 * command's CommandDone when it was the last, then stages of commands
 * that this completion admitted. Clears the previous call's actions. */
enum rt_err sched_core_stage_done(struct sched_core *core, uint64_t command,
				  uint32_t index);
/* Commands admitted and not yet complete. */
uint32_t sched_core_running(const struct sched_core *core);

/* ------------------------------------------------------------ component */

/* The PE_SCHEDULER component (name "sched"). */
extern const struct rt_component_ops sched_ops;

#endif
