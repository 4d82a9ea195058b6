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

/* A message from another daemon holds its packed bytes (on the heap); one
 * from a component of the same daemon holds an in-process copy (rt/msg.h)
 * and its content digest instead, and is never packed. 64 bytes: the heap
 * moves events by value. */
struct rt_event {
	struct rt_key key;
	uint64_t send_ps;   /* message: simulated send time */
	union {
		uint64_t tag;    /* timer: the component's tag */
		uint64_t digest; /* local message: rt_msg_digest of it */
	};
	union {
		uint8_t *heap;   /* packed message: its bytes */
		void *msg;       /* local message: its copy (owned; rt_msg_free) */
	};
	uint32_t dst;       /* destination component id */
	uint32_t len;       /* packed message: payload length */
	bool is_timer;      /* a component's own timer, not a message */
	bool is_local;      /* message: `msg` and `digest`, not bytes */
};

/* A pop leaves its slot empty (`hole`: items[0] holds nothing) and the next
 * push fills it by sifting down from the root, so a delivery that sends one
 * message costs one sift instead of two (ADR 0062). */
struct rt_queue {
	struct rt_event *items; /* heap array */
	size_t count;           /* slots in use, the hole included */
	size_t cap;
	bool hole;              /* items[0] is empty; both subtrees are heaps */
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
/* Makes room for a `len`-byte payload and returns where to write it; NULL
 * when out of memory. */
uint8_t *rt_event_reserve(struct rt_event *ev, size_t len);
/* Copies `len` bytes into the event. */
enum rt_err rt_event_set_bytes(struct rt_event *ev, const void *bytes,
			       size_t len);
/* Frees a heap payload or a local message's copy. */
void rt_event_release(struct rt_event *ev);

#endif
