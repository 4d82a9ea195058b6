/* wire.h — decoding and encoding of everything that crosses a daemon
 * boundary. These are the decoders of outside bytes: they never assert, and
 * malformed input (garbage, truncation, a wrong schema version, a frame that
 * breaks the protocol's shape) returns RT_EDECODE / RT_ESCHEMA with one line
 * saying what is wrong. Fuzzed by tests/fuzz/fuzz_sync.c and fuzz_payload.c. */
#ifndef RT_WIRE_H
#define RT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench.pb-c.h"
#include "rt/buf.h"
#include "rt/err.h"
#include "rt/msg.h"

/* Decodes a lockstep frame and checks its schema version and shape.
 * Caller owns *out: free with rt_wire_free_sync. */
enum rt_err rt_wire_decode_sync(const uint8_t *bytes, size_t len,
				Kb__Sync **out);
void rt_wire_free_sync(Kb__Sync *msg);
/* RT_EDECODE unless `path` is a plain file name or ".parts/NAME" (an
 * agent's output file, FilePart). */
enum rt_err rt_wire_check_part_path(const char *path);
/* Packs `msg` (schema version filled in) into `out` (reset first). */
enum rt_err rt_wire_encode_sync(Kb__Sync *msg, struct rt_buf *out);

/* A bump arena that protobuf-c unpacks into, so decoding a payload costs no
 * malloc on the hot path. Reset between messages. */
struct rt_arena {
	uint8_t *base;
	size_t used;
	size_t cap;
	ProtobufCAllocator alloc; /* points back at this arena */
};
enum rt_err rt_arena_init(struct rt_arena *a, size_t cap);
void rt_arena_release(struct rt_arena *a);
void rt_arena_reset(struct rt_arena *a);

/* Decodes a component payload into `arena` (valid until the arena is reset)
 * and checks its frame (rt_wire_check_payload). */
enum rt_err rt_wire_decode_payload(const uint8_t *bytes, size_t len,
				   struct rt_arena *arena, Kb__Payload **out);

/* Checks a decoded (or in-process) payload's frame: a body is set and a
 * critical path, if any, has every class. What the body holds is for its
 * receiver to check (rt_component_ops.check). */
enum rt_err rt_wire_check_payload(const Kb__Payload *p);

/* A deep copy of any message in one block, owned by the caller (free it
 * with rt_msg_free); NULL when out of memory. No protobuf round trip: a
 * walk over the descriptor (rt_msg_dup). Components use it to keep a
 * message they were only lent. */
ProtobufCMessage *rt_wire_copy(const ProtobufCMessage *msg);

/* Bytes per element of a wire dtype (0 for an unknown one). */
uint32_t rt_dtype_bytes(Kb__DType dtype);
/* "HBM" / "TCM" for error lines. */
const char *rt_space_name(Kb__Space space);

#endif
