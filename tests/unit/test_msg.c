/* test_msg.c — in-process messages (rt/msg.h) against protobuf-c itself:
 * the copy a component of the same daemon receives must equal, field by
 * field, what unpack(pack(m)) gives a component in another daemon, and the
 * digest must be the same for both. The comparison below walks both
 * messages on its own (every field, absent ones too), independent of
 * msg.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt/msg.h"
#include "rt/rand.h"
#include "rt/wire.h"

static size_t elt_bytes(ProtobufCType type)
{
	switch (type) {
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static bool same_msg(const ProtobufCMessage *a, const ProtobufCMessage *b);

static bool same_value(ProtobufCType type, const void *a, const void *b)
{
	switch (type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *x = *(const char *const *)a, *y = *(const char *const *)b;

		return x && y && !strcmp(x, y); /* decoded strings are never NULL */
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *x = a, *y = b;

		return x->len == y->len && (x->data == NULL) == (y->data == NULL) &&
		       (!x->len || !memcmp(x->data, y->data, x->len));
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *x = *(const ProtobufCMessage *const *)a;
		const ProtobufCMessage *y = *(const ProtobufCMessage *const *)b;

		return x == y || (x && y && same_msg(x, y));
	}
	default:
		return !memcmp(a, b, elt_bytes(type));
	}
}

static bool same_msg(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
	const ProtobufCMessageDescriptor *d = a->descriptor;

	if (a->descriptor != b->descriptor || a->n_unknown_fields != b->n_unknown_fields)
		return false;
	for (size_t i = 0; i < a->n_unknown_fields; i++) {
		const ProtobufCMessageUnknownField *x = &a->unknown_fields[i], *y = &b->unknown_fields[i];

		if (x->tag != y->tag || x->wire_type != y->wire_type || x->len != y->len ||
		    memcmp(x->data, y->data, x->len))
			return false;
	}
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *x = (const char *)a + f->offset, *y = (const char *)b + f->offset;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)a + f->quantifier_offset);

			if (n != *(const size_t *)((const char *)b + f->quantifier_offset))
				return false;
			for (size_t k = 0; k < n; k++)
				if (!same_value(f->type, *(const char *const *)x + k * elt_bytes(f->type),
						*(const char *const *)y + k * elt_bytes(f->type)))
					return false;
			continue;
		}
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			uint32_t ca = *(const uint32_t *)((const char *)a + f->quantifier_offset);

			if (ca != *(const uint32_t *)((const char *)b + f->quantifier_offset))
				return false;
			if (ca != f->id)
				continue; /* another member: this union slot is not it */
		}
		if (!same_value(f->type, x, y))
			return false;
	}
	return true;
}

/* Checks m against protobuf-c: copy == unpack(pack(m)) field by field,
 * digests equal, and the copy packs to the same bytes as m. */
static void check_round_trip(const Kb__Payload *m)
{
	size_t len = kb__payload__get_packed_size(m), need = 0;
	uint8_t *bytes = malloc(len + 1), *again;
	Kb__Payload *dec, *copy;
	uint64_t digest = 0;
	void *block;

	kb__payload__pack(m, bytes);
	dec = kb__payload__unpack(NULL, len, bytes);
	cr_assert_not_null(dec);
	cr_assert_null(rt_msg_copy(&m->base, NULL, 0, &need, &digest), "a 0-byte block must not fit");
	cr_assert_eq(need, rt_msg_size(&m->base));
	block = malloc(need);
	copy = (Kb__Payload *)rt_msg_copy(&m->base, block, need, &need, &digest);
	cr_assert_eq(rt_msg_block(copy), block);
	cr_expect(same_msg(&copy->base, &dec->base), "in-process copy differs from unpack(pack(m))");
	cr_expect_eq(digest, rt_msg_digest(&dec->base), "digest of the copy differs from the decoded one");
	cr_expect_eq(digest, rt_msg_digest(&m->base));
	cr_assert_eq(kb__payload__get_packed_size(copy), len);
	again = malloc(len + 1);
	kb__payload__pack(copy, again);
	cr_expect(!memcmp(again, bytes, len), "the copy packs to other bytes");
	free(again);
	free(block);
	kb__payload__free_unpacked(dec, NULL);
	free(bytes);
}

Test(msg, traffic_copy_equals_the_decoded_message, .timeout = 10)
{
	Kb__Payload p = KB__PAYLOAD__INIT;
	Kb__Traffic t = KB__TRAFFIC__INIT;

	p.body_case = KB__PAYLOAD__BODY_TRAFFIC;
	p.traffic = &t;
	check_round_trip(&p); /* all zero: an empty sub-message, not NULL */
	t.origin = 7;
	t.hops_left = 0xffffffffu;
	t.value = 0x8000000000000001ull;
	check_round_trip(&p);
}

/* The awkward cases of the packer: a oneof case whose message is NULL, a
 * string that is NULL or "", a bool that is 2, -0.0 in a oneof double,
 * negative int64, empty and non-empty bytes, repeated scalars and
 * messages, nested optional messages, unknown fields. */
Test(msg, edge_cases_copy_as_protobuf_c_decodes_them, .timeout = 10)
{
	Kb__Payload p = KB__PAYLOAD__INIT;
	Kb__Command cmd = KB__COMMAND__INIT;
	Kb__CompositeCmd comp = KB__COMPOSITE_CMD__INIT;
	Kb__OpSpec op = KB__OP_SPEC__INIT, op2 = KB__OP_SPEC__INIT, *ops[2] = { &op, &op2 };
	Kb__Operand a = KB__OPERAND__INIT, b = KB__OPERAND__INIT, *operands[2] = { &a, &b };
	Kb__TensorRef ta = KB__TENSOR_REF__INIT, out = KB__TENSOR_REF__INIT, *rw[1] = { &ta };
	Kb__Extra e1 = KB__EXTRA__INIT, e2 = KB__EXTRA__INIT, e3 = KB__EXTRA__INIT;
	Kb__Extra *extras[3] = { &e1, &e2, &e3 };
	uint32_t shape[3] = { 4, 1, 300 };
	uint8_t unknown_bytes[3] = { 0x96, 0x01, 0 };
	ProtobufCMessageUnknownField unknown = { (99u), PROTOBUF_C_WIRE_TYPE_VARINT, 2,
						 unknown_bytes };

	p.body_case = KB__PAYLOAD__BODY_COMMAND;
	p.command = &cmd;
	cmd.body_case = KB__COMMAND__BODY_COMPOSITE;
	cmd.composite = &comp;
	comp.id = 12;
	comp.n_ops = 2;
	comp.ops = ops;
	comp.n_rw_handles = 1;
	comp.rw_handles = rw;
	op.kind = (char *)"gemm";
	op.scope = KB__SCOPE__SCOPE_K_TILE;
	op.n_operands = 2;
	op.operands = operands;
	op.n_extras = 3;
	op.extras = extras;
	op.out = &out;
	op2.kind = NULL; /* a NULL string decodes as "" */
	a.name = (char *)"a";
	a.tensor = &ta;
	b.name = (char *)""; /* b.tensor stays NULL */
	ta.space = KB__SPACE__SPACE_TCM;
	ta.addr = 0x1234;
	ta.n_shape = 3;
	ta.shape = shape;
	ta.dtype = KB__DTYPE__DTYPE_F32;
	ta.pinned = 2; /* any non-zero bool decodes as 1 */
	ta.base.n_unknown_fields = 1;
	ta.base.unknown_fields = &unknown;
	e1.name = (char *)"scale";
	e1.value_case = KB__EXTRA__VALUE_F;
	e1.f = -0.0; /* set in a oneof: kept, sign and all */
	e2.name = (char *)"m";
	e2.value_case = KB__EXTRA__VALUE_I;
	e2.i = -5;
	e3.value_case = KB__EXTRA__VALUE_F;
	e3.f = NAN;
	check_round_trip(&p);

	/* a oneof case naming a NULL message is not packed: "not set" */
	cmd.composite = NULL;
	check_round_trip(&p);
}

Test(msg, stage_and_bytes_copy_as_protobuf_c_decodes_them, .timeout = 10)
{
	Kb__Payload p = KB__PAYLOAD__INIT;
	Kb__Stage s = KB__STAGE__INIT;
	Kb__View v1 = KB__VIEW__INIT, v2 = KB__VIEW__INIT, *in[2] = { &v1, &v2 };
	Kb__IpcqData q = KB__IPCQ_DATA__INIT;
	uint8_t data[1000];

	p.body_case = KB__PAYLOAD__BODY_STAGE;
	p.stage = &s;
	s.command = 3;
	s.index = 9;
	s.engine = KB__ENGINE__ENGINE_MATH;
	s.op_kind = (char *)"math";
	s.op_name = (char *)"rmax";
	s.n_in = 2;
	s.in = in;
	s.out = &v1;
	s.last = 1;
	v1.rows = 16;
	v1.cols = 64;
	v1.row_stride = 128;
	v1.trans = 5;
	check_round_trip(&p);

	p.body_case = KB__PAYLOAD__BODY_IPCQ;
	p.ipcq = &q;
	q.dir = 1;
	check_round_trip(&p); /* bytes of length 0: {0, NULL} */
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	q.data.len = sizeof(data);
	q.data.data = data;
	q.nbytes = sizeof(data);
	check_round_trip(&p); /* bigger than a small block */
}

/* The digest sees every field: changing any one changes it. */
Test(msg, digest_changes_with_any_field, .timeout = 10)
{
	Kb__Payload p = KB__PAYLOAD__INIT;
	Kb__HbmRequest r = KB__HBM_REQUEST__INIT;
	uint64_t *fields[] = { &r.id, &r.addr, &r.bytes, &r.issue_ps, &r.wire_end_ps };
	uint64_t base;

	p.body_case = KB__PAYLOAD__BODY_HBM_REQUEST;
	p.hbm_request = &r;
	r.id = 1;
	r.addr = 2;
	r.bytes = 3;
	r.issue_ps = 4;
	r.wire_end_ps = 5;
	base = rt_msg_digest(&p.base);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		*fields[i] += 1;
		cr_expect_neq(rt_msg_digest(&p.base), base, "field %zu is not hashed", i);
		*fields[i] -= 1;
	}
	r.channel = 1;
	cr_expect_neq(rt_msg_digest(&p.base), base);
	r.channel = 0;
	/* restored, it is the same digest again */
	cr_expect_eq(rt_msg_digest(&p.base), base);
}

/* rt_wire_copy keeps a lent message in one block, freed by rt_msg_free;
 * the pool recycles small blocks and frees big ones. */
Test(msg, dup_and_pool, .timeout = 10)
{
	Kb__Stage s = KB__STAGE__INIT, *copy;
	Kb__View v = KB__VIEW__INIT, *in[1] = { &v };
	struct rt_msg_pool pool = { 0 };
	void *small, *big, *again;

	s.op_name = (char *)"copy";
	s.n_in = 1;
	s.in = in;
	v.rows = 3;
	copy = (Kb__Stage *)rt_wire_copy(&s.base);
	cr_assert_not_null(copy);
	cr_expect_str_eq(copy->op_name, "copy");
	cr_expect_str_eq(copy->op_kind, "");
	cr_assert_eq(copy->n_in, 1);
	cr_expect_neq(copy->in[0], &v, "a deep copy shares nothing with its source");
	cr_expect_eq(copy->in[0]->rows, 3);
	/* every message of the copy knows its block: a kept sub-message frees it */
	cr_expect_eq(rt_msg_block(copy->in[0]), rt_msg_block(copy));
	rt_msg_free(copy->in[0]);

	small = rt_msg_pool_get(&pool, 16);
	big = rt_msg_pool_get(&pool, 100000);
	cr_assert(small && big);
	memset(big, 1, 100000);
	rt_msg_pool_put(&pool, small);
	rt_msg_pool_put(&pool, big);
	cr_expect_eq(pool.n_free, 1, "only small blocks are kept");
	again = rt_msg_pool_get(&pool, RT_MSG_SMALL);
	cr_expect_eq(again, small, "a small block is reused");
	rt_msg_pool_put(&pool, again);
	rt_msg_pool_release(&pool);
}

/* ------------------------------------------- random messages, every type */

/* Every message type of kernbench.proto: the planned walk (msg.c's plans)
 * is held to the reflective one on random messages of each. */
static const ProtobufCMessageDescriptor *const every_type[] = {
	&kb__envelope__descriptor,
	&kb__ready__descriptor,
	&kb__progress__descriptor,
	&kb__grant__descriptor,
	&kb__done__descriptor,
	&kb__shutdown__descriptor,
	&kb__stat__descriptor,
	&kb__component_report__descriptor,
	&kb__bye__descriptor,
	&kb__error__descriptor,
	&kb__hello__descriptor,
	&kb__assign__descriptor,
	&kb__file_part__descriptor,
	&kb__sync__descriptor,
	&kb__tensor_ref__descriptor,
	&kb__operand__descriptor,
	&kb__extra__descriptor,
	&kb__op_spec__descriptor,
	&kb__composite_cmd__descriptor,
	&kb__dma_cmd__descriptor,
	&kb__copy_cmd__descriptor,
	&kb__command__descriptor,
	&kb__command_done__descriptor,
	&kb__view__descriptor,
	&kb__stage__descriptor,
	&kb__stage_done__descriptor,
	&kb__ipcq_data__descriptor,
	&kb__hbm_request__descriptor,
	&kb__hbm_done__descriptor,
	&kb__traffic__descriptor,
	&kb__payload__descriptor,
};

/* A bump arena for one random message (reset per message). */
static uint8_t arena[1 << 16];
static size_t arena_used;

static void *arena_take(size_t size)
{
	size_t at = (arena_used + 15) & ~(size_t)15;

	cr_assert_leq(at + size, sizeof(arena), "random message too big for the arena");
	arena_used = at + size;
	memset(arena + at, 0, size);
	return arena + at;
}

static uint64_t rnd(uint64_t *s)
{
	return rt_splitmix64(s);
}

static ProtobufCMessage *random_msg(const ProtobufCMessageDescriptor *d, uint64_t *s, int depth);

/* A random value of f's type at `at`: zero (left out) a third of the
 * time, the edge values the packer normalises among the rest. */
static void random_value(const ProtobufCFieldDescriptor *f, void *at, uint64_t *s, int depth,
			 bool in_array)
{
	uint64_t r = rnd(s), v = rnd(s);

	if (!in_array && r % 3 == 0 && f->type != PROTOBUF_C_TYPE_MESSAGE &&
	    f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_BYTES)
		return; /* zero */
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		size_t n = r % 6;
		char *str = arena_take(n + 1);

		for (size_t i = 0; i < n; i++)
			str[i] = (char)('a' + (v >> (i * 5)) % 26);
		*(char **)at = str;
		return;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		size_t n = r % 5;
		ProtobufCBinaryData *b = at;

		b->len = n;
		b->data = n ? arena_take(n) : NULL;
		for (size_t i = 0; i < n; i++)
			b->data[i] = (uint8_t)(v >> (i * 8));
		return;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		*(ProtobufCMessage **)at = depth < 3 && (in_array || r % 4)
						   ? random_msg(f->descriptor, s, depth + 1)
						   : NULL;
		return;
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)at = (protobuf_c_boolean)(1 + v % 3); /* 2, 3: not 0/1 */
		return;
	case PROTOBUF_C_TYPE_FLOAT:
		*(float *)at = v % 5 == 0 ? -0.0f : (float)(int32_t)v / 7.0f;
		return;
	case PROTOBUF_C_TYPE_DOUBLE:
		*(double *)at = v % 5 == 0 ? -0.0 : (double)(int64_t)v / 3.0;
		return;
	case PROTOBUF_C_TYPE_ENUM:
		*(uint32_t *)at = (uint32_t)(v % 4);
		return;
	default:
		if (elt_bytes(f->type) == 8)
			*(uint64_t *)at = v >> (r % 64); /* small and large */
		else
			*(uint32_t *)at = (uint32_t)(v >> (r % 32));
		return;
	}
}

static ProtobufCMessage *random_msg(const ProtobufCMessageDescriptor *d, uint64_t *s, int depth)
{
	ProtobufCMessage *m = arena_take(d->sizeof_message);

	d->message_init(m);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char *member = (char *)m + f->offset;
		uint64_t r = rnd(s);

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = r % 3 ? 0 : 1 + r / 3 % 4, size = elt_bytes(f->type);
			uint8_t *items = n ? arena_take(n * size) : NULL;

			for (size_t k = 0; k < n; k++)
				random_value(f, items + k * size, s, depth, true);
			*(size_t *)((char *)m + f->quantifier_offset) = n;
			*(uint8_t **)member = items;
			continue;
		}
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (r % 3)
				continue; /* another member, or none */
			*(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
			memset(member, 0, elt_bytes(f->type));
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_MESSAGE &&
			   f->type != PROTOBUF_C_TYPE_STRING) {
			*(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = r % 2;
		}
		random_value(f, member, s, depth, false);
	}
	return m;
}

Test(msg, planned_walk_equals_the_reflective_one_on_random_messages, .timeout = 60)
{
	uint64_t s = 0x5eed;
	size_t checked = 0;

	for (size_t t = 0; t < sizeof(every_type) / sizeof(every_type[0]); t++) {
		for (int i = 0; i < 400; i++) {
			const ProtobufCMessageDescriptor *d = every_type[t];
			ProtobufCMessage *m, *dec, *copy;
			size_t len, need = 0;
			uint64_t digest = 0, ref;
			uint8_t *bytes;
			void *block;

			arena_used = 0;
			m = random_msg(d, &s, 0);
			ref = rt_msg_digest_reflective(m);
			cr_assert_eq(rt_msg_digest(m), ref, "%s #%d: planned digest differs", d->name, i);
			len = protobuf_c_message_get_packed_size(m);
			bytes = malloc(len + 1);
			protobuf_c_message_pack(m, bytes);
			dec = protobuf_c_message_unpack(d, NULL, len, bytes);
			cr_assert_not_null(dec, "%s #%d: protobuf-c cannot decode it", d->name, i);
			cr_assert_eq(rt_msg_digest_reflective(dec), ref, "%s #%d: decoded digest differs",
				     d->name, i);
			need = rt_msg_size(m);
			block = malloc(need);
			copy = rt_msg_copy(m, block, need, &need, &digest);
			cr_assert_not_null(copy);
			cr_assert_eq(digest, ref, "%s #%d: copy's digest differs", d->name, i);
			cr_assert(same_msg(copy, dec), "%s #%d: copy differs from unpack(pack(m))",
				  d->name, i);
			cr_assert_eq(rt_msg_digest_reflective(copy), ref);
			free(block);
			protobuf_c_message_free_unpacked(dec, NULL);
			free(bytes);
			checked++;
		}
	}
	cr_expect_eq(checked, 400 * sizeof(every_type) / sizeof(every_type[0]));
}
