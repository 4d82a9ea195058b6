/* msg.c — in-process messages: a canonical copy and a content digest, both
 * one walk over the protobuf-c descriptors (rt/msg.h says why). The rules
 * mirror protobuf-c 1.4's packer (which fields it writes) and unpacker (what
 * an absent field decodes to).
 *
 * Over 600 lines on purpose: the copy and the digest must agree on every
 * rule of which field the packer writes, so measuring, copying, hashing and
 * the plans that make them fast are one walk in one file. */
#include "rt/msg.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench.pb-c.h"
#include "rt/buf.h"
#include "rt/rand.h"

/* One walk both measures and (when `base` is set) copies, so the two can
 * never disagree about the layout. */
struct walk {
	uint8_t *base; /* NULL: measure only */
	size_t cap;    /* bytes at base; past them only measure */
	size_t used;
	bool hashing;
	bool planned; /* by the descriptor's plan (below), not field by field */
	uint64_t h;
};

static void *take(struct walk *w, size_t size)
{
	size_t at = (w->used + 7) & ~(size_t)7;

	w->used = at + size;
	return w->base && w->used <= w->cap ? w->base + at : NULL;
}

/* Folds `v` into the digest: one multiply and a rotation per word (a
 * dependent chain of full mixers cost more than the copy); the result is
 * finished with a full mixer. */
static inline void mix(struct walk *w, uint64_t v)
{
	if (w->hashing) {
		uint64_t h = (w->h ^ v) * 0x9e3779b97f4a7c15ULL;

		w->h = h << 31 | h >> 33;
	}
}

/* Would the packer write this field? (optional_field_pack, oneof_field_pack
 * and field_is_zeroish in protobuf-c.c) */
static bool present(const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m,
		    const void *member)
{
	const void *q = (const char *)m + f->quantifier_offset;
	bool pointer = f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING;

	if (f->label == PROTOBUF_C_LABEL_REQUIRED)
		return true;
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		if (*(const uint32_t *)q != f->id)
			return false;
		return !pointer || (*(const void *const *)member &&
				    *(const void *const *)member != f->default_value);
	}
	if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
		return pointer ? *(const void *const *)member &&
					 *(const void *const *)member != f->default_value
			       : *(const protobuf_c_boolean *)q != 0;
	switch (f->type) { /* proto3, no label: left out when zero */
	case PROTOBUF_C_TYPE_BOOL:
		return *(const protobuf_c_boolean *)member != 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return *(const uint64_t *)member != 0;
	case PROTOBUF_C_TYPE_FLOAT:
		return *(const float *)member != 0; /* -0.0 is left out too */
	case PROTOBUF_C_TYPE_DOUBLE:
		return *(const double *)member != 0;
	case PROTOBUF_C_TYPE_STRING:
		return *(const char *const *)member && **(const char *const *)member;
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)member)->len != 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(const void *const *)member != NULL;
	default: /* the 32-bit integers and enums */
		return *(const uint32_t *)member != 0;
	}
}

static size_t elt_size(ProtobufCType type)
{
	switch (type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static ProtobufCMessage *walk_msg(struct walk *w, const ProtobufCMessage *src);

static void walk_bytes(struct walk *w, const uint8_t *data, size_t len, uint8_t **out,
		       bool terminate)
{
	uint8_t *at = len || terminate ? take(w, len + terminate) : NULL;

	if (w->hashing)
		w->h = rt_hash(w->h, data, len);
	if (at) {
		if (len)
			memcpy(at, data, len);
		if (terminate)
			at[len] = '\0';
	}
	*out = at;
}

/* One value of `f` from `src` to `dst` (dst NULL while measuring). */
static void walk_value(struct walk *w, const ProtobufCFieldDescriptor *f, const void *src,
		       void *dst)
{
	uint64_t v;

	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(const char *const *)src;
		uint8_t *copy = NULL;

		walk_bytes(w, (const uint8_t *)(s ? s : ""), s ? strlen(s) : 0, &copy, true);
		if (dst)
			*(char **)dst = (char *)copy;
		return;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = src;
		uint8_t *copy = NULL;

		walk_bytes(w, b->data, b->len, &copy, false);
		if (dst)
			*(ProtobufCBinaryData *)dst = (ProtobufCBinaryData){ b->len, copy };
		return;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		ProtobufCMessage *copy = walk_msg(w, *(const ProtobufCMessage *const *)src);

		if (dst)
			*(ProtobufCMessage **)dst = copy;
		return;
	}
	case PROTOBUF_C_TYPE_BOOL:
		v = *(const protobuf_c_boolean *)src != 0; /* the wire has 0 or 1 */
		if (dst)
			*(protobuf_c_boolean *)dst = (protobuf_c_boolean)v;
		break;
	default:
		if (elt_size(f->type) == 8) {
			memcpy(&v, src, 8);
			if (dst)
				memcpy(dst, &v, 8);
		} else {
			uint32_t v32;

			memcpy(&v32, src, 4);
			v = v32;
			if (dst)
				memcpy(dst, &v32, 4);
		}
		break;
	}
	mix(w, v);
}

static void walk_repeated(struct walk *w, const ProtobufCFieldDescriptor *f,
			  const ProtobufCMessage *src, ProtobufCMessage *dst)
{
	size_t n = *(const size_t *)((const char *)src + f->quantifier_offset);
	size_t size = elt_size(f->type);
	const uint8_t *from = *(const uint8_t *const *)((const char *)src + f->offset);
	uint8_t *to;

	if (!n)
		return; /* decodes as 0 elements, NULL array: the init values */
	mix(w, f->id);
	mix(w, n);
	to = take(w, n * size);
	for (size_t i = 0; i < n; i++)
		walk_value(w, f, from + i * size, to ? to + i * size : NULL);
	if (dst) {
		*(size_t *)((char *)dst + f->quantifier_offset) = n;
		*(uint8_t **)((char *)dst + f->offset) = to;
	}
}

static void walk_unknown(struct walk *w, const ProtobufCMessage *src, ProtobufCMessage *dst)
{
	ProtobufCMessageUnknownField *to;

	if (!src->n_unknown_fields)
		return;
	mix(w, src->n_unknown_fields);
	to = take(w, src->n_unknown_fields * sizeof(*to));
	for (size_t i = 0; i < src->n_unknown_fields; i++) {
		const ProtobufCMessageUnknownField *u = &src->unknown_fields[i];
		uint8_t *data = NULL;

		mix(w, u->tag);
		mix(w, u->wire_type);
		walk_bytes(w, u->data, u->len, &data, false);
		if (to)
			to[i] = (ProtobufCMessageUnknownField){ u->tag, u->wire_type, u->len, data };
	}
	if (dst) {
		dst->n_unknown_fields = src->n_unknown_fields;
		dst->unknown_fields = to;
	}
}

/* A Payload's critical path and segment index describe how the run was
 * observed (run.critical_path, the trace), not what was simulated: the
 * digest leaves them out, so traced and untraced runs agree (ADR 0030). */
static bool observation(const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f)
{
	return desc == &kb__payload__descriptor && (f->id == 20 || f->id == 21);
}

/* ----------------------------------------------------------------- plans */

/* The walk above reads the descriptor field by field for every message:
 * each member of a oneof is visited and skipped, each field's kind decoded
 * again. A plan is what that walk would decide about one descriptor, worked
 * out once: its fields in the same order, with a run of consecutive members
 * of one oneof folded into a single step that finds the set member by its
 * case. Walking a plan visits, mixes and copies exactly what walk_msg does,
 * in the same order (tests/unit/test_msg.c compares the two on random
 * messages of every descriptor), only with fewer branches. */

#define PLAN_SLOTS 128u  /* descriptors with a plan at most (kernbench.proto has ~40) */
#define PLAN_SPAN 64u    /* widest range of ids a oneof step indexes */

/* What a step is: most fields of kernbench's messages are proto3 scalars
 * or sub-messages, walked without decoding the descriptor (present when
 * not zero or not NULL, copied and mixed as walk_value does: an integer as
 * its word, a bool as 1, a float or double as its bits, a sub-message by
 * walking it); others (strings, bytes, repeated, labelled and observation
 * fields) go through walk_field. */
enum step_kind { STEP_FIELD, STEP_ONEOF, STEP_WORD32, STEP_WORD64, STEP_BOOL, STEP_MESSAGE,
		 STEP_STRING, STEP_MESSAGES };

/* A float or double is a word whose sign bit does not make it present
 * (-0.0 is left out, NaN is not): present when (bits & mask) != 0. */
#define MASK32 0xffffffffull
#define MASK64 0xffffffffffffffffull

struct step {
	uint32_t kind;   /* enum step_kind */
	uint32_t field;  /* a field: its index in desc->fields */
	uint32_t offset; /* a member: its offset */
	uint32_t id;     /* a member: its field id */
	uint32_t qoff;   /* a oneof run: offset of its case; repeated: of its count */
	uint32_t lo, n;  /* a oneof run: case ids lo .. lo + n - 1 */
	uint64_t mask;   /* a word: the bits that make it present */
	uint16_t *index; /* a oneof run: 1 + field index per id - lo, 0 none; NULL: a field */
};

struct plan {
	const ProtobufCMessageDescriptor *desc;
	const void *init; /* what desc->message_init writes, copied instead */
	unsigned n_steps;
	struct step steps[];
};

static _Atomic(struct plan *) plans[PLAN_SLOTS];

static bool oneof_member(const ProtobufCFieldDescriptor *f)
{
	return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && f->label != PROTOBUF_C_LABEL_REPEATED;
}

/* The run of members of the oneof of fields[i] starting at i: its end
 * (exclusive) and id range. */
static unsigned oneof_run(const ProtobufCMessageDescriptor *desc, unsigned i, uint32_t *lo,
			  uint32_t *hi)
{
	unsigned j = i;

	*lo = *hi = desc->fields[i].id;
	while (j < desc->n_fields && oneof_member(&desc->fields[j]) &&
	       desc->fields[j].quantifier_offset == desc->fields[i].quantifier_offset) {
		*lo = desc->fields[j].id < *lo ? desc->fields[j].id : *lo;
		*hi = desc->fields[j].id > *hi ? desc->fields[j].id : *hi;
		j++;
	}
	return j;
}

/* The step of one field outside a folded oneof run. */
static struct step field_step(const ProtobufCMessageDescriptor *desc, unsigned i)
{
	const ProtobufCFieldDescriptor *f = &desc->fields[i];
	struct step s = { .kind = STEP_FIELD, .field = i, .offset = f->offset, .id = f->id,
			  .qoff = f->quantifier_offset };

	if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || observation(desc, f))
		return s;
	if (f->label == PROTOBUF_C_LABEL_REPEATED && f->type == PROTOBUF_C_TYPE_MESSAGE)
		s.kind = STEP_MESSAGES;
	if (f->label != PROTOBUF_C_LABEL_NONE)
		return s;
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		s.kind = STEP_WORD32;
		s.mask = MASK32;
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		s.kind = STEP_WORD64;
		s.mask = MASK64;
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		s.kind = STEP_WORD32;
		s.mask = MASK32 >> 1;
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		s.kind = STEP_WORD64;
		s.mask = MASK64 >> 1;
		break;
	case PROTOBUF_C_TYPE_BOOL:
		s.kind = STEP_BOOL;
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		s.kind = STEP_MESSAGE;
		break;
	case PROTOBUF_C_TYPE_STRING:
		s.kind = STEP_STRING;
		break;
	default:
		break;
	}
	return s;
}

/* One block: the plan, its steps, then the index tables. NULL when out of
 * memory (the walk then reads the descriptor as before). */
static struct plan *plan_new(const ProtobufCMessageDescriptor *desc)
{
	size_t n_steps = 0, n_index = 0;
	struct plan *p;
	uint16_t *index;
	uint8_t *init;

	for (unsigned i = 0; i < desc->n_fields;) {
		uint32_t lo, hi;
		unsigned end = oneof_member(&desc->fields[i]) ? oneof_run(desc, i, &lo, &hi) : i + 1;

		if (end > i + 1 && hi - lo < PLAN_SPAN) {
			n_steps++;
			n_index += hi - lo + 1;
		} else {
			n_steps += end - i;
		}
		i = end;
	}
	p = calloc(1, sizeof(*p) + n_steps * sizeof(struct step) + n_index * sizeof(uint16_t) +
			     8 + desc->sizeof_message);
	if (!p)
		return NULL;
	p->desc = desc;
	index = (uint16_t *)&p->steps[n_steps];
	init = (uint8_t *)(index + n_index);
	init += (8 - (uintptr_t)init % 8) % 8;
	desc->message_init((ProtobufCMessage *)init);
	p->init = init;
	for (unsigned i = 0; i < desc->n_fields;) {
		uint32_t lo, hi;
		unsigned end = oneof_member(&desc->fields[i]) ? oneof_run(desc, i, &lo, &hi) : i + 1;

		if (end > i + 1 && hi - lo < PLAN_SPAN) {
			struct step *s = &p->steps[p->n_steps++];

			*s = (struct step){ .kind = STEP_ONEOF,
					    .qoff = desc->fields[i].quantifier_offset, .lo = lo,
					    .n = hi - lo + 1, .index = index };
			for (unsigned j = i; j < end; j++)
				index[desc->fields[j].id - lo] = (uint16_t)(j + 1);
			index += s->n;
		} else {
			for (unsigned j = i; j < end; j++)
				p->steps[p->n_steps++] = field_step(desc, j);
		}
		i = end;
	}
	return p;
}

/* The plan of `desc`, made on first use; NULL when none can be had (the
 * table is full, or out of memory). Lock-free: two threads racing on a new
 * descriptor both build one and the loser's is freed. */
static const struct plan *plan_of(const ProtobufCMessageDescriptor *desc)
{
	size_t slot = ((uintptr_t)desc >> 4) * 0x9e3779b97f4a7c15ULL >> 57;

	for (size_t k = 0; k < PLAN_SLOTS; k++, slot = (slot + 1) % PLAN_SLOTS) {
		struct plan *p = atomic_load_explicit(&plans[slot], memory_order_acquire), *mine;

		if (p && p->desc == desc)
			return p;
		if (p)
			continue;
		mine = plan_new(desc);
		if (!mine)
			return NULL;
		if (atomic_compare_exchange_strong_explicit(&plans[slot], &p, mine,
							    memory_order_acq_rel,
							    memory_order_acquire))
			return mine;
		free(mine);
		if (p->desc == desc)
			return p;
	}
	return NULL;
}

/* One field of `src` (desc->fields[i]): mixed and copied if the packer
 * would write it. */
static inline void walk_field(struct walk *w, const ProtobufCMessageDescriptor *desc,
			      const ProtobufCFieldDescriptor *f, const ProtobufCMessage *src,
			      ProtobufCMessage *dst)
{
	const void *member = (const char *)src + f->offset;

	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		bool hashing = w->hashing;

		w->hashing = hashing && !observation(desc, f);
		walk_repeated(w, f, src, dst);
		w->hashing = hashing;
		return;
	}
	/* the common case first: another member of a oneof */
	if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
	    *(const uint32_t *)((const char *)src + f->quantifier_offset) != f->id)
		return;
	if (!present(f, src, member))
		return;
	if (observation(desc, f)) {
		bool hashing = w->hashing;

		w->hashing = false;
		walk_value(w, f, member, dst ? (char *)dst + f->offset : NULL);
		w->hashing = hashing;
		return;
	}
	mix(w, f->id);
	if (dst && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
		*(uint32_t *)((char *)dst + f->quantifier_offset) = f->id;
	else if (dst && f->label == PROTOBUF_C_LABEL_OPTIONAL &&
		 f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
		*(protobuf_c_boolean *)((char *)dst + f->quantifier_offset) = 1;
	walk_value(w, f, member, dst ? (char *)dst + f->offset : NULL);
}

/* A proto3 string member (field `id`): mixed and copied when not empty,
 * as walk_field and walk_value do with it. */
static inline void walk_string(struct walk *w, uint32_t id, const void *member, void *dst_member)
{
	const char *str = *(const char *const *)member;
	uint8_t *copy;

	if (!str || !*str)
		return;
	mix(w, id);
	walk_bytes(w, (const uint8_t *)str, strlen(str), &copy, true);
	if (dst_member)
		*(char **)dst_member = (char *)copy;
}

/* A repeated message field (step s): what walk_repeated does with it. */
static void walk_messages(struct walk *w, const struct step *s, const ProtobufCMessage *src,
			  ProtobufCMessage *dst)
{
	size_t n = *(const size_t *)((const char *)src + s->qoff);
	const ProtobufCMessage *const *from =
		*(const ProtobufCMessage *const *const *)((const char *)src + s->offset);
	ProtobufCMessage **to;

	if (!n)
		return;
	mix(w, s->id);
	mix(w, n);
	to = take(w, n * sizeof(*to));
	for (size_t i = 0; i < n; i++) {
		ProtobufCMessage *copy = walk_msg(w, from[i]);

		if (to)
			to[i] = copy;
	}
	if (dst) {
		*(size_t *)((char *)dst + s->qoff) = n;
		*(ProtobufCMessage ***)((char *)dst + s->offset) = to;
	}
}

/* A sub-message member at `member` (field `id`): mixed and copied when
 * set, as walk_field and walk_value do with it. */
static inline void walk_sub(struct walk *w, uint32_t id, const void *member, void *dst_member)
{
	const ProtobufCMessage *m = *(const ProtobufCMessage *const *)member;
	ProtobufCMessage *copy;

	if (!m)
		return;
	mix(w, id);
	copy = walk_msg(w, m);
	if (dst_member)
		*(ProtobufCMessage **)dst_member = copy;
}

/* A proto3 scalar (step s) of `size` bytes: mixed and copied as its word
 * when present (a bool is mixed and copied as 1: the wire has 0 or 1). */
static inline void walk_word(struct walk *w, const struct step *s, const ProtobufCMessage *src,
			     ProtobufCMessage *dst, size_t size)
{
	const char *from = (const char *)src + s->offset;
	uint64_t v = size == 8 ? *(const uint64_t *)from : *(const uint32_t *)from;

	if (s->kind == STEP_BOOL) {
		if (!v)
			return;
		v = 1;
	} else if (!(v & s->mask)) {
		return;
	}
	mix(w, s->id);
	if (dst && size == 8)
		*(uint64_t *)((char *)dst + s->offset) = v;
	else if (dst)
		*(uint32_t *)((char *)dst + s->offset) = (uint32_t)v;
	mix(w, v);
}

/* The set member of a folded oneof run (step s), if any. */
static inline void walk_oneof(struct walk *w, const ProtobufCMessageDescriptor *desc,
			      const struct step *s, const ProtobufCMessage *src,
			      ProtobufCMessage *dst)
{
	uint32_t c = *(const uint32_t *)((const char *)src + s->qoff) - s->lo;
	const ProtobufCFieldDescriptor *f;
	uintptr_t m;

	if (c >= s->n || !s->index[c])
		return;
	f = &desc->fields[s->index[c] - 1];
	if (f->type != PROTOBUF_C_TYPE_MESSAGE) {
		walk_field(w, desc, f, src, dst);
		return;
	}
	/* a message: present unless NULL or its default (present() for oneofs) */
	m = (uintptr_t)*(const void *const *)((const char *)src + f->offset);
	if (!m || m == (uintptr_t)f->default_value)
		return;
	if (dst)
		*(uint32_t *)((char *)dst + s->qoff) = f->id;
	walk_sub(w, f->id, (const char *)src + f->offset, dst ? (char *)dst + f->offset : NULL);
}

/* One step of a plan: what walk_field does with its field(s). */
static inline void walk_step(struct walk *w, const ProtobufCMessageDescriptor *desc,
			     const struct step *s, const ProtobufCMessage *src,
			     ProtobufCMessage *dst)
{
	const char *member = (const char *)src + s->offset;
	char *to = dst ? (char *)dst + s->offset : NULL;

	switch (s->kind) {
	case STEP_WORD32:
		walk_word(w, s, src, dst, 4);
		break;
	case STEP_WORD64:
		walk_word(w, s, src, dst, 8);
		break;
	case STEP_BOOL:
		_Static_assert(sizeof(protobuf_c_boolean) == 4, "a bool is a 32-bit word");
		walk_word(w, s, src, dst, 4);
		break;
	case STEP_MESSAGE:
		walk_sub(w, s->id, member, to);
		break;
	case STEP_STRING:
		walk_string(w, s->id, member, to);
		break;
	case STEP_MESSAGES:
		walk_messages(w, s, src, dst);
		break;
	case STEP_ONEOF:
		walk_oneof(w, desc, s, src, dst);
		break;
	default:
		walk_field(w, desc, &desc->fields[s->field], src, dst);
		break;
	}
}

static ProtobufCMessage *walk_msg(struct walk *w, const ProtobufCMessage *src)
{
	const ProtobufCMessageDescriptor *desc = src->descriptor;
	/* each message is preceded by a pointer to its block, so any of them
	 * (a kept sub-message) finds what to free */
	void **at = take(w, sizeof(void *) + desc->sizeof_message);
	ProtobufCMessage *dst = at ? (ProtobufCMessage *)(at + 1) : NULL;
	const struct plan *p = w->planned ? plan_of(desc) : NULL;

	if (at)
		*at = w->base;

	if (dst && p)
		memcpy(dst, p->init, desc->sizeof_message); /* message_init's bytes */
	else if (dst)
		desc->message_init(dst); /* absent fields: what unpack leaves */
	mix(w, 0x6d7367); /* brackets the message, so nesting is hashed */
	if (p) {
		for (unsigned k = 0; k < p->n_steps; k++)
			walk_step(w, desc, &p->steps[k], src, dst);
	} else {
		for (unsigned i = 0; i < desc->n_fields; i++)
			walk_field(w, desc, &desc->fields[i], src, dst);
	}
	walk_unknown(w, src, dst);
	mix(w, 0x656e64);
	return dst;
}

size_t rt_msg_size(const ProtobufCMessage *m)
{
	struct walk w = { .planned = true };

	walk_msg(&w, m);
	return (w.used + 7) & ~(size_t)7;
}

ProtobufCMessage *rt_msg_copy(const ProtobufCMessage *m, void *block, size_t cap, size_t *need,
			      uint64_t *digest)
{
	struct walk w = { .base = block, .cap = cap, .hashing = true, .planned = true,
			  .h = RT_HASH_INIT };
	ProtobufCMessage *copy = walk_msg(&w, m);

	*need = (w.used + 7) & ~(size_t)7;
	*digest = rt_mix64(w.h);
	return *need <= cap ? copy : NULL;
}

uint64_t rt_msg_digest(const ProtobufCMessage *m)
{
	struct walk w = { .hashing = true, .planned = true, .h = RT_HASH_INIT };

	walk_msg(&w, m);
	return rt_mix64(w.h);
}

uint64_t rt_msg_digest_reflective(const ProtobufCMessage *m)
{
	struct walk w = { .hashing = true, .h = RT_HASH_INIT };

	walk_msg(&w, m);
	return rt_mix64(w.h);
}

/* ---------------------------------------------------------------- blocks */

#define POOL_MAX 65536u    /* recycled blocks kept at most */

struct blk {
	size_t cap;
	struct blk *next;
};

static void *blk_new(size_t size)
{
	size_t cap = size <= RT_MSG_SMALL ? RT_MSG_SMALL : size;
	struct blk *b = malloc(sizeof(*b) + cap);

	if (!b)
		return NULL;
	b->cap = cap;
	b->next = NULL;
	return b + 1;
}

ProtobufCMessage *rt_msg_dup(const ProtobufCMessage *m)
{
	size_t size = rt_msg_size(m), need;
	uint64_t digest;
	void *block = blk_new(size);

	return block ? rt_msg_copy(m, block, size, &need, &digest) : NULL;
}

void *rt_msg_block(const void *copy)
{
	return ((void *const *)copy)[-1];
}

bool rt_msg_in_block(const void *block, const void *msg)
{
	const struct blk *b = (const struct blk *)block - 1;
	uintptr_t at = (uintptr_t)msg, start = (uintptr_t)block;

	return at >= start + sizeof(void *) && at < start + b->cap;
}

void rt_msg_free(void *copy)
{
	if (copy)
		free((struct blk *)rt_msg_block(copy) - 1);
}

void *rt_msg_pool_get(struct rt_msg_pool *p, size_t size)
{
	struct blk *b = p->free_small;

	if (size > RT_MSG_SMALL || !b)
		return blk_new(size);
	p->free_small = b->next;
	p->n_free--;
	return b + 1;
}

void rt_msg_pool_put(struct rt_msg_pool *p, void *block)
{
	struct blk *b = block ? (struct blk *)block - 1 : NULL;

	if (!b)
		return;
	if (b->cap != RT_MSG_SMALL || p->n_free >= POOL_MAX) {
		free(b);
		return;
	}
	b->next = p->free_small;
	p->free_small = b;
	p->n_free++;
}

void rt_msg_pool_release(struct rt_msg_pool *p)
{
	while (p->free_small) {
		struct blk *b = p->free_small;

		p->free_small = b->next;
		free(b);
	}
	p->n_free = 0;
}
