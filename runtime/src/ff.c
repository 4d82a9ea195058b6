/* ff.c — fast-forward of periodic runs in a daemon that hosts every
 * component (ADR 0059).
 *
 * Samples are taken after each event in which the reference loop (the
 * registered loop of the lowest component id) finished an iteration. A
 * sample records the time, every statistic and delivery count, every
 * loop's ticks and a signature: a hash of the events run since the last
 * sample and of every event still queued, each as (time - sample time,
 * destination, source, priority, kind), and of each loop's progress since
 * the last sample. The last three windows of M samples (M = 1 .. 8) are
 * compared:
 *   exact: the three windows' signatures are the same sequence, their
 *          lengths are equal and the statistics grew by the same amounts in
 *          the last two: the run is periodic with P = the window's length;
 *   auto:  every loop made the same progress in each window and their
 *          lengths differ by at most AUTO_SPREAD; P is their mean and the
 *          error bound grows by k * (longest - shortest) + one window.
 * Then k periods are skipped, keeping GUARD periods before each loop's end
 * to run its drain in detail: each loop jumps k * (its progress per
 * period), statistics and delivery counts grow by k * their growth per
 * period, and later times are reported k * P later.
 *
 * Over 600 lines on purpose: one state machine (loops, samples, periods,
 * the skip, the report) over one sample ring, whose rules the comment above
 * states once; split, every part would need the ring's layout. */
#include "ff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "rt/job.h"
#include "rt/topology.h"

#define M_MAX 40
/* Samples over which the pattern must have repeated (besides three
 * windows): an iteration that differs from the others less often than this
 * is not seen, and would be skipped over (tl.h: iterations must be alike). */
#define RUN_MIN 32
#define HIST (3 * M_MAX + RUN_MIN + 1)
#define GUARD 1          /* periods kept before a loop's end, besides one */
#define AUTO_SPREAD 0.01 /* auto: window lengths within 1 % of each other */

struct ff_sample {
	uint64_t t;      /* event time */
	uint64_t sig;    /* signature of the period that ended here */
	uint64_t ssig;   /* ... of its structure only: every time left out */
	uint64_t *vals;  /* statistics then delivery counts, every component */
	uint32_t n_lp;   /* loops running then, by rising serial: */
	uint64_t *serial;
	uint64_t *ticks;
	struct rt_path path; /* the reference loop's path at its last tick */
};

struct rt_ff {
	enum rt_ff_mode mode;
	bool active;
	char reason[200];
	struct rt_ff_loop **loops;
	uint32_t n_loops, cap_loops;
	bool due;              /* the reference loop ticked in this event */
	struct rt_path ref_path;
	uint64_t ev_hash;      /* events since the last sample */
	uint64_t ev_shash;     /* ... without their times */
	uint64_t last_t;
	size_t n_vals;
	struct ff_sample hist[HIST];
	uint32_t n_hist;       /* samples held (the newest at n_hist - 1) */
	uint64_t offset_ps;
	uint64_t offset_path[RT_PATH_CLASSES];
	uint64_t first_skip_t; /* event time of the first skip (0: none) */
	uint64_t warps, skipped_iters, skipped_ps, bound_ps;
	uint64_t samples;
	uint64_t serials;      /* loops entered so far */
	uint64_t ticked;       /* iterations run in detail, every loop */
	bool exact_only;       /* every skip so far was exact */
	bool digests;          /* every component digests its state */
	struct ff_skip {       /* each skip, for the launcher's busy times: */
		uint64_t at_ps;    /* where the detail resumes, on the reported clock
				    * (the first period after it is complete) */
		uint64_t period_ps, periods;
	} *skips;
	size_t n_skips, cap_skips;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
	return rt_ff_mix(h, v);
}

static uint64_t event_shape(const struct rt_event *ev)
{
	return mix(((uint64_t)ev->dst << 32) | ev->key.src,
		   ((uint64_t)ev->key.priority << 1) | ev->is_timer);
}

static uint64_t event_word(const struct rt_event *ev, uint64_t t)
{
	uint64_t h = mix(ev->key.time_ps - t, ((uint64_t)ev->dst << 32) | ev->key.src);

	return mix(h, ((uint64_t)ev->key.priority << 1) | ev->is_timer);
}

/* ---------------------------------------------------------------- setup */

static void disable(struct rt_ff *ff, const char *why)
{
	ff->active = false;
	snprintf(ff->reason, sizeof(ff->reason), "%s", why);
}

enum rt_err rt_ff_open(struct rt_daemon *d)
{
	const struct rt_job *job = d->job;
	struct rt_ff *ff;

	if (job->ff_mode == RT_FF_OFF)
		return RT_EOK;
	ff = calloc(1, sizeof(*ff));
	if (!ff)
		return rt_fail(RT_ENOMEM, "daemon %s: cannot allocate fast-forward state", d->label);
	d->ff = ff;
	ff->mode = job->ff_mode;
	ff->active = true;
	ff->exact_only = true;
	if (job->mode == RT_MODE_DATA)
		disable(ff, "data mode computes every iteration");
	else if (d->n_local != d->topo->n_components)
		disable(ff, "components in several daemons (fast-forward needs --colocate all)");
	else if (!job->trace_off)
		disable(ff, "the trace is on (--trace off to fast-forward)");
	ff->digests = true;
	for (uint32_t i = 0; i < d->n_local && ff->active; i++)
		if (!d->ctxs[i].desc->ops->ff_digest) {
			char why[160];

			ff->digests = false;
			snprintf(why, sizeof(why), "component kind \"%s\" cannot digest its state "
				 "(exact mode needs every one to)", d->ctxs[i].desc->ops->name);
			if (ff->mode == RT_FF_EXACT)
				disable(ff, why);
		}
	return RT_EOK;
}

static void free_sample(struct ff_sample *s)
{
	free(s->vals);
	free(s->serial);
	free(s->ticks);
}

static void forget(struct rt_ff *ff)
{
	for (uint32_t i = 0; i < ff->n_hist; i++)
		free_sample(&ff->hist[i]);
	ff->n_hist = 0;
}

void rt_ff_close(struct rt_daemon *d)
{
	if (!d->ff)
		return;
	forget(d->ff);
	free(d->ff->skips);
	free(d->ff->loops);
	free(d->ff);
	d->ff = NULL;
}

/* ---------------------------------------------------------------- loops */

static struct rt_ff *active_ff(const struct rt_ctx *ctx)
{
	struct rt_ff *ff = ctx->daemon->ff;

	return ff && ff->active ? ff : NULL;
}

void rt_ff_loop_enter(struct rt_ctx *ctx, struct rt_ff_loop *loop)
{
	struct rt_ff *ff = active_ff(ctx);

	loop->owner = ctx->id;
	loop->skip = 0;
	loop->ticks = 0;
	loop->slot = UINT32_MAX;
	if (!ff)
		return;
	if (ff->n_loops == ff->cap_loops) {
		uint32_t cap = ff->cap_loops ? ff->cap_loops * 2 : 64;
		struct rt_ff_loop **l = realloc(ff->loops, cap * sizeof(*l));

		if (!l) {
			disable(ff, "out of memory for the loop table");
			return;
		}
		ff->loops = l;
		ff->cap_loops = cap;
	}
	loop->serial = ++ff->serials;
	loop->slot = ff->n_loops;
	ff->loops[ff->n_loops++] = loop; /* the table stays by rising serial */
	/* part of the period's pattern: who entered a loop of what length */
	ff->ev_hash = mix(ff->ev_hash, mix(((uint64_t)ctx->id << 1) | 1, loop->end - loop->index));
}

void rt_ff_loop_leave(struct rt_ctx *ctx, struct rt_ff_loop *loop)
{
	struct rt_ff *ff = ctx->daemon->ff;
	uint32_t s = loop->slot;

	if (!ff || s == UINT32_MAX || s >= ff->n_loops || ff->loops[s] != loop)
		return;
	memmove(&ff->loops[s], &ff->loops[s + 1], (ff->n_loops - s - 1) * sizeof(ff->loops[0]));
	ff->n_loops--;
	for (uint32_t i = s; i < ff->n_loops; i++)
		ff->loops[i]->slot = i;
	loop->slot = UINT32_MAX;
	ff->ev_hash = mix(ff->ev_hash, (uint64_t)ctx->id << 1);
}

/* The loop whose ticks trigger samples: the lowest owner, innermost. */
static const struct rt_ff_loop *reference(const struct rt_ff *ff)
{
	const struct rt_ff_loop *ref = NULL;

	for (uint32_t i = 0; i < ff->n_loops; i++)
		if (!ref || ff->loops[i]->owner <= ref->owner)
			ref = ff->loops[i];
	return ref;
}

void rt_ff_loop_tick(struct rt_ctx *ctx, struct rt_ff_loop *loop)
{
	struct rt_ff *ff = active_ff(ctx);

	loop->ticks++;
	if (ff)
		ff->ticked++;
	if (ff && loop->slot != UINT32_MAX && reference(ff) == loop)
		ff->due = true;
}

void rt_ff_loop_path(struct rt_ctx *ctx, const struct rt_ff_loop *loop, const struct rt_path *p)
{
	struct rt_ff *ff = active_ff(ctx);

	if (ff && p && loop->slot != UINT32_MAX && reference(ff) == loop)
		ff->ref_path = *p;
}

uint64_t rt_ff_offset_ps(const struct rt_ctx *ctx)
{
	return ctx->daemon->ff ? ctx->daemon->ff->offset_ps : 0;
}

uint64_t rt_ff_offset(const struct rt_ff *ff)
{
	return ff ? ff->offset_ps : 0;
}

void rt_ff_offset_path(const struct rt_ff *ff, struct rt_path *path)
{
	if (!ff || !ff->offset_ps)
		return;
	for (unsigned c = 0; c < RT_PATH_CLASSES; c++)
		path->ps[c] += ff->offset_path[c];
}

bool rt_ff_after_skip(const struct rt_ff *ff, uint64_t t)
{
	return ff && ff->warps && t >= ff->first_skip_t;
}

bool rt_ff_due(const struct rt_ff *ff)
{
	return ff->due;
}

/* ---------------------------------------------------------------- samples */

void rt_ff_note_event(struct rt_ff *ff, const struct rt_event *ev)
{
	if (ff->active && ff->n_loops) {
		ff->ev_hash = mix(ff->ev_hash, event_word(ev, ff->last_t));
		ff->ev_shash = mix(ff->ev_shash, event_shape(ev));
	}
}

static size_t count_vals(const struct rt_daemon *d)
{
	size_t n = d->n_local;

	for (uint32_t i = 0; i < d->n_local; i++)
		n += d->ctxs[i].n_stats;
	return n;
}

static void read_vals(const struct rt_daemon *d, uint64_t *v)
{
	size_t at = 0;

	for (uint32_t i = 0; i < d->n_local; i++) {
		const struct rt_ctx *c = &d->ctxs[i];

		for (size_t s = 0; s < c->n_stats; s++)
			v[at++] = c->stats[s].value;
		v[at++] = c->delivered;
	}
}

/* The queue relative to `t`, as an order-free sum (the heap's layout may
 * differ between equal states). */
static uint64_t queue_hash(const struct rt_daemon *d, uint64_t t)
{
	uint64_t h = d->queue.count - d->queue.hole;

	for (size_t i = d->queue.hole; i < d->queue.count; i++) /* the hole holds nothing */
		h += mix(0x51ed27, event_word(&d->queue.items[i], t));
	return h;
}

/* Loop `serial`'s ticks at sample `s`; false if it was not running. */
static bool ticks_at(const struct ff_sample *s, uint64_t serial, uint64_t *ticks)
{
	uint32_t lo = 0, hi = s->n_lp;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (s->serial[mid] < serial)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == s->n_lp || s->serial[lo] != serial)
		return false;
	*ticks = s->ticks[lo];
	return true;
}

/* Iterations loop `l` finished between samples x and y (both ran it). */
static bool progress(const struct ff_sample *x, const struct ff_sample *y,
		     const struct rt_ff_loop *l, uint64_t *per)
{
	uint64_t tx, ty;

	if (!ticks_at(x, l->serial, &tx) || !ticks_at(y, l->serial, &ty))
		return false;
	*per = ty - tx;
	return true;
}

/* The queue's structure: who waits for what, not when. */
static uint64_t queue_shape(const struct rt_daemon *d)
{
	uint64_t h = d->queue.count - d->queue.hole;

	for (size_t i = d->queue.hole; i < d->queue.count; i++)
		h += mix(0x51ed27, event_shape(&d->queue.items[i]));
	return h;
}

/* Every component's state relative to t; t = UINT64_MAX leaves every time
 * out (rt_ff_rel is then 0): its structure. */
static uint64_t components_hash(const struct rt_daemon *d, uint64_t t)
{
	uint64_t h = 0;

	for (uint32_t i = 0; i < d->n_local; i++) {
		const struct rt_ctx *c = &d->ctxs[i];
		uint64_t x = c->desc->ops->ff_digest(c, c->state, t);

		h = mix(h, x);
	}
	return h;
}

/* Each loop's progress since `prev` (its owner too) folded into h. */
static uint64_t loops_hash(const struct rt_ff *ff, const struct ff_sample *prev, uint64_t h)
{
	for (uint32_t i = 0; i < ff->n_loops; i++) {
		const struct rt_ff_loop *l = ff->loops[i];
		uint64_t before = 0;
		bool known = prev && ticks_at(prev, l->serial, &before);

		/* a loop entered since: its ticks and what is left of it */
		h = mix(h, known ? l->ticks - before : (l->ticks | 1ull << 63) ^ (l->end - l->index));
		h = mix(h, l->owner);
	}
	return h;
}

static uint64_t signature(const struct rt_ff *ff, const struct rt_daemon *d,
			  const struct ff_sample *prev, uint64_t t)
{
	uint64_t h = mix(ff->ev_hash, queue_hash(d, t));

	if (ff->digests)
		h = mix(h, components_hash(d, t));

	h = mix(h, prev ? t - prev->t : 0);
	return loops_hash(ff, prev, h);
}

/* Auto mode's signature: the same without any time. */
static uint64_t shape_signature(const struct rt_ff *ff, const struct rt_daemon *d,
				const struct ff_sample *prev)
{
	uint64_t h = mix(ff->ev_shash, queue_shape(d));

	if (ff->digests)
		h = mix(h, components_hash(d, UINT64_MAX));
	return loops_hash(ff, prev, h);
}

/* Appends a sample, dropping the oldest when full. */
static bool push_sample(struct rt_ff *ff, const struct rt_daemon *d)
{
	struct ff_sample *prev = ff->n_hist ? &ff->hist[ff->n_hist - 1] : NULL;
	struct ff_sample s = { .t = d->now, .path = ff->ref_path };

	s.sig = signature(ff, d, prev, d->now);
	s.ssig = ff->mode == RT_FF_AUTO ? shape_signature(ff, d, prev) : 0;
	s.n_lp = ff->n_loops;
	s.vals = malloc((ff->n_vals ? ff->n_vals : 1) * sizeof(*s.vals));
	s.serial = malloc((s.n_lp ? s.n_lp : 1) * sizeof(*s.serial));
	s.ticks = malloc((s.n_lp ? s.n_lp : 1) * sizeof(*s.ticks));
	if (!s.vals || !s.serial || !s.ticks) {
		free_sample(&s);
		return false;
	}
	read_vals(d, s.vals);
	for (uint32_t i = 0; i < s.n_lp; i++) {
		s.serial[i] = ff->loops[i]->serial;
		s.ticks[i] = ff->loops[i]->ticks;
	}
	if (ff->n_hist == HIST) {
		free_sample(&ff->hist[0]);
		memmove(&ff->hist[0], &ff->hist[1], (HIST - 1) * sizeof(ff->hist[0]));
		ff->n_hist--;
	}
	ff->hist[ff->n_hist++] = s;
	return true;
}

/* ---------------------------------------------------------------- periods */

/* A candidate skip: its period, each loop's progress per period, the
 * statistics' growth per period (over `den` periods) and the bound. */
struct ff_period {
	uint32_t m;          /* samples per window */
	uint64_t p;          /* period, ps */
	uint64_t bound_ps;   /* error bound per skipped period, ps */
	uint64_t window_ps;  /* the longest window (the transient's bound) */
	bool exact;
	const struct ff_sample *a, *b, *c, *e; /* window starts and the end */
};

static const struct ff_sample *at_back(const struct rt_ff *ff, uint32_t back)
{
	return &ff->hist[ff->n_hist - 1 - back];
}

/* Samples back over which a pattern of m samples must repeat. */
static uint32_t run_of(uint32_t m)
{
	return 2 * m > RUN_MIN ? 2 * m : RUN_MIN;
}

/* The signatures (or, shape, their structure) repeat with period m over
 * the last run_of(m) + m samples. */
static bool repeats(const struct rt_ff *ff, uint32_t m, bool shape)
{
	for (uint32_t i = 0; i < run_of(m); i++) {
		const struct ff_sample *x = at_back(ff, i), *y = at_back(ff, i + m);

		if (shape ? x->ssig != y->ssig : x->sig != y->sig)
			return false;
	}
	return true;
}

static bool same_growth(const struct rt_ff *ff, const struct ff_sample *x,
			const struct ff_sample *y, const struct ff_sample *z)
{
	for (size_t i = 0; i < ff->n_vals; i++)
		if (y->vals[i] - x->vals[i] != z->vals[i] - y->vals[i])
			return false;
	for (uint32_t i = 0; i < ff->n_loops; i++) {
		uint64_t d1, d2;

		if (progress(x, y, ff->loops[i], &d1) && progress(y, z, ff->loops[i], &d2) &&
		    d1 != d2)
			return false;
	}
	return true;
}

/* Auto: every loop made the same progress in each window, and the same as
 * every other loop, and every loop has the same key. Loops that exchange
 * messages (a ring's PEs) must skip alike, or a skipped send would leave
 * its receive waiting; the runtime cannot see which do, so all must, and
 * the kernel says by the key which iterations send what. */
static bool same_progress(const struct rt_ff *ff, const struct ff_period *q)
{
	uint64_t first = 0;

	for (uint32_t i = 0; i < ff->n_loops; i++) {
		uint64_t d1, d2, d3;

		if (!progress(q->a, q->b, ff->loops[i], &d1) ||
		    !progress(q->b, q->c, ff->loops[i], &d2) ||
		    !progress(q->c, q->e, ff->loops[i], &d3) || d1 != d2 || d2 != d3 || !d1)
			return false;
		if (i == 0)
			first = d1;
		else if (d1 != first || ff->loops[i]->key != ff->loops[0]->key)
			return false;
	}
	return ff->n_loops > 0;
}

/* Every loop running now ran at the windows' start: a loop entered
 * inside them may have a partner elsewhere (its sender) that did not. */
static bool all_persistent(const struct rt_ff *ff, const struct ff_period *q)
{
	uint64_t per;

	for (uint32_t i = 0; i < ff->n_loops; i++)
		if (!progress(q->a, q->e, ff->loops[i], &per))
			return false;
	return true;
}

static bool find_period(const struct rt_ff *ff, uint32_t m, struct ff_period *q)
{
	uint64_t l1, l2, l3, lo, hi;

	if (ff->n_hist < 3 * m + 1 || ff->n_hist < run_of(m) + m + 1)
		return false;
	q->m = m;
	q->a = at_back(ff, 3 * m);
	q->b = at_back(ff, 2 * m);
	q->c = at_back(ff, m);
	q->e = at_back(ff, 0);
	l1 = q->b->t - q->a->t;
	l2 = q->c->t - q->b->t;
	l3 = q->e->t - q->c->t;
	if (!l3)
		return false;
	q->exact = l1 == l2 && l2 == l3 && repeats(ff, m, false) &&
		   same_growth(ff, q->b, q->c, q->e);
	if (q->exact) {
		q->p = l3;
		q->bound_ps = 0;
		q->window_ps = 0;
		return true;
	}
	if (ff->mode != RT_FF_AUTO || !repeats(ff, m, true) || !all_persistent(ff, q) ||
	    !same_progress(ff, q))
		return false;
	lo = l1 < l2 ? (l1 < l3 ? l1 : l3) : (l2 < l3 ? l2 : l3);
	hi = l1 > l2 ? (l1 > l3 ? l1 : l3) : (l2 > l3 ? l2 : l3);
	if ((double)(hi - lo) > AUTO_SPREAD * (double)hi)
		return false;
	q->p = (l1 + l2 + l3 + 1) / 3;
	q->bound_ps = hi - lo;
	q->window_ps = hi;
	return true;
}

/* Periods that may be skipped: every progressing loop keeps GUARD
 * periods and one iteration before its end; 0 if none can. */
static uint64_t periods_to_skip(const struct rt_ff *ff, const struct ff_period *q)
{
	uint64_t k = UINT64_MAX;
	bool any = false;

	for (uint32_t i = 0; i < ff->n_loops; i++) {
		const struct rt_ff_loop *l = ff->loops[i];
		uint64_t per, keep;

		if (!progress(q->a, q->e, l, &per) || !progress(q->c, q->e, l, &per) || !per)
			continue; /* entered inside the windows, or waiting */
		if (per > RT_FF_PER_MAX || per >= l->ready)
			return 0; /* the component could not add its own share */
		keep = (GUARD + 1) * per + 1;
		any = true;
		if (l->index + l->skip >= l->end || l->end - l->index - l->skip <= keep)
			return 0;
		if ((l->end - l->index - l->skip - keep) / per < k)
			k = (l->end - l->index - l->skip - keep) / per;
	}
	return any ? k : 0;
}

/* ---------------------------------------------------------------- the skip */

/* k periods of growth: the last window's (exact), or a third of the three
 * windows' (auto). A maxed statistic that did not grow stays. */
static uint64_t growth(const struct ff_period *q, size_t i, uint64_t k)
{
	if (q->exact)
		return k * (q->e->vals[i] - q->c->vals[i]);
	return (uint64_t)(((unsigned __int128)(q->e->vals[i] - q->a->vals[i]) * k) / 3);
}

static void grow_vals(struct rt_daemon *d, const struct ff_period *q, uint64_t k)
{
	size_t at = 0;

	for (uint32_t i = 0; i < d->n_local; i++) {
		struct rt_ctx *c = &d->ctxs[i];

		for (size_t s = 0; s < c->n_stats; s++, at++)
			c->stats[s].value += growth(q, at, k);
		c->delivered += growth(q, at, k);
		at++;
	}
}

/* The critical path's share of the skipped time: the reference loop's path
 * growth over a period, k times, made to sum to k * P. */
static void grow_path(struct rt_ff *ff, const struct ff_period *q, uint64_t k)
{
	uint64_t add[RT_PATH_CLASSES], sum = 0, want = k * q->p;
	unsigned big = 0;

	for (unsigned c = 0; c < RT_PATH_CLASSES; c++) {
		uint64_t from = q->c->path.ps[c], to = q->e->path.ps[c];

		add[c] = to > from ? k * (to - from) : 0;
		sum += add[c];
		if (add[c] > add[big])
			big = c;
	}
	if (sum > want) { /* scale down, the rest to the biggest class */
		uint64_t left = want;

		for (unsigned c = 0; c < RT_PATH_CLASSES; c++) {
			add[c] = (uint64_t)(((unsigned __int128)add[c] * want) / sum);
			left -= add[c];
		}
		add[big] += left;
	} else {
		add[big] += want - sum;
	}
	for (unsigned c = 0; c < RT_PATH_CLASSES; c++)
		ff->offset_path[c] += add[c];
}

static void skip_periods(struct rt_daemon *d, struct rt_ff *ff, const struct ff_period *q,
			 uint64_t k)
{
	for (uint32_t i = 0; i < ff->n_loops; i++) {
		uint64_t per;

		if (!progress(q->a, q->e, ff->loops[i], &per) ||
		    !progress(q->c, q->e, ff->loops[i], &per))
			continue;
		ff->loops[i]->skip += k * per;
		ff->loops[i]->per = per;
		ff->skipped_iters += k * per;
	}
	grow_vals(d, q, k);
	grow_path(ff, q, k);
	if (ff->n_skips == ff->cap_skips) {
		size_t cap = ff->cap_skips ? 2 * ff->cap_skips : 16;
		struct ff_skip *s = realloc(ff->skips, cap * sizeof(*s));

		if (s) {
			ff->skips = s;
			ff->cap_skips = cap;
		}
	}
	if (ff->n_skips < ff->cap_skips)
		ff->skips[ff->n_skips++] = (struct ff_skip){ d->now + ff->offset_ps + k * q->p, q->p, k };
	if (!ff->warps)
		ff->first_skip_t = d->now;
	ff->warps++;
	ff->offset_ps += k * q->p;
	ff->skipped_ps += k * q->p;
	if (!q->exact) {
		ff->exact_only = false;
		ff->bound_ps += k * q->bound_ps + q->window_ps;
	}
	forget(ff);
}

static void try_skip(struct rt_daemon *d, struct rt_ff *ff)
{
	struct ff_period q;

	for (uint32_t m = 1; m <= M_MAX; m++) {
		uint64_t k;

		if (!find_period(ff, m, &q))
			continue;
		k = periods_to_skip(ff, &q);
		if (k)
			skip_periods(d, ff, &q, k);
		return;
	}
}

enum rt_err rt_ff_after_event(struct rt_daemon *d)
{
	struct rt_ff *ff = d->ff;
	size_t n;

	ff->due = false;
	if (!ff->active || !ff->n_loops)
		return RT_EOK;
	n = count_vals(d);
	if (n != ff->n_vals) { /* a statistic appeared: start again */
		forget(ff);
		ff->n_vals = n;
	}
	ff->samples++;
	if (!push_sample(ff, d)) {
		disable(ff, "out of memory for samples");
		return RT_EOK;
	}
	ff->ev_hash = 0;
	ff->ev_shash = 0;
	ff->last_t = d->now;
	try_skip(d, ff);
	return RT_EOK;
}

/* ---------------------------------------------------------------- report */

enum rt_err rt_ff_write_part(struct rt_daemon *d)
{
	const struct rt_ff *ff = d->ff;
	char path[RT_PATH_MAX + 64];
	FILE *f;

	if (!ff)
		return RT_EOK;
	snprintf(path, sizeof(path), "%s/%s/ff.%u", d->job->out_dir, RT_PARTS_DIR, d->index);
	f = fopen(path, "w");
	if (!f)
		return rt_fail(RT_EIO, "daemon %s: cannot write %s", d->label, path);
	fprintf(f, "mode %s\nactive %d\nreason %s\nskips %llu\nskipped_iterations %llu\n"
		"skipped_ps %llu\nbound_ps %llu\nexact %d\nsamples %llu\nsimulated_iterations %llu\n",
		rt_ff_mode_name(ff->mode), ff->active, ff->reason,
		(unsigned long long)ff->warps, (unsigned long long)ff->skipped_iters,
		(unsigned long long)ff->skipped_ps, (unsigned long long)ff->bound_ps,
		ff->exact_only, (unsigned long long)ff->samples,
		(unsigned long long)ff->ticked);
	for (size_t i = 0; i < ff->n_skips; i++)
		fprintf(f, "skip %llu %llu %llu\n", (unsigned long long)ff->skips[i].at_ps,
			(unsigned long long)ff->skips[i].period_ps,
			(unsigned long long)ff->skips[i].periods);
	return fclose(f) ? rt_fail(RT_EIO, "daemon %s: cannot write %s", d->label, path) : RT_EOK;
}

const char *rt_ff_mode_name(enum rt_ff_mode m)
{
	return m == RT_FF_EXACT ? "exact" : m == RT_FF_AUTO ? "auto" : "off";
}

bool rt_ff_mode_parse(const char *s, enum rt_ff_mode *out)
{
	static const enum rt_ff_mode all[] = { RT_FF_OFF, RT_FF_EXACT, RT_FF_AUTO };

	for (size_t i = 0; i < 3; i++)
		if (!strcmp(s, rt_ff_mode_name(all[i]))) {
			*out = all[i];
			return true;
		}
	return false;
}
