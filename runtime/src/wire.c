/* wire.c — decoding, validation and encoding of frames that cross a daemon
 * boundary, and the bump arena payloads are unpacked into. */
#include "rt/wire.h"

#include <stdlib.h>
#include <string.h>

#include "rt/component.h"
#include "rt/event.h"
#include "rt/path.h"

/* ---------------------------------------------------------------- arena */

static void *arena_alloc(void *data, size_t size)
{
	struct rt_arena *a = data;
	size_t at = (a->used + 15) & ~(size_t)15;

	if (size > a->cap || at > a->cap - size)
		return NULL; /* protobuf-c turns this into a decode failure */
	a->used = at + size;
	return a->base + at;
}

static void arena_free(void *data, void *ptr)
{
	(void)data;
	(void)ptr; /* released all at once by rt_arena_reset */
}

enum rt_err rt_arena_init(struct rt_arena *a, size_t cap)
{
	a->base = malloc(cap);
	if (!a->base)
		return rt_fail(RT_ENOMEM, "cannot allocate a %zu-byte decode arena", cap);
	a->used = 0;
	a->cap = cap;
	a->alloc.alloc = arena_alloc;
	a->alloc.free = arena_free;
	a->alloc.allocator_data = a;
	return RT_EOK;
}

void rt_arena_release(struct rt_arena *a)
{
	free(a->base);
	a->base = NULL;
	a->cap = a->used = 0;
}

void rt_arena_reset(struct rt_arena *a)
{
	a->used = 0;
}

/* ---------------------------------------------------------------- sync */

static enum rt_err check_envelopes(Kb__Envelope **env, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (!env[i])
			return rt_fail(RT_EDECODE, "%s: envelope %zu is empty", what, i);
		if (env[i]->deliver_ps < env[i]->send_ps)
			return rt_fail(RT_EDECODE,
				       "%s: envelope %zu delivers at %llu ps, before it was sent (%llu ps)",
				       what, i, (unsigned long long)env[i]->deliver_ps,
				       (unsigned long long)env[i]->send_ps);
	}
	return RT_EOK;
}

/* A statistic's unit or description: printable, at most `max` bytes. */
static bool stat_text_ok(const char *text, size_t max)
{
	size_t len = 0;

	for (; text && text[len]; len++)
		if ((unsigned char)text[len] < 0x20 || (unsigned char)text[len] > 0x7e || len == max)
			return false;
	return true;
}

/* End-of-run reports reach summary.json, stats.csv and the error line:
 * names must be valid statistic names, units and descriptions short
 * printable text, the unfinished line one line of printable text. */
static enum rt_err check_bye(const Kb__Bye *bye)
{
	for (size_t i = 0; i < bye->n_reports; i++) {
		const Kb__ComponentReport *r = bye->reports[i];

		if (!r)
			return rt_fail(RT_EDECODE, "BYE: report %zu is empty", i);
		for (size_t k = 0; k < r->n_stats; k++) {
			const char *why = r->stats[k] ? rt_stat_name_check(r->stats[k]->name)
						      : "statistic missing";

			if (!why && (!stat_text_ok(r->stats[k]->unit, RT_STAT_UNIT_MAX) ||
				     !stat_text_ok(r->stats[k]->description, RT_STAT_DESC_MAX)))
				why = "a statistic's unit or description is not short printable text";
			if (why)
				return rt_fail(RT_EDECODE, "BYE: component %u: %s", r->component, why);
		}
		if (r->n_path && r->n_path != RT_PATH_CLASSES)
			return rt_fail(RT_EDECODE,
				       "BYE: component %u reports a critical path of %zu classes (expected %d)",
				       r->component, r->n_path, RT_PATH_CLASSES);
		for (const char *p = r->unfinished; p && *p; p++)
			if ((unsigned char)*p < 0x20)
				return rt_fail(RT_EDECODE,
					       "BYE: component %u: unfinished-work line has a control byte",
					       r->component);
	}
	/* an agent's shipped files: names the coordinator may look up */
	for (size_t i = 0; i < bye->n_files; i++)
		if (!bye->files[i] || rt_wire_check_part_path(bye->files[i]->path))
			return rt_fail(RT_EDECODE, "BYE: shipped file %zu: %s", i,
				       bye->files[i] ? rt_last_error() : "empty");
	return RT_EOK;
}

/* An agent's output file (FilePart): a plain name in the output folder or
 * ".parts/NAME"; never "..", another folder or a control byte. */
enum rt_err rt_wire_check_part_path(const char *path)
{
	const char *name = path && !strncmp(path, ".parts/", 7) ? path + 7 : path;
	size_t len = name ? strlen(name) : 0;

	if (!len || len > 200 || name[0] == '.' || strchr(name, '/'))
		return rt_fail(RT_EDECODE, "FilePart: path '%.60s' is not a file name in the output "
			       "folder or its .parts", path ? path : "");
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return rt_fail(RT_EDECODE, "FilePart: path has a control byte");
	return RT_EOK;
}

static enum rt_err check_sync(const Kb__Sync *m)
{
	if (m->schema_version != KB__SCHEMA__SCHEMA_VERSION)
		return rt_fail(RT_ESCHEMA, "frame has schema version %u, expected %u",
			       m->schema_version, (unsigned)KB__SCHEMA__SCHEMA_VERSION);
	switch (m->body_case) {
	case KB__SYNC__BODY_READY:
		return RT_EOK;
	case KB__SYNC__BODY_GRANT:
		if (m->grant->end_ps <= m->grant->start_ps)
			return rt_fail(RT_EDECODE, "GRANT window %llu is empty ([%llu, %llu) ps)",
				       (unsigned long long)m->grant->window,
				       (unsigned long long)m->grant->start_ps,
				       (unsigned long long)m->grant->end_ps);
		return check_envelopes(m->grant->inbound, m->grant->n_inbound, "GRANT");
	case KB__SYNC__BODY_DONE:
		return check_envelopes(m->done->outbound, m->done->n_outbound, "DONE");
	case KB__SYNC__BODY_BYE:
		return check_bye(m->bye);
	case KB__SYNC__BODY_SHUTDOWN:
	case KB__SYNC__BODY_ERROR:
	case KB__SYNC__BODY_PROGRESS:
	case KB__SYNC__BODY_HELLO:
	case KB__SYNC__BODY_ASSIGN:
	case KB__SYNC__BODY_FILE_ACK:
		return RT_EOK;
	case KB__SYNC__BODY_FILE_PART:
		return rt_wire_check_part_path(m->file_part->path);
	case KB__SYNC__BODY_MESH: /* agents check its rows (deploy/src/mesh.c) */
		return RT_EOK;
	case KB__SYNC__BODY_DATA:
		return check_envelopes(m->data->envelopes, m->data->n_envelopes, "Data");
	default:
		return rt_fail(RT_EDECODE, "frame has no body");
	}
}

enum rt_err rt_wire_decode_sync(const uint8_t *bytes, size_t len, Kb__Sync **out)
{
	Kb__Sync *m;
	enum rt_err err;

	*out = NULL;
	m = kb__sync__unpack(NULL, len, bytes);
	if (!m)
		return rt_fail(RT_EDECODE, "cannot decode a %zu-byte frame as a Sync message", len);
	err = check_sync(m);
	if (err) {
		kb__sync__free_unpacked(m, NULL);
		return err;
	}
	*out = m;
	return RT_EOK;
}

void rt_wire_free_sync(Kb__Sync *msg)
{
	if (msg)
		kb__sync__free_unpacked(msg, NULL);
}

enum rt_err rt_wire_encode_sync(Kb__Sync *msg, struct rt_buf *out)
{
	size_t len;
	enum rt_err err;

	msg->schema_version = KB__SCHEMA__SCHEMA_VERSION;
	len = kb__sync__get_packed_size(msg);
	rt_buf_reset(out);
	err = rt_buf_reserve(out, len);
	if (err)
		return err;
	out->len = kb__sync__pack(msg, (uint8_t *)out->data);
	return RT_EOK;
}

/* ---------------------------------------------------------------- payload */

enum rt_err rt_wire_check_payload(const Kb__Payload *p)
{
	if (p->n_path && p->n_path != RT_PATH_CLASSES)
		return rt_fail(RT_EDECODE, "payload carries a critical path of %zu classes (expected %d)",
			       p->n_path, RT_PATH_CLASSES);
	if (p->body_case == KB__PAYLOAD__BODY__NOT_SET)
		return rt_fail(RT_EDECODE, "payload has no body");
	return RT_EOK; /* what a body holds, its receiver checks (ops->check) */
}

enum rt_err rt_wire_decode_payload(const uint8_t *bytes, size_t len,
				   struct rt_arena *arena, Kb__Payload **out)
{
	Kb__Payload *p;

	*out = NULL;
	p = kb__payload__unpack(&arena->alloc, len, bytes);
	if (!p)
		return rt_fail(RT_EDECODE, "cannot decode a %zu-byte payload", len);
	*out = p;
	return rt_wire_check_payload(p);
}

uint32_t rt_dtype_bytes(Kb__DType dtype)
{
	switch (dtype) {
	case KB__DTYPE__DTYPE_F16:
	case KB__DTYPE__DTYPE_BF16:
		return 2;
	case KB__DTYPE__DTYPE_F32:
		return 4;
	default:
		return 0;
	}
}

const char *rt_space_name(Kb__Space space)
{
	switch (space) {
	case KB__SPACE__SPACE_HBM:
		return "HBM";
	case KB__SPACE__SPACE_TCM:
		return "TCM";
	default:
		return "space?";
	}
}

ProtobufCMessage *rt_wire_copy(const ProtobufCMessage *msg)
{
	return rt_msg_dup(msg);
}
