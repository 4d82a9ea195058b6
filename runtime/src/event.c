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
}

void rt_queue_release(struct rt_queue *q)
{
	for (size_t i = 0; i < q->count; i++)
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

enum rt_err rt_queue_push(struct rt_queue *q, const struct rt_event *ev)
{
	size_t i;

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

const struct rt_event *rt_queue_peek(const struct rt_queue *q)
{
	return q->count ? &q->items[0] : NULL;
}

bool rt_queue_pop(struct rt_queue *q, struct rt_event *out)
{
	struct rt_event last;
	size_t i = 0;

	if (!q->count)
		return false;
	*out = q->items[0];
	last = q->items[--q->count];
	/* sift down the last event from the root */
	for (;;) {
		size_t child = 2 * i + 1;

		if (child >= q->count)
			break;
		if (child + 1 < q->count && before(&q->items[child + 1], &q->items[child]))
			child++;
		if (!before(&q->items[child], &last))
			break;
		q->items[i] = q->items[child];
		i = child;
	}
	if (q->count)
		q->items[i] = last;
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
