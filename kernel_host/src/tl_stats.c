/* tl_stats.c — the kernel host's statistics: its own, declared where they
 * are defined with their units and descriptions and added by handle, and
 * the PE_CPU time of each call site of the kernel (dispatch cycles, time
 * waiting), reported per component at the kernel's end. */
#include "tl_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct rt_stat_decl host_stats[TL_ST_COUNT] = {
	[TL_ST_DISPATCH] = RT_STAT_DECL("dispatch_cycles", "cycles",
			"PE_CPU cycles spent dispatching commands (FIXED + R x logical bytes each)"),
	[TL_ST_COMMANDS] = RT_STAT_DECL("commands", "count", "commands the kernel issued"),
	[TL_ST_KERNEL_PS] = RT_STAT_DECL("kernel_ps", "ps",
			"kernel clock from start to the end of its last command"),
	[TL_ST_KERNEL_END] = RT_STAT_DECL_MAX("kernel_end_ps", "ps",
			"time the kernel and all its commands were done"),
	[TL_ST_PEAK_SCRATCH] = RT_STAT_DECL_MAX("peak_scratch_bytes", "bytes",
			"most TCM scratch in use at once"),
	[TL_ST_WAIT] = RT_STAT_DECL("wait_ps", "ps",
			"kernel clock spent waiting (first use of a handle, tl_wait, scope exit, a receive)"),
	[TL_ST_NONFINITE_OUT] = RT_STAT_DECL("nonfinite_outputs", "elements",
			"NaN or infinite elements written to .npy outputs"),
	[TL_ST_IPCQ_BYTES] = RT_STAT_DECL("ipcq_bytes", "bytes", "bytes sent over the IPCQ ring"),
	[TL_ST_IPCQ_LINK_BUSY] = RT_STAT_DECL("ipcq_link_busy_ps", "ps",
			"time this PE's ring links spent moving its bytes"),
	[TL_ST_IPCQ_RECV_WAIT] = RT_STAT_DECL("ipcq_recv_wait_ps", "ps",
			"kernel time waiting on IPCQ receives"),
	[TL_ST_BARRIERS] = RT_STAT_DECL("barriers", "count",
			"tl_barrier calls among the PEs of a rank (program steps included)"),
	[TL_ST_COLLECTIVES] = RT_STAT_DECL("collectives", "count", "collectives this PE took part in"),
	[TL_ST_COLLECTIVE_PS] = RT_STAT_DECL("collective_ps", "ps",
			"kernel time inside collectives, from the call to its return"),
	[TL_ST_IPCQ_LINK_LEFT_BUSY] = RT_STAT_DECL("ipcq_link_left_busy_ps", "ps",
			"... of it on the link to the left neighbour"),
	[TL_ST_IPCQ_LINK_RIGHT_BUSY] = RT_STAT_DECL("ipcq_link_right_busy_ps", "ps",
			"... of it on the link to the right neighbour"),
	[TL_ST_IPCQ_LINK_LEFT_BYTES] = RT_STAT_DECL("ipcq_link_left_bytes", "bytes",
			"bytes this PE sent to its left neighbour"),
	[TL_ST_IPCQ_LINK_RIGHT_BYTES] = RT_STAT_DECL("ipcq_link_right_bytes", "bytes",
			"bytes this PE sent to its right neighbour"),
};

void tl_stat(struct tl *tl, enum tl_stat_id id, uint64_t value)
{
	const struct tl_port_ops *p = tl->s.port;
	const struct rt_stat_decl *d = &host_stats[id];
	bool max = d->merge == RT_STAT_MAX;

	if (!p->stat_declare) { /* a port that keeps statistics by name only */
		if (max ? p->stat_max != NULL : p->stat_add != NULL)
			(max ? p->stat_max : p->stat_add)(tl->s.port_ctx, d->name, value);
		return;
	}
	if (!tl->stat_h[id])
		tl->stat_h[id] = p->stat_declare(tl->s.port_ctx, d) + 1; /* NONE + 1 = 0 */
	if (!tl->stat_h[id])
		return;
	if (max && p->stat_max_h)
		p->stat_max_h(tl->s.port_ctx, tl->stat_h[id] - 1, value);
	else if (!max && p->stat_add_h)
		p->stat_add_h(tl->s.port_ctx, tl->stat_h[id] - 1, value);
}

/* ------------------------------------------------------------ call sites */

static uint32_t site_hash(const char *file, int line, uint32_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)file * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(unsigned)line;

	h ^= h >> 29;
	return (uint32_t)(h * 0xbf58476d1ce4e5b9ULL >> 32) & (cap - 1);
}

/* Doubles the table (a power of two, at most half full). */
static bool sites_grow(struct tl *tl)
{
	uint32_t cap = tl->cap_sites ? 2 * tl->cap_sites : 64;
	struct tl_site_acc *t = calloc(cap, sizeof(*t));

	if (!t)
		return false;
	for (uint32_t i = 0; i < tl->cap_sites; i++) {
		const struct tl_site_acc *s = &tl->sites[i];
		uint32_t j;

		if (!s->file)
			continue;
		for (j = site_hash(s->file, s->line, cap); t[j].file; j = (j + 1) & (cap - 1))
			;
		t[j] = *s;
	}
	free(tl->sites);
	tl->sites = t;
	tl->cap_sites = cap;
	return true;
}

/* The accumulator of call site `at` (by the address of its file name and
 * its line: one lookup, no string compare), made on first use; NULL when
 * out of memory (the site is then not itemised). */
static struct tl_site_acc *site_of(struct tl *tl, struct tl_site at)
{
	const char *file = at.file ? at.file : "?";
	uint32_t i;

	if (2 * (tl->n_sites + 1) > tl->cap_sites && !sites_grow(tl))
		return NULL;
	for (i = site_hash(file, at.line, tl->cap_sites); tl->sites[i].file;
	     i = (i + 1) & (tl->cap_sites - 1))
		if (tl->sites[i].file == file && tl->sites[i].line == at.line)
			return &tl->sites[i];
	tl->sites[i] = (struct tl_site_acc){ .file = file, .line = at.line, .order = tl->n_sites++ };
	return &tl->sites[i];
}

void tl_site_dispatch(struct tl *tl, struct tl_site at, uint64_t cycles)
{
	struct tl_site_acc *s = site_of(tl, at);

	if (s)
		s->dispatch_cycles += cycles;
}

void tl_site_wait(struct tl *tl, struct tl_site at, uint64_t ps)
{
	struct tl_site_acc *s = site_of(tl, at);

	if (s)
		s->wait_ps += ps;
}

/* "what@FILE:LINE", keeping the end of a long path (names are at most
 * RT_STAT_NAME_MAX bytes). */
static void site_stat_name(const char *what, const struct tl_site_acc *s, char *out, size_t cap)
{
	char tail[32];
	size_t room, flen = strlen(s->file);

	if (s->line > 0)
		snprintf(tail, sizeof(tail), ":%d", s->line);
	else
		snprintf(tail, sizeof(tail), "(return)");
	room = RT_STAT_NAME_MAX - 1 - strlen(what) - 1 - strlen(tail);
	snprintf(out, cap, "%s@%s%s%s", what, flen > room ? "..." : "",
		 flen > room ? s->file + flen - (room - 3) : s->file, tail);
}

static void site_emit(struct tl *tl, const char *what, const char *unit, const char *desc,
		      const struct tl_site_acc *s, uint64_t value)
{
	char name[RT_STAT_NAME_MAX + 8];
	struct rt_stat_decl d = { name, unit, desc, RT_STAT_SUM, true };
	uint32_t h;

	if (!value)
		return;
	site_stat_name(what, s, name, sizeof(name));
	for (char *c = name; *c; c++) /* a file name is the user's: keep it printable */
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			*c = '?';
	h = tl->s.port->stat_declare(tl->s.port_ctx, &d);
	tl->s.port->stat_add_h(tl->s.port_ctx, h, value);
}

static int order_cmp(const void *a, const void *b)
{
	const struct tl_site_acc *x = *(const struct tl_site_acc *const *)a;
	const struct tl_site_acc *y = *(const struct tl_site_acc *const *)b;

	return x->order < y->order ? -1 : x->order > y->order;
}

void tl_sites_report(struct tl *tl)
{
	struct tl_site_acc **order;
	uint32_t n = 0;

	if (!tl->s.port->stat_declare || !tl->s.port->stat_add_h || !tl->n_sites)
		return;
	order = calloc(tl->n_sites, sizeof(*order));
	if (!order)
		return;
	for (uint32_t i = 0; i < tl->cap_sites; i++)
		if (tl->sites[i].file)
			order[n++] = &tl->sites[i];
	qsort(order, n, sizeof(*order), order_cmp);
	for (uint32_t i = 0; i < n; i++) {
		site_emit(tl, "dispatch_cycles", "cycles",
			  "PE_CPU cycles dispatching the commands issued at this call site", order[i],
			  order[i]->dispatch_cycles);
		site_emit(tl, "wait_ps", "ps", "kernel clock spent waiting at this call site",
			  order[i], order[i]->wait_ps);
	}
	free(order);
}

void tl_sites_release(struct tl *tl)
{
	free(tl->sites);
	tl->sites = NULL;
	tl->n_sites = tl->cap_sites = 0;
}
