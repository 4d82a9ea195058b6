/* event.c — binary min-heap of events ordered by the total key. */
#include "rt/event.h"

#include <stdlib.h>
#include <string.h>

#include "rt/msg.h"

int rt_key_cmp(const struct rt_key *a, const struct rt_key *b)
{
	if (a->time_ps != b->time_ps)
		return a->time_ps < b->time_ps ? -1 : 1;
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	if (a->src != b->src)
		return a->src < b->src ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	return 0;
}

void rt_queue_init(struct rt_queue *q)
{
	q->items = NULL;
	q->count = 0;
	q->cap = 0;
	q->hole = false;
}

void rt_queue_release(struct rt_queue *q)
{
	for (size_t i = q->hole; i < q->count; i++)
		rt_event_release(&q->items[i]);
	free(q->items);
	rt_queue_init(q);
}

/* rt_key_cmp(a, b) < 0, inlined: the heap's hottest line. */
static inline bool before(const struct rt_event *a, const struct rt_event *b)
{
	if (a->key.time_ps != b->key.time_ps)
		return a->key.time_ps < b->key.time_ps;
	if (a->key.priority != b->key.priority)
		return a->key.priority < b->key.priority;
	if (a->key.src != b->key.src)
		return a->key.src < b->key.src;
	return a->key.seq < b->key.seq;
}

/* Puts `ev` in the empty slot i, moving smaller children up until its place
 * below i is found. Only i's subtree is looked at: its parent, if any, is
 * the hole or already before everything in it. */
static void sift_down(struct rt_queue *q, size_t i, const struct rt_event *ev)
{
	for (;;) {
		size_t child = 2 * i + 1;

		if (child >= q->count)
			break;
		if (child + 1 < q->count && before(&q->items[child + 1], &q->items[child]))
			child++;
		if (!before(&q->items[child], ev))
			break;
		q->items[i] = q->items[child];
		i = child;
	}
	q->items[i] = *ev;
}

enum rt_err rt_queue_push(struct rt_queue *q, const struct rt_event *ev)
{
	size_t i;

	if (q->hole) { /* the popped root's slot: one sift down fills it */
		q->hole = false;
		sift_down(q, 0, ev);
		return RT_EOK;
	}
	if (q->count == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 64;
		struct rt_event *items = realloc(q->items, cap * sizeof(*items));

		if (!items)
			return rt_fail(RT_ENOMEM, "event queue cannot grow to %zu events", cap);
		q->items = items;
		q->cap = cap;
	}
	/* sift up: move parents down until the new event's slot is found */
	i = q->count++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!before(ev, &q->items[parent]))
			break;
		q->items[i] = q->items[parent];
		i = parent;
	}
	q->items[i] = *ev;
	return RT_EOK;
}

/* The slot of the earliest event, or 0 when there is none (0 is the hole
 * or, without one, the root). With a hole the earliest is a root's child. */
static size_t earliest(const struct rt_queue *q)
{
	if (!q->hole)
		return 0;
	if (q->count < 3)
		return q->count - 1; /* 1 (the child) or 0 (nothing) */
	return before(&q->items[2], &q->items[1]) ? 2 : 1;
}

const struct rt_event *rt_queue_peek(const struct rt_queue *q)
{
	size_t at = earliest(q);

	return q->count > q->hole ? &q->items[at] : NULL;
}

bool rt_queue_pop(struct rt_queue *q, struct rt_event *out)
{
	size_t at = earliest(q);
	struct rt_event last;

	if (q->count <= q->hole) {
		q->count = 0;
		q->hole = false;
		return false;
	}
	*out = q->items[at];
	if (!q->hole) { /* the root: leave its slot for the next push */
		q->hole = true;
		return true;
	}
	/* a child of the hole: the last event takes its slot, sifted down */
	last = q->items[--q->count];
	if (at < q->count)
		sift_down(q, at, &last);
	if (q->count == 1) /* only the hole is left */
		q->count = 0, q->hole = false;
	return true;
}

const uint8_t *rt_event_bytes(const struct rt_event *ev)
{
	return ev->heap;
}

uint8_t *rt_event_reserve(struct rt_event *ev, size_t len)
{
	ev->len = (uint32_t)len;
	ev->is_local = false;
	ev->heap = malloc(len ? len : 1);
	if (!ev->heap)
		ev->len = 0;
	return ev->heap;
}

enum rt_err rt_event_set_bytes(struct rt_event *ev, const void *bytes, size_t len)
{
	uint8_t *at = rt_event_reserve(ev, len);

	if (!at)
		return rt_fail(RT_ENOMEM, "cannot allocate a %zu-byte message", len);
	if (len)
		memcpy(at, bytes, len);
	return RT_EOK;
}

void rt_event_release(struct rt_event *ev)
{
	if (ev->is_local)
		rt_msg_free(ev->msg);
	else if (!ev->is_timer)
		free(ev->heap);
	ev->heap = NULL;
	ev->len = 0;
}
