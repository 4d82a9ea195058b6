/* event.h — the local event queue.
 *
 * Events are ordered by the total key (time_ps, priority, src, seq), all
 * assigned by the sender, so simultaneous events resolve the same way no
 * matter in which order they were inserted (libuv timer_less_than style).
 * The queue is a binary min-heap of events stored by value. */
#ifndef RT_EVENT_H
#define RT_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

#define RT_TIME_NEVER UINT64_MAX

struct rt_key {
	uint64_t time_ps;  /* delivery time */
	uint32_t priority; /* lower first at equal time */
	uint32_t src;      /* source component id (the source link) */
	uint64_t seq;      /* per-source sequence */
};

/* Inline payload capacity: small messages avoid a heap allocation. */
#define RT_EVENT_INLINE 40

struct rt_event {
	struct rt_key key;
	uint32_t dst;       /* destination component id */
	bool is_timer;      /* a component's own timer, not a message */
	uint64_t send_ps;   /* message: simulated send time */
	uint64_t tag;       /* timer: the component's tag */
	uint32_t len;       /* message: packed payload length */
	uint8_t *heap;      /* message: payload when len > RT_EVENT_INLINE */
	uint8_t inline_bytes[RT_EVENT_INLINE];
};

struct rt_queue {
	struct rt_event *items; /* heap array */
	size_t count;
	size_t cap;
};

/* -1, 0, 1 as a orders before, equal to, after b. */
int rt_key_cmp(const struct rt_key *a, const struct rt_key *b);

void rt_queue_init(struct rt_queue *q);
/* Frees payloads of events still queued. */
void rt_queue_release(struct rt_queue *q);
/* Moves `ev` (and its payload) into the queue. */
enum rt_err rt_queue_push(struct rt_queue *q, const struct rt_event *ev);
/* Earliest event or NULL. */
const struct rt_event *rt_queue_peek(const struct rt_queue *q);
/* Moves the earliest event to `out`; false when empty. */
bool rt_queue_pop(struct rt_queue *q, struct rt_event *out);

/* Payload bytes of a message event. */
const uint8_t *rt_event_bytes(const struct rt_event *ev);
/* Makes room for a `len`-byte payload (inline or heap) and returns where to
 * write it; NULL when out of memory. */
uint8_t *rt_event_reserve(struct rt_event *ev, size_t len);
/* Copies `len` bytes into the event (inline or heap). */
enum rt_err rt_event_set_bytes(struct rt_event *ev, const void *bytes,
			       size_t len);
/* Frees a heap payload. */
void rt_event_release(struct rt_event *ev);

#endif
