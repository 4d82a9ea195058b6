/* coll_pes.c — collectives over the PEs of one rank (TL_SPAN_PES), through
 * the rank's shared HBM: no link is crossed, so the work is shared out and
 * ordered by barriers (tl_barrier). PE q's input is at src + q * pe_stride;
 * the result is one buffer at dst that every PE of the rank sees.
 *
 *   all-reduce      barrier; PE p sums block p of every PE's input into
 *                   block p of dst (P loads, P - 1 adds per chunk); barrier
 *   reduce-scatter  the same without the final barrier (block p is PE p's)
 *   all-gather      PE p copies its input to block p of dst; barrier
 *   broadcast       PE p copies part p of the root's input to dst; barrier
 *
 * The algorithms of the other spans do not apply: nothing travels between
 * PEs but the barrier's notifications, and every PE moves 1/P of the bytes
 * whatever the algorithm, so algo is ignored. */
#include "coll.h"

#define PES_CHUNK_BYTES 65536u

/* Copies `n` elements from HBM `from` to `to`, chunk by chunk. */
static void copy(struct tl *tl, struct tl_site at, uint64_t from, uint64_t to, uint64_t n,
		 enum tl_dtype dtype, uint64_t chunk)
{
	uint32_t esz = tl_dtype_size(dtype);

	for (uint64_t o = 0; o < n; o += chunk)
		TL_SCRATCH_SCOPE(tl) {
			uint64_t k = n - o < chunk ? n - o : chunk;

			uint32_t rows, cols;

			coll_shape(tl->s.cfg, k, &rows, &cols);
			tl_store_at(tl, at, to + o * esz,
				    tl_load_at(tl, at, from + o * esz, rows, cols, dtype));
		}
}

/* Sums block [e, e + n) of every PE's input into dst. */
static void reduce_block(struct tl *tl, struct tl_site at, uint64_t dst, uint64_t src,
			 uint64_t stride, uint64_t e, uint64_t n, enum tl_dtype dtype,
			 uint64_t chunk)
{
	uint32_t esz = tl_dtype_size(dtype), P = tl->s.pes;

	for (uint64_t o = 0; o < n; o += chunk)
		TL_SCRATCH_SCOPE(tl) {
			uint64_t k = n - o < chunk ? n - o : chunk, at_e = (e + o) * esz;
			tl_tensor in[COLL_MAX], acc;
			uint32_t rows, cols;

			coll_shape(tl->s.cfg, k, &rows, &cols);
			for (uint32_t q = 0; q < P; q++) /* every load in flight at once */
				in[q] = tl_load_at(tl, at, src + q * stride + at_e, rows, cols,
						   dtype);
			acc = P > 1 ? tl_binary_at(tl, at, "add", in[0], in[1]) : in[0];
			for (uint32_t q = 2; q < P; q++)
				acc = tl_binary_at(tl, at, "add", acc, in[q]);
			if (tl_rec_get(tl, at, acc, "sum")->dtype != dtype)
				acc = tl_astype_at(tl, at, acc, dtype);
			tl_store_at(tl, at, dst + at_e, acc);
		}
}

void coll_pes_run(struct tl *tl, struct tl_site at, enum coll_op op,
		  const struct tl_coll *d, uint64_t dst, uint64_t src, uint64_t n,
		  enum tl_dtype dtype)
{
	uint32_t P = tl->s.pes, p = tl->s.pe, esz = tl_dtype_size(dtype);
	uint64_t stride = d->pe_stride ? d->pe_stride : n * esz, off, len, hbm = tl->s.cfg->hbm_bytes;
	uint64_t chunk = (d->chunk_bytes ? d->chunk_bytes : PES_CHUNK_BYTES) / 4;
	uint64_t start = tl->clock_ps;

	if ((unsigned)dtype > TL_F32 || (op == COLL_BROADCAST && d->root >= P) || !chunk)
		tl_abort(tl, at, RT_EKERNEL,
			 "collective over the %u PEs of a rank: bad dtype %d, root %u or chunk %u",
			 P, (int)dtype, d->root, d->chunk_bytes);
	if (P > COLL_MAX || n > hbm / esz || dst > hbm - n * esz ||
	    (P - 1) * stride > hbm || src > hbm - (P - 1) * stride - n * esz)
		tl_abort(tl, at, RT_EOOB,
			 "collective over the %u PEs of a rank: %llu elements at src %llu (every %llu "
			 "bytes) or dst %llu do not fit in HBM of %llu bytes",
			 P, (unsigned long long)n, (unsigned long long)src,
			 (unsigned long long)stride, (unsigned long long)dst, (unsigned long long)hbm);
	tl_coll_block(n, P, p, &off, &len);
	switch (op) {
	case COLL_ALL_REDUCE:
	case COLL_REDUCE_SCATTER:
		tl_barrier_at(tl, at); /* every PE's input is in HBM */
		reduce_block(tl, at, dst, src, stride, off, len, dtype, chunk);
		if (op == COLL_ALL_REDUCE)
			tl_barrier_at(tl, at);
		break;
	case COLL_ALL_GATHER:
		copy(tl, at, src + p * stride, dst + off * esz, len, dtype, chunk);
		tl_barrier_at(tl, at);
		break;
	case COLL_BROADCAST:
		tl_barrier_at(tl, at); /* the root's input is in HBM */
		copy(tl, at, src + d->root * stride + off * esz, dst + off * esz, len, dtype, chunk);
		tl_barrier_at(tl, at);
		break;
	}
	tl_wait_all(tl, at);
	tl_stat(tl, TL_ST_COLLECTIVE_PS, tl->clock_ps - start);
	tl_stat(tl, TL_ST_COLLECTIVES, 1);
}
