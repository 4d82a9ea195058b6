/* barrier.c — tl_barrier: a barrier among the PEs of one rank.
 *
 * Each PE p > 0 pays one dispatch and tells PE 0's host it arrived
 * (PeSync, links.pe_sync_cycles); PE 0, once it has arrived itself and
 * heard from every other PE, pays one dispatch and releases them all at
 * max(its own arrival, the last arrival). So a barrier where every PE
 * arrives at t costs PE 0 t + dispatch + L and the others t + dispatch +
 * 2L (L = links.pe_sync_cycles), whatever the number of PEs: the
 * notifications travel in parallel. It is how program steps are separated
 * (a step starts on a rank when every PE of the rank finished the one
 * before) and how the collectives over the PEs of a rank order their HBM
 * reads after the other PEs' writes. With one PE per rank it costs
 * nothing. A PE first waits for its own commands, so the HBM writes it
 * issued before the barrier are done when any PE passes it.
 *
 * Critical path (rt/path.h): an arrival carries its PE's path; PE 0
 * releases with its own path or, when the last arrival came later, that
 * arrival's; a release carries it on to the other PEs. */
#include "tl_private.h"

/* One PeSync to PE `to` of this rank at `at_ps`, `path` the critical
 * path to then (NULL: none). */
static enum rt_err send_sync(struct tl *tl, uint32_t to, bool release, uint64_t at_ps,
			     const struct rt_path *path)
{
	Kb__PeSync sync = KB__PE_SYNC__INIT;
	Kb__Payload msg = KB__PAYLOAD__INIT;

	sync.epoch = tl->bar_epoch;
	sync.release = release;
	msg.body_case = KB__PAYLOAD__BODY_PE_SYNC;
	msg.pe_sync = &sync;
	return tl->s.port->send(tl->s.port_ctx, TL_PORT_PE(to), at_ps, 0, &msg, path);
}

/* PE 0, every PE there: releases the others at `at_ps` and passes. */
static enum rt_err release_all(struct tl *tl, uint64_t at_ps, const struct rt_path *path)
{
	enum rt_err rc = RT_EOK;

	for (uint32_t p = 1; rc == RT_EOK && p < tl->s.pes; p++)
		rc = send_sync(tl, p, true, at_ps, path);
	tl->bar_arrived = 0;
	tl->bar_has_path = false;
	tl->bar_waiting = false;
	tl->bar_epoch++;
	return rc;
}

void tl_barrier_at(struct tl *tl, struct tl_site at)
{
	uint64_t id;
	enum rt_err rc;

	if (tl->s.pes < 2)
		return;
	tl_wait_all(tl, at); /* what this PE wrote is in HBM before the others read */
	tl_charge(tl, at, rt_dispatch_cycles(tl->s.cfg, RT_ISA_MOVE_LOGICAL_BYTES));
	tl_stat(tl, TL_ST_BARRIERS, 1);
	id = tl_cmd_new(tl, at, TL_CMD_BARRIER);
	if (tl->s.pe == 0) {
		tl->bar_waiting = true;
		if (tl->bar_arrived + 1 == tl->s.pes) {
			rc = release_all(tl, tl->clock_ps, tl->path_ok ? &tl->path : NULL);
			if (rc != RT_EOK)
				tl_abort(tl, at, rc, "tl_barrier: %s", rt_last_error());
			tl_cmd_complete(tl, id, tl->clock_ps);
			return;
		}
	} else {
		rc = send_sync(tl, 0, false, tl->clock_ps, tl->path_ok ? &tl->path : NULL);
		if (rc != RT_EOK)
			tl_abort(tl, at, rc, "tl_barrier: %s", rt_last_error());
	}
	tl->bar_cmd = id;
	tl_wait_cmd(tl, at, id);
}

enum rt_err tl_on_pe_sync(struct tl *tl, const Kb__PeSync *m, uint64_t now_ps,
			  const struct rt_path *path)
{
	const struct rt_path *at_path;
	uint64_t id = tl->bar_cmd, at_ps;
	enum rt_err rc;

	if (m->epoch != tl->bar_epoch || m->release == (tl->s.pe == 0) ||
	    (!m->release && tl->bar_arrived + 1 >= tl->s.pes))
		return rt_fail(RT_EPROTOCOL,
			       "r%u.pe%u: barrier message (epoch %llu, %s) out of turn at barrier %llu",
			       tl->s.rank, tl->s.pe, (unsigned long long)m->epoch,
			       m->release ? "release" : "arrival",
			       (unsigned long long)tl->bar_epoch);
	tl->now_ps = now_ps;
	if (m->release) { /* PE p > 0: its barrier is over */
		if (!id)
			return rt_fail(RT_EPROTOCOL, "r%u.pe%u: barrier release before arrival",
				       tl->s.rank, tl->s.pe);
		tl->bar_epoch++;
		tl->bar_cmd = 0;
		tl_cmd_set_path(tl, id, path);
		tl_cmd_complete(tl, id, now_ps);
		return tl_resume_for(tl, id);
	}
	/* arrivals come in delivery order: the last one is the latest */
	tl->bar_has_path = path != NULL;
	if (path)
		tl->bar_path = *path;
	if (++tl->bar_arrived + 1 < tl->s.pes || !tl->bar_waiting)
		return RT_EOK; /* PE 0 is not there yet, or others are missing */
	/* the kernel clock may run ahead of the event: release at the later */
	at_ps = tl->clock_ps > now_ps ? tl->clock_ps : now_ps;
	at_path = tl->clock_ps >= now_ps ? (tl->path_ok ? &tl->path : NULL)
					 : (tl->bar_has_path ? &tl->bar_path : NULL);
	tl_cmd_set_path(tl, id, at_path);
	rc = release_all(tl, at_ps, at_path);
	if (rc != RT_EOK)
		return rc;
	tl->bar_cmd = 0;
	tl_cmd_complete(tl, id, at_ps);
	return tl_resume_for(tl, id);
}
