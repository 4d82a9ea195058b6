/* msg.h — messages that never leave the process (ADR 0017).
 *
 * A message between two components of one daemon is not packed and
 * unpacked: the sender's message is copied, in one walk over its protobuf-c
 * descriptor, into one block, *exactly as decoding its packed bytes would
 * give it* (a field the packer leaves out comes back as its default: an
 * empty string as protobuf_c_empty_string, a oneof case whose message is
 * NULL as "not set", a bool as 0 or 1, bytes of length 0 as {0, NULL}).
 * The delivery digest hashes a message's content the same way (what the
 * packer would write), so a message and its packed-then-decoded form have
 * the same digest: colocation changes neither what a component sees nor
 * any digest (ADR 0005's guarantee). tests/unit/test_msg.c and the payload
 * fuzz harness check both against protobuf-c itself. */
#ifndef RT_MSG_H
#define RT_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Bytes rt_msg_copy needs for `m` (a multiple of 8). */
size_t rt_msg_size(const ProtobufCMessage *m);

/* Copies `m` into `block` (`cap` bytes, 8-aligned) as unpack(pack(m))
 * would give it and returns the copy, which lies in `block` and points
 * only into it (every message in it is preceded by a pointer to `block`). Sets *need to the bytes the copy takes and *digest to
 * rt_msg_digest(m). If `cap` is too small, returns NULL (nothing usable was
 * written): call again with a block of *need bytes. */
ProtobufCMessage *rt_msg_copy(const ProtobufCMessage *m, void *block, size_t cap, size_t *need,
			      uint64_t *digest);

/* A hash of what packing `m` would write (field by field, not the bytes):
 * equal for m and unpack(pack(m)). */
uint64_t rt_msg_digest(const ProtobufCMessage *m);
/* The same digest from a walk that reads the descriptor field by field on
 * every call (what rt_msg_digest did before plans, msg.c): the reference
 * tests hold the planned walk to. */
uint64_t rt_msg_digest_reflective(const ProtobufCMessage *m);

/* A copy of `m` in one heap block of its own (rt_msg_size + a header);
 * NULL when out of memory. Free it with rt_msg_free. */
ProtobufCMessage *rt_msg_dup(const ProtobufCMessage *m);
/* Frees the block a copy (rt_msg_dup, or from a pool block), or any
 * message inside it, lies in (NULL is fine). */
void rt_msg_free(void *copy);
/* The block a copy (or a message inside it) lies in. */
void *rt_msg_block(const void *copy);
/* Is `msg` inside the pool block `block`? */
bool rt_msg_in_block(const void *block, const void *msg);

/* Recycled blocks for in-flight local messages: a daemon sends and
 * delivers millions of small messages, and reusing their blocks spares the
 * allocator. A block from the pool may also be freed with rt_msg_free. */
#define RT_MSG_SMALL 240u /* bytes of a recycled block: most messages fit */
struct rt_msg_pool {
	void *free_small; /* list of recycled small blocks */
	size_t n_free;
};
/* A block for at least `size` bytes (at least RT_MSG_SMALL, 8-aligned);
 * NULL when out of memory. */
void *rt_msg_pool_get(struct rt_msg_pool *p, size_t size);
/* Gives a block back (kept for reuse, or freed). NULL is fine. Blocks
 * from the pool and from rt_msg_dup alike. */
void rt_msg_pool_put(struct rt_msg_pool *p, void *block);
void rt_msg_pool_release(struct rt_msg_pool *p);

#endif
