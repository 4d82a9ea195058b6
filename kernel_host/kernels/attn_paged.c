/* attn_paged.c — gqa_decode_paged: batched GQA decode over a paged KV
 * cache in vLLM's layout (fp16):
 *
 *   q [B, heads_q, d]; k_cache, v_cache [num_pages, heads_kv, page, d];
 *   block_table [B, max_pages] int32 (page j of sequence b; entries past a
 *   sequence's last page are ignored); seq_lens [B] int32  ->  o [B, heads_q, d]
 *
 * from --inputs DIR (the five .npy files; their shapes set the sizes) or
 * drawn from --seed with --arg batch=B lens=L0,L1,... page=P (pages in a
 * seeded random order). A (sequence, KV head) pair is one work item: its G
 * query rows sweep the sequence's pages, each page one KV tile whose HBM
 * address comes from the block table (loaded from HBM once per program,
 * read before the first page is addressed; one DMA per page). Items are
 * spread over the programs longest first, each to the least loaded
 * program, so unequal lengths balance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"

#define ALIGN4K(x) (((x) + 4095) & ~(uint64_t)4095)
#define PAGED_MAX_BATCH 4096

struct paged {
	struct attn a;
	uint32_t batch, page, max_pages, num_pages;
	uint32_t *lens;     /* [batch] */
	int32_t *table;     /* [batch * max_pages] */
	uint64_t k_addr, v_addr, table_addr, o_addr;
	struct tl_npy in[5]; /* --inputs files, or empty */
	uint16_t *gen[3];    /* seeded q, k_cache, v_cache, or NULL */
};

static const char *const paged_files[5] = {
	"q.npy", "k_cache.npy", "v_cache.npy", "block_table.npy", "seq_lens.npy"
};

static uint32_t pages_of(const struct paged *p, uint32_t b)
{
	return (p->lens[b] + p->page - 1) / p->page;
}

/* ------------------------------------------------------------ arguments */

/* lens=L0,L1,...: strict decimal values in [1, ATTN_MAX_DIM]. */
static uint32_t parse_lens(struct tl *tl, const char *s, uint32_t *out,
			   uint32_t cap)
{
	uint32_t n = 0;
	const char *p = s;

	while (*p) {
		uint64_t v = 0;
		const char *start = p;

		while (*p >= '0' && *p <= '9' && v <= ATTN_MAX_DIM)
			v = v * 10 + (uint64_t)(*p++ - '0');
		if (p == start || v < 1 || v > ATTN_MAX_DIM || (*p && *p != ',') || n == cap)
			tl_arg_fail(tl, "--arg lens=%s: expected up to %u comma-separated decimal lengths from 1 to %u",
				s, cap, ATTN_MAX_DIM);
		out[n++] = (uint32_t)v;
		if (*p == ',' && !*++p)
			tl_arg_fail(tl, "--arg lens=%s: trailing comma", s);
	}
	return n;
}

static void *xcalloc(struct tl *tl, uint64_t n, size_t size)
{
	void *p = calloc(n ? (size_t)n : 1, size);

	if (!p)
		tl_fail(tl, "out of memory (%llu elements)", (unsigned long long)n);
	return p;
}

/* Seeded sizes and block table: the sequences' pages are a random
 * permutation of all pages; unused table entries are -1. */
static void seeded_setup(struct tl *tl, const struct tl_args *args,
			 struct paged *p)
{
	const char *lens = tl_arg_str(args, "lens", NULL);
	/* on the kernel's stack (4 MiB): a refused --arg lens ends the kernel
	 * inside parse_lens, which would leave a heap copy behind */
	uint32_t buf[PAGED_MAX_BATCH], n, *perm;
	uint64_t state = attn_mix(tl_seed(tl) ^ 0x7061676564ull), used = 0;

	n = lens ? parse_lens(tl, lens, buf, PAGED_MAX_BATCH) : 0;
	p->batch = tl_arg_u32(args, "batch", n ? n : 8, 1, PAGED_MAX_BATCH);
	if (n > 1 && n != p->batch)
		tl_arg_fail(tl, "--arg lens has %u lengths for batch=%u (give one per sequence, or one for all)",
			n, p->batch);
	p->page = tl_arg_u32(args, "page", 128, 1, 65536);
	p->lens = xcalloc(tl, p->batch, sizeof(uint32_t));
	for (uint32_t b = 0; b < p->batch; b++)
		p->lens[b] = n == 0 ? 1024 : buf[n == 1 ? 0 : b];
	for (uint32_t b = 0; b < p->batch; b++) {
		used += pages_of(p, b);
		p->max_pages = pages_of(p, b) > p->max_pages ? pages_of(p, b) : p->max_pages;
	}
	if (used > INT32_MAX)
		tl_fail(tl, "%llu pages do not fit an int32 block table", (unsigned long long)used);
	p->num_pages = (uint32_t)used;
	perm = xcalloc(tl, used, sizeof(uint32_t));
	for (uint32_t i = 0; i < used; i++)
		perm[i] = i;
	for (uint32_t i = (uint32_t)used; i > 1; i--) { /* Fisher-Yates */
		uint32_t j = (uint32_t)(attn_mix(state++) % i), t = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = t;
	}
	p->table = xcalloc(tl, (uint64_t)p->batch * p->max_pages, sizeof(int32_t));
	used = 0;
	for (uint32_t b = 0; b < p->batch; b++)
		for (uint32_t j = 0; j < p->max_pages; j++)
			p->table[(uint64_t)b * p->max_pages + j] =
				j < pages_of(p, b) ? (int32_t)perm[used++] : -1;
	free(perm);
}

static void check_npy(struct tl *tl, const char *path, const struct tl_npy *n,
		      enum tl_npy_type type, uint32_t ndim)
{
	if (n->type != type || n->ndim != ndim)
		tl_fail(tl, "input %s: expected %s with %u dims, got %s with %u dims",
			path, tl_npy_type_name(type), ndim,
			tl_npy_type_name(n->type), n->ndim);
}

/* Sizes from the files' shapes; the lengths and the used table entries
 * are checked (one line naming the file, the entry and the range). */
static void file_setup(struct tl *tl, const char *dir, struct paged *p)
{
	static const enum tl_npy_type types[5] = { TL_NPY_F16, TL_NPY_F16, TL_NPY_F16,
						   TL_NPY_I32, TL_NPY_I32 };
	static const uint32_t dims[5] = { 3, 4, 4, 2, 1 };
	const uint64_t *q = p->in[0].shape, *k = p->in[1].shape;
	char path[1200];

	for (uint32_t i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, paged_files[i]);
		tl_npy_read(tl, path, &p->in[i]);
		check_npy(tl, path, &p->in[i], types[i], dims[i]);
		if (i < 3 && tl_rank(tl) == 0 && tl_program_id(tl) == 0) /* every PE reads it */
			tl_stat_add(tl, "nonfinite_inputs",
				    tl_nonfinite(p->in[i].type, p->in[i].data, p->in[i].count),
				    "elements", "NaN or infinite elements read from --inputs");
	}
	if (k[3] != q[2] || memcmp(p->in[2].shape, k, 4 * sizeof(*k)) ||
	    p->in[3].shape[0] != q[0] || p->in[4].shape[0] != q[0] ||
	    !q[0] || !q[1] || !q[2] || !k[0] || !k[1] || !k[2] || !p->in[3].shape[1] ||
	    q[1] % k[1] || q[0] > PAGED_MAX_BATCH || k[0] > (1u << 24) ||
	    q[1] > 65536 || q[2] > 65536 || k[2] > 65536 || p->in[3].shape[1] > ATTN_MAX_DIM)
		tl_fail(tl, "inputs in %s: expected q [B, heads_q, d], k_cache and v_cache [num_pages, heads_kv, page, d], block_table [B, max_pages], seq_lens [B] (heads_q a multiple of heads_kv, B <= %u, num_pages <= 2^24); got q (%llu, %llu, %llu), k_cache (%llu, %llu, %llu, %llu), block_table (%llu, %llu), seq_lens (%llu)",
			dir, PAGED_MAX_BATCH, (unsigned long long)q[0], (unsigned long long)q[1],
			(unsigned long long)q[2], (unsigned long long)k[0], (unsigned long long)k[1],
			(unsigned long long)k[2], (unsigned long long)k[3],
			(unsigned long long)p->in[3].shape[0], (unsigned long long)p->in[3].shape[1],
			(unsigned long long)p->in[4].shape[0]);
	p->batch = (uint32_t)q[0];
	p->a.hq = (uint32_t)q[1];
	p->a.d = (uint32_t)q[2];
	p->num_pages = (uint32_t)k[0];
	p->a.hkv = (uint32_t)k[1];
	p->page = (uint32_t)k[2];
	p->max_pages = (uint32_t)p->in[3].shape[1];
	p->lens = xcalloc(tl, p->batch, sizeof(uint32_t));
	p->table = xcalloc(tl, (uint64_t)p->batch * p->max_pages, sizeof(int32_t));
	for (uint32_t b = 0; b < p->batch; b++) {
		double len = tl_npy_get(&p->in[4], b);

		if (len < 1 || len > (double)p->max_pages * p->page)
			tl_fail(tl, "input %s/seq_lens.npy: seq_lens[%u] = %.0f, expected 1 to max_pages*page = %llu",
				dir, b, len, (unsigned long long)p->max_pages * p->page);
		p->lens[b] = (uint32_t)len;
		for (uint32_t j = 0; j < p->max_pages; j++) {
			double e = tl_npy_get(&p->in[3], (uint64_t)b * p->max_pages + j);

			if (j < pages_of(p, b) && (e < 0 || e >= p->num_pages))
				tl_fail(tl, "input %s/block_table.npy: block_table[%u][%u] = %.0f, expected a page index from 0 to %u",
					dir, b, j, e, p->num_pages - 1);
			p->table[(uint64_t)b * p->max_pages + j] = (int32_t)e;
		}
	}
}

static void paged_layout(struct paged *p)
{
	uint64_t qo = (uint64_t)p->batch * p->a.hq * p->a.d * 2;
	uint64_t kv = (uint64_t)p->num_pages * p->a.hkv * p->page * p->a.d * 2;
	uint64_t tbl = ALIGN4K((uint64_t)p->batch * p->max_pages * 4);

	p->a.q_addr = 0;
	p->k_addr = ALIGN4K(qo);
	p->v_addr = ALIGN4K(p->k_addr + kv);
	p->o_addr = ALIGN4K(p->v_addr + kv);
	p->table_addr = ALIGN4K(p->o_addr + qo) + tbl * p->a.pe;
}

/* ------------------------------------------------------------ inputs */

/* Element `i` of input `which` (0 q, 1 k_cache, 2 v_cache). */
static float elem(const struct tl *tl, const struct paged *p, uint32_t which,
		  uint64_t i)
{
	if (p->in[which].data)
		return (float)tl_npy_get(&p->in[which], i);
	return attn_normal(tl_seed(tl), which, i);
}

static void put_rows(struct tl *tl, const struct paged *p, uint32_t which,
		     uint64_t first, uint64_t n, uint64_t addr)
{
	float *f = xcalloc(tl, n, sizeof(float));

	if (!p->in[which].data) /* the bytes of elem(), a row range at once */
		attn_normal_fill(tl_seed(tl), which, first, n, f);
	for (uint64_t i = 0; p->in[which].data && i < n; i++)
		f[i] = elem(tl, p, which, first + i);
	tl_hbm_write(tl, addr, TL_F16, f, (size_t)n);
	free(f);
}

/* HBM byte offset of page `page`, KV head h in a cache. */
static uint64_t page_off(const struct paged *p, uint32_t page, uint32_t h)
{
	return (((uint64_t)page * p->a.hkv + h) * p->page) * p->a.d * 2;
}

/* Data mode: the q rows and pages of item (b, h) into HBM. */
static void place_item(struct tl *tl, const struct paged *p, uint32_t b,
		       uint32_t h)
{
	uint64_t q0 = ((uint64_t)b * p->a.hq + (uint64_t)h * p->a.g) * p->a.d;
	uint64_t pg = (uint64_t)p->page * p->a.d;

	put_rows(tl, p, 0, q0, (uint64_t)p->a.g * p->a.d, p->a.q_addr + q0 * 2);
	for (uint32_t j = 0; j < pages_of(p, b); j++) {
		uint32_t page = (uint32_t)p->table[(uint64_t)b * p->max_pages + j];

		put_rows(tl, p, 1, page_off(p, page, h) / 2, pg, p->k_addr + page_off(p, page, h));
		put_rows(tl, p, 2, page_off(p, page, h) / 2, pg, p->v_addr + page_off(p, page, h));
	}
}

/* Data mode, program 0 of rank 0: the inputs as the run used them. */
static void save_inputs(struct tl *tl, const struct paged *p)
{
	uint64_t sq[3] = { p->batch, p->a.hq, p->a.d };
	uint64_t sk[4] = { p->num_pages, p->a.hkv, p->page, p->a.d };
	uint64_t st[2] = { p->batch, p->max_pages }, sl[1] = { p->batch };
	const uint64_t *shapes[3] = { sq, sk, sk };

	for (uint32_t w = 0; w < 3; w++) {
		uint64_t n = shapes[w][0] * shapes[w][1] * shapes[w][2] * (w ? sk[3] : 1);
		uint16_t *bits = xcalloc(tl, n, sizeof(uint16_t));

		for (uint64_t i = 0; i < n; i++)
			bits[i] = tl_f32_to_f16(elem(tl, p, w, i));
		tl_npy_write(tl, paged_files[w], TL_NPY_F16, shapes[w], w ? 4 : 3, bits);
		free(bits);
	}
	tl_npy_write(tl, paged_files[3], TL_NPY_I32, st, 2, p->table);
	tl_npy_write(tl, paged_files[4], TL_NPY_I32, sl, 1, p->lens);
}

/* ------------------------------------------------------------ work */

struct item {
	uint32_t b, h;
	uint64_t cost;
};

static int item_cmp(const void *x, const void *y)
{
	const struct item *a = x, *b = y;

	if (a->cost != b->cost)
		return a->cost > b->cost ? -1 : 1;
	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	return a->h < b->h ? -1 : a->h > b->h;
}

/* This program's items, longest first: every program computes the same
 * greedy assignment (each item, longest first, to the least loaded
 * program, lowest index on ties) and keeps its own. */
static uint32_t my_items(struct tl *tl, const struct paged *p,
			 struct item **out)
{
	uint32_t n = p->batch * p->a.hkv, mine = 0;
	struct item *all = xcalloc(tl, n, sizeof(*all));
	uint64_t *load = xcalloc(tl, p->a.pes, sizeof(uint64_t));

	for (uint32_t i = 0; i < n; i++) {
		all[i].b = i / p->a.hkv;
		all[i].h = i % p->a.hkv;
		all[i].cost = pages_of(p, all[i].b) + 1; /* +1: per-item overhead */
	}
	qsort(all, n, sizeof(*all), item_cmp);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t best = 0;

		for (uint32_t pe = 1; pe < p->a.pes; pe++)
			if (load[pe] < load[best])
				best = pe;
		load[best] += all[i].cost;
		if (best == p->a.pe)
			all[mine++] = all[i];
	}
	free(load);
	*out = all;
	return mine;
}

/* The page numbers of sequence b: read from the table row in TCM (data
 * mode) or taken from the host's copy (timing mode: no bytes move). */
static void row_pages(struct tl *tl, const struct paged *p, uint32_t b,
		      tl_tensor row, uint32_t *out)
{
	float *f = xcalloc(tl, p->max_pages, sizeof(float));

	if (tl_read(tl, row, f, p->max_pages))
		for (uint32_t j = 0; j < pages_of(p, b); j++)
			out[j] = (uint32_t)f[j];
	else
		for (uint32_t j = 0; j < pages_of(p, b); j++)
			out[j] = (uint32_t)p->table[(uint64_t)b * p->max_pages + j];
	free(f);
}

/* Item (b, h): its G query rows sweep the sequence's pages. */
static void run_item(struct tl *tl, const struct paged *p,
		     const struct item *it, tl_tensor row)
{
	const struct attn *a = &p->a;
	uint32_t np = pages_of(p, it->b), *pages = xcalloc(tl, np, sizeof(uint32_t));
	uint64_t *kp = xcalloc(tl, np, sizeof(uint64_t)), *vp = xcalloc(tl, np, sizeof(uint64_t));
	uint64_t qrow = (uint64_t)it->b * a->hq + (uint64_t)it->h * a->g;
	struct attn_block blk;

	row_pages(tl, p, it->b, row, pages);
	for (uint32_t j = 0; j < np; j++) {
		kp[j] = p->k_addr + page_off(p, pages[j], it->h);
		vp[j] = p->v_addr + page_off(p, pages[j], it->h);
	}
	TL_SCRATCH_SCOPE(tl) {
		struct attn_kv kv = { .k_page = kp, .v_page = vp, .kpos0 = 0,
				      .len = p->lens[it->b] };

		attn_block_open(tl, a, &blk, it->h, 0, a->g);
		attn_block_take_q(tl, a, &blk,
				  tl_load(tl, a->q_addr + qrow * a->d * 2, a->g, a->d, TL_F16));
		blk.o_hbm = p->o_addr + qrow * a->d * 2;
		attn_sweep(tl, a, &blk, &kv);
		attn_block_finish(tl, a, &blk);
	}
	free(pages);
	free(kp);
	free(vp);
}

static void paged_release(struct paged *p)
{
	for (uint32_t i = 0; i < 5; i++)
		tl_npy_release(&p->in[i]);
	free(p->lens);
	free(p->table);
}

/* The block table as f32 (exact below 2^24) in this program's copy. */
static void put_table(struct tl *tl, const struct paged *p)
{
	uint64_t n = (uint64_t)p->batch * p->max_pages;
	float *f = xcalloc(tl, n, sizeof(float));

	for (uint64_t i = 0; i < n; i++)
		f[i] = (float)p->table[i];
	tl_hbm_write(tl, p->table_addr, TL_F32, f, (size_t)n);
	free(f);
}

int gqa_decode_paged(struct tl *tl, const struct tl_args *args)
{
	struct paged p;
	struct item *items;
	tl_tensor rows[2];
	char dir[1024];
	uint32_t n;

	memset(&p, 0, sizeof(p));
	if (tl_num_ranks(tl) != 1)
		tl_fail(tl, "runs on one rank (--ranks 1)");
	p.a.depth = 2;
	p.a.group = 16;
	/* two running states per item: a page's P.V overlaps the next page's
	 * softmax (as gqa_decode_opt2's default, ADR 0025) */
	p.a.splits = 2;
	attn_init_heads(tl, args, &p.a);
	attn_knobs(tl, args, ATTN_KNOB_SWEEP | ATTN_KNOB_OPT, &p.a);
	if (!tl_inputs_dir(tl, dir, sizeof(dir)))
		tl_fail(tl, "--inputs path is too long");
	if (dir[0])
		file_setup(tl, dir, &p);
	else
		seeded_setup(tl, args, &p);
	p.a.g = p.a.hq / p.a.hkv;
	p.a.scale = 1.0 / sqrt((double)p.a.d);
	p.a.sq = 1;
	attn_tokens(tl, p.batch); /* one new token per sequence */
	p.a.tile = p.page;
	p.a.qblock = p.a.g;
	p.a.cols = TL_NONE;
	paged_layout(&p);
	n = my_items(tl, &p, &items);
	if (tl_mode(tl) == TL_DATA) {
		for (uint32_t i = 0; i < n; i++)
			place_item(tl, &p, items[i].b, items[i].h);
		if (tl_rank(tl) == 0 && p.a.pe == 0)
			save_inputs(tl, &p);
	}
	put_table(tl, &p);
	/* table rows double-buffered: item i+1's row loads during item i */
	for (int i = 0; i < 2; i++)
		rows[i] = tl_empty(tl, 1, p.max_pages, TL_F32); /* loaded into whole */
	if (n)
		tl_load_async_into(tl, rows[0], p.table_addr + (uint64_t)items[0].b * p.max_pages * 4);
	for (uint32_t i = 0; i < n; i++) {
		if (i + 1 < n)
			tl_load_async_into(tl, rows[(i + 1) % 2],
					   p.table_addr + (uint64_t)items[i + 1].b * p.max_pages * 4);
		tl_wait(tl, (tl_future){ rows[i % 2] });
		run_item(tl, &p, &items[i], rows[i % 2]);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t shape[3] = { p.batch, p.a.hq, p.a.d };
		uint64_t qrow = (uint64_t)items[i].b * p.a.hq + (uint64_t)items[i].h * p.a.g;

		attn_save_rows(tl, &p.a, "o.npy", shape, qrow, p.a.g, p.o_addr + qrow * p.a.d * 2);
	}
	free(items);
	paged_release(&p);
	return 0;
}
