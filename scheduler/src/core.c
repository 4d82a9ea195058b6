/* core.c — admission and stage release, free of any runtime: calls in,
 * actions out (the component turns actions into messages).
 *
 * Strict FIFO (flat-composite design D6.3): commands are admitted in arrival order. The
 * first queued command starts when
 *   - it conflicts with no running command, or, once it has conflicted
 *     (it is then a barrier), when no command is running at all; and
 *   - it needs no staging, or a staging region is free.
 * Later commands never overtake it.
 *
 * In-order issue: each engine (DMA read, DMA write, GEMM, MATH) receives its
 * stages in program order — running commands in arrival order, each
 * command's stages in plan order. A stage goes out when its dependencies are
 * done *and* every earlier stage for the same engine has gone out. Releasing
 * whatever is ready first (list scheduling) let a later-ready GEMM overtake
 * an earlier one when some duration changed, so a slower DMA or a busier HBM
 * could make a kernel finish sooner (docs/attention.md, PE scaling). With a
 * fixed order per engine every start time is a max of sums of durations,
 * so latency can only grow when a duration grows. Deps point backwards in
 * plan order and commands are admitted in order, so the oldest unsent stage
 * always becomes sendable: in-order issue cannot deadlock. */
#include "sched.h"

#include <stdlib.h>
#include <string.h>

void sched_core_init(struct sched_core *core, const struct rt_config *cfg,
		     uint32_t rank, uint32_t pe)
{
	memset(core, 0, sizeof(*core));
	core->cfg = cfg;
	core->rank = rank;
	core->pe = pe;
	for (int r = 0; r < SCHED_REGIONS; r++)
		core->free_regions[core->n_free_regions++] = r;
}

uint64_t sched_region_base(const struct rt_config *cfg, int region)
{
	return cfg->tcm_scratch_bytes +
	       (uint64_t)region * (cfg->tcm_staging_bytes / SCHED_REGIONS);
}

static void cmd_destroy(struct sched_cmd **cmd_p)
{
	struct sched_cmd *cmd = *cmd_p;

	if (!cmd)
		return;
	sched_plan_release(&cmd->plan);
	sched_hazard_release(&cmd->hazards);
	if (cmd->msg)
		rt_msg_free(cmd->msg);
	free(cmd->pending);
	free(cmd->done);
	free(cmd->dep_start);
	free(cmd->dep_list);
	free(cmd);
	*cmd_p = NULL;
}

void sched_core_release(struct sched_core *core)
{
	for (uint32_t i = 0; i < core->n_cmds; i++)
		cmd_destroy(&core->cmds[i]);
	free(core->cmds);
	free(core->actions);
	memset(core, 0, sizeof(*core));
}

uint32_t sched_core_running(const struct sched_core *core)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < core->n_cmds; i++)
		n += core->cmds[i]->running;
	return n;
}

static enum rt_err push_action(struct sched_core *core,
			       const struct sched_action *a)
{
	if (core->n_actions == core->cap_actions) {
		uint32_t cap = core->cap_actions ? core->cap_actions * 2 : 16;
		struct sched_action *arr =
			realloc(core->actions, cap * sizeof(*arr));

		if (!arr)
			return rt_fail(RT_ENOMEM, "scheduler: no memory for actions");
		core->actions = arr;
		core->cap_actions = cap;
	}
	core->actions[core->n_actions++] = *a;
	return RT_EOK;
}

static enum rt_err send_stage(struct sched_core *core,
			      const struct sched_cmd *cmd, uint32_t s)
{
	struct sched_action a = {.kind = SCHED_SEND_STAGE, .cmd = cmd,
				 .stage = s, .id = cmd->id};

	return push_action(core, &a);
}

/* Sends, per engine, the ready stages at the head of its program order;
 * stops an engine at its first stage whose dependencies are not done. */
static enum rt_err release(struct sched_core *core)
{
	enum rt_err err = RT_EOK;

	for (uint32_t e = 0; !err && e < SCHED_ENGINES; e++) {
		for (uint32_t i = 0; !err && i < core->n_cmds; i++) {
			struct sched_cmd *cmd = core->cmds[i];
			const struct sched_plan *p = &cmd->plan;
			uint32_t *s = &cmd->next[e];

			if (!cmd->running)
				break; /* running commands are a prefix */
			while (*s < p->n_stages &&
			       ((uint32_t)p->stages[*s].engine != e ||
				cmd->pending[*s] == 0)) {
				if ((uint32_t)p->stages[*s].engine == e &&
				    (err = send_stage(core, cmd, *s)))
					return err;
				(*s)++;
			}
			if (*s < p->n_stages)
				break; /* this engine waits for that stage */
		}
	}
	return err;
}

/* Builds the dependents lists (CSR, ascending) and pending counters. */
static enum rt_err index_deps(struct sched_cmd *cmd)
{
	const struct sched_plan *p = &cmd->plan;
	uint32_t n = p->n_stages, total = 0;
	uint32_t *fill;

	cmd->pending = calloc(n + 1, sizeof(*cmd->pending));
	cmd->done = calloc(n + 1, sizeof(*cmd->done));
	cmd->dep_start = calloc(n + 2, sizeof(*cmd->dep_start));
	for (uint32_t s = 0; s < n; s++)
		total += p->stages[s].n_deps;
	cmd->dep_list = calloc(total + 1, sizeof(*cmd->dep_list));
	fill = calloc(n + 1, sizeof(*fill));
	if (!cmd->pending || !cmd->done || !cmd->dep_start || !cmd->dep_list ||
	    !fill) {
		free(fill);
		return rt_fail(RT_ENOMEM, "command %llu: no memory for %u stages",
			       (unsigned long long)cmd->id, n);
	}
	for (uint32_t s = 0; s < n; s++)
		for (uint32_t d = 0; d < p->stages[s].n_deps; d++)
			cmd->dep_start[p->stages[s].deps[d] + 1]++;
	for (uint32_t s = 0; s < n; s++)
		cmd->dep_start[s + 1] += cmd->dep_start[s];
	for (uint32_t s = 0; s < n; s++) {
		cmd->pending[s] = p->stages[s].n_deps;
		for (uint32_t d = 0; d < p->stages[s].n_deps; d++) {
			uint32_t on = p->stages[s].deps[d];

			cmd->dep_list[cmd->dep_start[on] + fill[on]++] = s;
		}
	}
	free(fill);
	return RT_EOK;
}

/* Starts `cmd`: takes a staging region if it needs one (release() sends
 * its stages). */
static enum rt_err start_cmd(struct sched_core *core, struct sched_cmd *cmd)
{
	enum rt_err err = index_deps(cmd);

	if (err)
		return err;
	if (cmd->plan.staging_bytes) {
		cmd->region = core->free_regions[0];
		memmove(core->free_regions, core->free_regions + 1,
			--core->n_free_regions * sizeof(int));
		sched_plan_rebase(&cmd->plan,
				  sched_region_base(core->cfg, cmd->region));
	}
	cmd->running = true;
	return RT_EOK;
}

/* Starts queued commands in order until one must wait. */
static enum rt_err admit(struct sched_core *core)
{
	for (uint32_t i = 0; i < core->n_cmds; i++) {
		struct sched_cmd *cmd = core->cmds[i];
		enum rt_err err;

		if (cmd->running)
			continue;
		for (uint32_t j = 0; j < i && !cmd->barrier; j++)
			cmd->barrier = sched_hazard_conflicts(
				&cmd->hazards, &core->cmds[j]->hazards);
		if (cmd->barrier && sched_core_running(core) > 0)
			return RT_EOK;
		if (cmd->plan.staging_bytes && core->n_free_regions == 0)
			return RT_EOK;
		if ((err = start_cmd(core, cmd)))
			return err;
	}
	return RT_EOK;
}

/* Admits what may start, then sends what may go. */
static enum rt_err admit_and_release(struct sched_core *core)
{
	enum rt_err err = admit(core);

	return err ? err : release(core);
}

static uint64_t command_id(const Kb__Command *cmd)
{
	switch (cmd->body_case) {
	case KB__COMMAND__BODY_COMPOSITE:
		return cmd->composite->id;
	case KB__COMMAND__BODY_DMA:
		return cmd->dma->id;
	case KB__COMMAND__BODY_COPY:
		return cmd->copy->id;
	default:
		return 0;
	}
}

static struct sched_cmd *find_cmd(const struct sched_core *core, uint64_t id,
				  uint32_t *at)
{
	for (uint32_t i = 0; i < core->n_cmds; i++)
		if (core->cmds[i]->id == id) {
			*at = i;
			return core->cmds[i];
		}
	return NULL;
}

/* A deep copy the scheduler owns (the message it came in is transient). */
static Kb__Command *copy_command(const Kb__Command *cmd)
{
	return (Kb__Command *)rt_wire_copy(&cmd->base);
}

static enum rt_err new_cmd(struct sched_core *core, const Kb__Command *msg,
			   uint64_t issued_ps, struct sched_cmd **out)
{
	struct sched_cmd *cmd = calloc(1, sizeof(*cmd));
	enum rt_err err;

	if (!cmd || !(cmd->msg = copy_command(msg))) {
		cmd_destroy(&cmd);
		return rt_fail(RT_ENOMEM, "scheduler: no memory for a command");
	}
	cmd->id = command_id(cmd->msg);
	cmd->issued_ps = issued_ps;
	cmd->region = -1;
	sched_plan_init(&cmd->plan);
	sched_hazard_init(&cmd->hazards);
	err = sched_plan_build(cmd->msg, core->cfg,
			       sched_region_base(core->cfg, 0), &cmd->plan);
	if (!err)
		err = sched_hazard_collect(&cmd->hazards, cmd->msg, core->rank,
					   core->pe);
	if (err)
		cmd_destroy(&cmd);
	*out = cmd;
	return err;
}

enum rt_err sched_core_submit(struct sched_core *core, const Kb__Command *msg,
			      uint64_t issued_ps)
{
	struct sched_cmd *cmd;
	uint32_t at;
	enum rt_err err;

	core->n_actions = 0;
	if (find_cmd(core, command_id(msg), &at))
		return rt_fail(RT_EDECODE, "command %llu: id already in flight",
			       (unsigned long long)command_id(msg));
	if ((err = new_cmd(core, msg, issued_ps, &cmd)))
		return err;
	if (core->n_cmds == core->cap_cmds) {
		uint32_t cap = core->cap_cmds ? core->cap_cmds * 2 : 8;
		struct sched_cmd **arr = realloc(core->cmds, cap * sizeof(*arr));

		if (!arr) {
			cmd_destroy(&cmd);
			return rt_fail(RT_ENOMEM, "scheduler: no memory for commands");
		}
		core->cmds = arr;
		core->cap_cmds = cap;
	}
	core->cmds[core->n_cmds++] = cmd;
	return admit_and_release(core);
}

/* Retires a finished command: CommandDone, its region back to the FIFO. */
static enum rt_err finish_cmd(struct sched_core *core, uint32_t at)
{
	struct sched_cmd *cmd = core->cmds[at];
	struct sched_action a = {.kind = SCHED_COMMAND_DONE, .id = cmd->id,
				 .issued_ps = cmd->issued_ps};

	if (cmd->region >= 0)
		core->free_regions[core->n_free_regions++] = cmd->region;
	cmd_destroy(&core->cmds[at]);
	memmove(core->cmds + at, core->cmds + at + 1,
		(core->n_cmds - at - 1) * sizeof(*core->cmds));
	core->n_cmds--;
	return push_action(core, &a);
}

enum rt_err sched_core_stage_done(struct sched_core *core, uint64_t command,
				  uint32_t index)
{
	uint32_t at;
	struct sched_cmd *cmd = find_cmd(core, command, &at);
	enum rt_err err = RT_EOK;

	core->n_actions = 0;
	if (!cmd || !cmd->running || index >= cmd->plan.n_stages ||
	    cmd->done[index] ||
	    index >= cmd->next[cmd->plan.stages[index].engine])
		return rt_fail(RT_EPROTOCOL,
			       "scheduler: unexpected StageDone for command %llu "
			       "stage %u (not issued or already done)",
			       (unsigned long long)command, index);
	cmd->done[index] = true;
	cmd->n_done++;
	for (uint32_t i = cmd->dep_start[index]; i < cmd->dep_start[index + 1]; i++)
		cmd->pending[cmd->dep_list[i]]--;
	if (cmd->n_done == cmd->plan.n_stages)
		err = finish_cmd(core, at);
	return err ? err : admit_and_release(core);
}
