/* collective.c — the `collective` kernel: one collective of tl.h on seeded
 * inputs, to measure it (timing mode) or check it (data mode).
 *
 * Args: op=all_reduce|reduce_scatter|all_gather|broadcast n=ELEMENTS
 * dtype=f32|f16|bf16 algo=auto|ring|bidir|tree span=ranks|split|pes
 * first= count= stride= (the group; default every rank) root=0 chunk=BYTES.
 *
 * Every PE has its own buffers (span=ranks, pes), or the PEs of a rank
 * share one (span=split). Input element i of buffer owner o (the PE, or 0
 * when shared) on rank r is uniform in [-1, 1) from splitmix64 of (seed,
 * r, o, i), rounded to dtype. Data mode writes x.npy and y.npy, float32
 * [ranks, pes, elements]: each PE's input and, once every PE of its rank
 * is done, the result it sees (ranks outside the group leave zeros; a
 * row holding one block is as long as the longest block, zero-padded). The
 * statistic collective_end_ps is when the last PE's call returned: every
 * PE starts at 0, so it is the collective's time. */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "tl_io.h"

#define ALIGN4K(x) (((x) + 4095) & ~(uint64_t)4095)

enum coll_op_arg { OP_AR, OP_RS, OP_AG, OP_BC };

struct cfg {
	enum coll_op_arg op;
	struct tl_coll desc;
	uint64_t n, n_in, n_out;
	uint64_t row_in, row_out; /* x.npy / y.npy row: the longest block, or n */
	enum tl_dtype dtype;
	uint32_t members, me;
	bool member;
	uint64_t src, dst; /* this PE's buffers */
	uint32_t owner;    /* whose input this PE's src is */
};

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static float input_value(uint64_t seed, uint32_t rank, uint32_t owner, uint64_t i)
{
	uint64_t z = mix(seed ^ mix(((uint64_t)rank << 32 | owner) + 1) ^ mix(i));

	return (float)((double)(z >> 11) * 0x1.0p-52 - 1.0);
}

static int pick(struct tl *tl, const struct tl_args *args, const char *name,
		const char *const *names, int count, const char *def)
{
	const char *v = tl_arg_str(args, name, def);

	for (int i = 0; i < count; i++)
		if (!strcmp(v, names[i]))
			return i;
	tl_fail(tl, "%s=%s: expected %s", name, v, names[0]);
}

static void read_args(struct tl *tl, const struct tl_args *args, struct cfg *c)
{
	static const char *const ops[] = { "all_reduce", "reduce_scatter", "all_gather",
					   "broadcast" };
	static const char *const algos[] = { "auto", "ring", "bidir", "tree" };
	static const char *const spans[] = { "ranks", "split", "pes" };
	static const char *const dtypes[] = { "f16", "bf16", "f32" };
	uint32_t ranks = tl_num_ranks(tl), rank = tl_rank(tl), stride;
	uint64_t off, len;

	memset(c, 0, sizeof(*c));
	c->op = (enum coll_op_arg)pick(tl, args, "op", ops, 4, "all_reduce");
	c->desc.algo = (enum tl_coll_algo)pick(tl, args, "algo", algos, 4, "auto");
	c->desc.span = (enum tl_coll_span)pick(tl, args, "span", spans, 3, "ranks");
	c->dtype = (enum tl_dtype)pick(tl, args, "dtype", dtypes, 3, "f32");
	c->n = tl_arg_u64(args, "n", 65536);
	c->desc.chunk_bytes = tl_arg_u32(args, "chunk", 0, 0, 1u << 30);
	c->desc.root = tl_arg_u32(args, "root", 0, 0, 63);
	if (c->desc.span == TL_SPAN_PES) {
		c->members = tl_num_programs(tl);
		c->me = tl_program_id(tl);
		c->member = true;
	} else {
		c->desc.first = tl_arg_u32(args, "first", 0, 0, ranks - 1);
		c->desc.stride = tl_arg_u32(args, "stride", 1, 1, 64);
		stride = c->desc.stride;
		c->desc.count = tl_arg_u32(args, "count",
					   (ranks - c->desc.first + stride - 1) / stride, 1, 64);
		c->members = c->desc.count;
		c->member = rank >= c->desc.first && (rank - c->desc.first) % stride == 0 &&
			    (rank - c->desc.first) / stride < c->members;
		c->me = c->member ? (rank - c->desc.first) / stride : 0;
	}
	tl_coll_block(c->n, c->members, c->me, &off, &len);
	c->n_in = c->op == OP_AG ? len : c->n;
	/* over PEs the result is one shared buffer: all n elements */
	c->n_out = c->op == OP_RS && c->desc.span != TL_SPAN_PES ? len : c->n;
	c->row_in = c->op == OP_AG ? (c->n + c->members - 1) / c->members : c->n;
	c->row_out = c->n_out == c->n ? c->n : (c->n + c->members - 1) / c->members;
}

/* Buffers: a region per PE (span=ranks), one per rank (split), or every
 * PE's input one after the other and one shared result (pes). */
static void place(struct tl *tl, struct cfg *c)
{
	uint32_t esz = tl_dtype_size(c->dtype), pe = tl_program_id(tl);
	uint64_t in = ALIGN4K(c->n * esz), region = 2 * in;

	switch (c->desc.span) {
	case TL_SPAN_RANKS:
		c->src = pe * region;
		c->dst = c->src + in;
		c->owner = pe;
		break;
	case TL_SPAN_SPLIT:
		c->src = 0;
		c->dst = in;
		c->owner = 0;
		break;
	case TL_SPAN_PES:
		c->desc.pe_stride = in;
		c->src = 0;
		c->dst = in * tl_num_programs(tl);
		c->owner = pe;
		break;
	}
}

/* Data mode: this PE's input into HBM (as its dtype rounds it) and x.npy. */
static void write_inputs(struct tl *tl, const struct cfg *c)
{
	uint64_t src = c->desc.span == TL_SPAN_PES
			       ? c->src + (uint64_t)c->owner * c->desc.pe_stride
			       : c->src;
	uint64_t shape[3] = { tl_num_ranks(tl), tl_num_programs(tl), c->row_in };
	float *v = malloc((c->n_in ? c->n_in : 1) * sizeof(float));

	if (!v)
		tl_fail(tl, "out of memory for %llu inputs", (unsigned long long)c->n_in);
	for (uint64_t i = 0; i < c->n_in; i++)
		v[i] = input_value(tl_seed(tl), tl_rank(tl), c->owner, i);
	tl_hbm_write(tl, src, c->dtype, v, c->n_in);
	tl_hbm_read(tl, src, c->dtype, v, c->n_in); /* the values as stored */
	tl_npy_write_part(tl, "x.npy", TL_NPY_F32, shape, 3,
			  ((uint64_t)tl_rank(tl) * tl_num_programs(tl) + tl_program_id(tl)) * c->row_in,
			  c->n_in, v);
	free(v);
}

static void write_outputs(struct tl *tl, const struct cfg *c)
{
	uint64_t shape[3] = { tl_num_ranks(tl), tl_num_programs(tl), c->row_out };
	float *v = malloc((c->n_out ? c->n_out : 1) * sizeof(float));

	if (!v)
		tl_fail(tl, "out of memory for %llu outputs", (unsigned long long)c->n_out);
	tl_hbm_read(tl, c->dst, c->dtype, v, c->n_out);
	tl_npy_write_part(tl, "y.npy", TL_NPY_F32, shape, 3,
			  ((uint64_t)tl_rank(tl) * tl_num_programs(tl) + tl_program_id(tl)) *
				  c->row_out,
			  c->n_out, v);
	tl_stat_add(tl, "nonfinite_outputs", tl_nonfinite(TL_NPY_F32, v, c->n_out));
	free(v);
}

int collective(struct tl *tl, const struct tl_args *args)
{
	struct cfg c;

	read_args(tl, args, &c);
	place(tl, &c);
	if (!c.member)
		return 0;
	if (tl_mode(tl) == TL_DATA)
		write_inputs(tl, &c);
	switch (c.op) {
	case OP_AR:
		tl_all_reduce(tl, &c.desc, c.dst, c.src, c.n, c.dtype);
		break;
	case OP_RS:
		tl_reduce_scatter(tl, &c.desc, c.dst, c.src, c.n, c.dtype);
		break;
	case OP_AG:
		tl_all_gather(tl, &c.desc, c.dst, c.src, c.n, c.dtype);
		break;
	case OP_BC:
		tl_broadcast(tl, &c.desc, c.dst, c.src, c.n, c.dtype);
		break;
	}
	tl_stat_max(tl, "collective_end_ps", tl_now_ps(tl));
	tl_stat_max(tl, "collective_algo",
		    (uint64_t)tl_coll_pick(tl, &c.desc,
					   (const char *const[]){ "all_reduce", "reduce_scatter",
								  "all_gather", "broadcast" }[c.op],
					   c.n, c.dtype));
	if (tl_mode(tl) == TL_DATA) {
		if (c.desc.span != TL_SPAN_RANKS)
			tl_barrier(tl); /* the rest of the rank's result is there too */
		write_outputs(tl, &c);
	}
	return 0;
}
