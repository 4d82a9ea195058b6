/* attn_common.c — arguments, HBM layout, inputs (seeded or --inputs) and
 * the o.npy writer shared by the attention kernels (see attn.h). */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn.h"
#include "rt/half.h"
#include "rt/npy.h"

#define ALIGN4K(x) (((x) + 4095) & ~(uint64_t)4095)

/* ------------------------------------------------------------ arguments */

/* Rows per query block when not given: decode takes the whole group;
 * otherwise up to `tile` rows that divide the span a block may cover. */
static uint32_t default_qblock(uint32_t tile, uint32_t g, uint32_t sq,
			       uint32_t span, bool decode)
{
	uint32_t b, k;

	if (decode)
		return g * sq;
	if (span >= tile || span != sq) {
		for (b = span < tile ? span : tile; b > 1; b--)
			if (span % b == 0)
				return b;
		return 1;
	}
	for (k = g; k > 1; k--) /* short queries: whole heads per block */
		if (g % k == 0 && k * sq <= tile)
			return k * sq;
	return sq;
}

static void check_shape(struct tl *tl, const struct attn *a)
{
	if (!a->hq || !a->hkv || !a->d || !a->sq || !a->skv || !a->tile)
		tl_fail(tl, "heads_q, heads_kv, head_dim, seq_q, seq_kv and tile must be positive");
	if (a->hq % a->hkv)
		tl_fail(tl, "heads_q=%u is not a multiple of heads_kv=%u", a->hq, a->hkv);
	if (a->skv % a->tile)
		tl_fail(tl, "seq_kv=%u is not a multiple of tile=%u", a->skv, a->tile);
	if (a->causal && a->sq > (uint64_t)a->ranks * a->skv)
		tl_fail(tl, "causal: seq_q=%u exceeds ranks*seq_kv=%llu", a->sq,
			(unsigned long long)a->ranks * a->skv);
	if (a->depth == 0 || a->group == 0 || a->group > ATTN_MAX_GROUP)
		tl_fail(tl, "depth must be at least 1 and group 1 to %d", ATTN_MAX_GROUP);
}

/* A block covers rows of one head (qblock divides seq_q) or whole heads
 * (seq_q divides qblock, qblock divides the group). */
static void check_qblock(struct tl *tl, const struct attn *a, uint32_t span)
{
	uint32_t b = a->qblock;
	bool in_head = b && span % b == 0;
	bool heads = b && b % a->sq == 0 && (a->g * a->sq) % b == 0 &&
		     span == a->sq;

	if (!in_head && !heads)
		tl_fail(tl, "qblock=%u must divide the %u query rows of a head (or be a multiple of seq_q=%u dividing the group of %u rows)",
			b, span, a->sq, a->g * a->sq);
}

static void layout(struct tl *tl, struct attn *a)
{
	uint64_t qo = (uint64_t)a->hq * a->sq * a->d * 2;
	uint64_t kv = (uint64_t)a->hkv * a->skv * a->d * 2;
	uint64_t mask = (uint64_t)a->qblock * a->tile * 4;

	a->q_addr = 0;
	a->k_addr = ALIGN4K(a->q_addr + qo);
	a->v_addr = ALIGN4K(a->k_addr + kv);
	a->o_addr = ALIGN4K(a->v_addr + kv);
	a->mask_addr = ALIGN4K(a->o_addr + qo) + ALIGN4K(mask) * a->pe;
	(void)tl;
}

void attn_init(struct tl *tl, const struct tl_args *args, bool decode,
	       struct attn *a)
{
	const char *pass = tl_arg_str(args, "pass", "kv");
	uint32_t span;

	memset(a, 0, sizeof(*a));
	a->ranks = tl_num_ranks(tl);
	a->rank = tl_rank(tl);
	a->pes = tl_num_programs(tl);
	a->pe = tl_program_id(tl);
	a->pass_q = strcmp(pass, "q") == 0;
	if (!a->pass_q && strcmp(pass, "kv") != 0)
		tl_fail(tl, "pass=%s: expected kv or q", pass);
	a->hq = (uint32_t)tl_arg_u64(args, "heads_q", 64);
	a->hkv = (uint32_t)tl_arg_u64(args, "heads_kv", 8);
	a->d = (uint32_t)tl_arg_u64(args, "head_dim", 128);
	a->skv = (uint32_t)tl_arg_u64(args, "seq_kv", 1024);
	a->sq = (uint32_t)tl_arg_u64(args, "seq_q",
				     decode || a->pass_q ? 1 : (uint64_t)a->ranks * a->skv);
	a->tile = (uint32_t)tl_arg_u64(args, "tile", 128);
	a->causal = tl_arg_u64(args, "causal", 1) != 0;
	a->scopes = tl_arg_u64(args, "scopes", 1) != 0;
	a->depth = (uint32_t)tl_arg_u64(args, "depth", decode ? 2 : 1);
	a->group = (uint32_t)tl_arg_u64(args, "group", decode ? 16 : 1);
	a->opt = tl_arg_u64(args, "opt", 2) == 3 ? ATTN_OPT3 : ATTN_OPT2;
	a->qwindow = (uint32_t)tl_arg_u64(args, "qwindow", 0); /* 0: fit ~512 rows */
	check_shape(tl, a);
	a->g = a->hq / a->hkv;
	/* pass-KV splits the queries of each head into one chunk per rank */
	span = a->sq;
	if (a->ranks > 1 && !a->pass_q) {
		if (a->sq % a->ranks)
			tl_fail(tl, "pass=kv: seq_q=%u is not a multiple of ranks=%u (use pass=q for decode)",
				a->sq, a->ranks);
		span = a->sq / a->ranks;
	}
	a->qblock = (uint32_t)tl_arg_u64(args, "qblock",
					 default_qblock(a->tile, a->g, a->sq, span, decode));
	check_qblock(tl, a, span);
	a->scale = 1.0 / sqrt((double)a->d);
	a->p0 = (uint64_t)a->ranks * a->skv - (a->causal ? a->sq : 0);
	layout(tl, a);
}

uint64_t attn_kv_addr(const struct attn *a, uint64_t base, uint32_t head,
		      uint64_t row)
{
	return base + (((uint64_t)head * a->skv + row) * a->d) * 2;
}

/* ------------------------------------------------------------ generator */

/* splitmix64's output function for state z (rt/rand.h has the same; a
 * kernel sees only the tl API, so it keeps its own copy). */
static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

float attn_normal(uint64_t seed, uint32_t which, uint64_t index)
{
	uint64_t base = mix(seed ^ mix((uint64_t)which + 1));
	uint64_t pair = index >> 1;
	double u1 = (double)((mix(base + 2 * pair) >> 11) + 1) * 0x1.0p-53;
	double u2 = (double)(mix(base + 2 * pair + 1) >> 11) * 0x1.0p-53;
	double r = sqrt(-2.0 * log(u1));
	double z = (index & 1) ? r * sin(2.0 * M_PI * u2) : r * cos(2.0 * M_PI * u2);

	return rt_f16_to_f32(rt_f32_to_f16((float)z));
}

/* ------------------------------------------------------------ inputs */

/* A full input tensor (fp16 bits) with its shape. */
struct attn_src {
	uint16_t *gen;      /* generated, or NULL */
	struct rt_npy file; /* loaded from --inputs */
	bool loaded;
	uint64_t shape[3];
};

static float src_at(const struct attn_src *s, uint64_t i)
{
	uint16_t h;

	if (s->gen)
		return rt_f16_to_f32(s->gen[i]);
	memcpy(&h, s->file.data + 2 * i, 2);
	return rt_f16_to_f32(h);
}

static void src_release(struct attn_src *s)
{
	free(s->gen);
	if (s->loaded)
		rt_npy_release(&s->file);
	memset(s, 0, sizeof(*s));
}

static void src_load(struct tl *tl, const char *dir, const char *name,
		     struct attn_src *s)
{
	char path[1200];
	const struct rt_npy *n = &s->file;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (rt_npy_read_max(path, 2 * s->shape[0] * s->shape[1] * s->shape[2], &s->file) != RT_EOK)
		tl_fail(tl, "input %s: %s", path, rt_last_error());
	s->loaded = true;
	if (n->type != RT_NPY_F16 || n->ndim != 3 || n->shape[0] != s->shape[0] ||
	    n->shape[1] != s->shape[1] || n->shape[2] != s->shape[2])
		tl_fail(tl, "input %s: expected float16 (%llu, %llu, %llu), got %s with %u dims (%llu, %llu, %llu)",
			path, (unsigned long long)s->shape[0],
			(unsigned long long)s->shape[1], (unsigned long long)s->shape[2],
			n->type == RT_NPY_F16 ? "float16" : n->type == RT_NPY_F32 ? "float32" : "float64",
			n->ndim, (unsigned long long)n->shape[0],
			(unsigned long long)(n->ndim > 1 ? n->shape[1] : 0),
			(unsigned long long)(n->ndim > 2 ? n->shape[2] : 0));
	if (tl_rank(tl) == 0 && tl_program_id(tl) == 0) /* every PE reads the same file */
		tl_stat_add(tl, "nonfinite_inputs", rt_npy_nonfinite(n->type, n->data, n->count));
}

/* Generates rows [r0, r0+nr) of every head (the whole tensor when nr is
 * the full row count) of tensor `which`. */
static void src_generate(struct tl *tl, uint32_t which, struct attn_src *s)
{
	uint64_t n = s->shape[0] * s->shape[1] * s->shape[2];

	s->gen = malloc(n * sizeof(uint16_t));
	if (!s->gen)
		tl_fail(tl, "out of memory generating %llu input elements",
			(unsigned long long)n);
	for (uint64_t i = 0; i < n; i++)
		s->gen[i] = rt_f32_to_f16(attn_normal(tl_seed(tl), which, i));
}

/* Copies rows [r0, r0+nr) of head h (each row d elements) to HBM. */
static void src_to_hbm(struct tl *tl, const struct attn_src *s, uint32_t h,
		       uint64_t r0, uint64_t nr, uint64_t addr)
{
	uint64_t d = s->shape[2], n = nr * d;
	uint64_t first = (h * s->shape[1] + r0) * d;
	float *f = malloc((size_t)n * sizeof(float));

	if (!f)
		tl_fail(tl, "out of memory loading inputs");
	for (uint64_t i = 0; i < n; i++)
		f[i] = src_at(s, first + i);
	tl_hbm_write(tl, addr, TL_F16, f, (size_t)n);
	free(f);
}

static void src_save(struct tl *tl, const struct attn_src *s,
		     const char *file)
{
	char path[1200];

	if (!tl_output_file(tl, file, path, sizeof(path)))
		return;
	if (rt_npy_write(path, RT_NPY_F16, s->shape, 3,
			 s->gen ? (const void *)s->gen : s->file.data) != RT_EOK)
		tl_fail(tl, "writing %s: %s", path, rt_last_error());
}

static void src_open(struct tl *tl, const struct attn *a, const char *dir,
		     uint32_t which, struct attn_src *s)
{
	static const char *const names[3] = { "q.npy", "k.npy", "v.npy" };

	memset(s, 0, sizeof(*s));
	s->shape[0] = which == 0 ? a->hq : a->hkv;
	s->shape[1] = which == 0 ? a->sq : (uint64_t)a->ranks * a->skv;
	s->shape[2] = a->d;
	if (dir[0])
		src_load(tl, dir, names[which], s);
	else
		src_generate(tl, which, s);
}

void attn_inputs(struct tl *tl, const struct attn *a)
{
	static const char *const names[3] = { "q.npy", "k.npy", "v.npy" };
	char dir[1024];
	struct attn_src s;

	if (!tl_inputs_dir(tl, dir, sizeof(dir)))
		tl_fail(tl, "--inputs path is too long");
	if (tl_mode(tl) != TL_DATA) {
		/* timing mode moves no bytes, but bad inputs still fail */
		for (uint32_t w = 0; dir[0] && w < 3; w++) {
			src_open(tl, a, dir, w, &s);
			src_release(&s);
		}
		return;
	}
	for (uint32_t w = 0; w < 3; w++) {
		src_open(tl, a, dir, w, &s);
		for (uint32_t h = a->pe; h < a->hkv; h += a->pes) {
			if (w == 0)
				src_to_hbm(tl, &s, h * a->g, 0, (uint64_t)a->g * a->sq,
					   a->q_addr + (uint64_t)h * a->g * a->sq * a->d * 2);
			else
				src_to_hbm(tl, &s, h, (uint64_t)a->rank * a->skv, a->skv,
					   attn_kv_addr(a, w == 1 ? a->k_addr : a->v_addr, h, 0));
		}
		if (a->rank == 0 && a->pe == 0)
			src_save(tl, &s, names[w]);
		src_release(&s);
	}
}

/* ------------------------------------------------------------ mask */

void attn_mask_prepare(struct tl *tl, struct attn *a)
{
	uint32_t b = a->qblock, t = a->tile;
	uint32_t span = b < a->sq ? b : a->sq;
	float *m;

	a->mask_d = TL_NONE;
	if (!a->causal || a->sq == 1)
		return; /* one query per head sits after every key */
	m = malloc((size_t)b * t * sizeof(float));
	if (!m)
		tl_fail(tl, "out of memory (mask)");
	for (uint32_t r = 0; r < b; r++)
		for (uint32_t c = 0; c < t; c++)
			m[(size_t)r * t + c] = (float)c - (float)(r % span);
	tl_hbm_write(tl, a->mask_addr, TL_F32, m, (size_t)b * t);
	free(m);
	a->mask_d = tl_load(tl, a->mask_addr, b, t, TL_F32);
}

/* ------------------------------------------------------------ blocks */

uint64_t attn_q_addr(const struct attn *a, uint32_t head, uint32_t row0)
{
	return a->q_addr + ((uint64_t)head * a->g * a->sq + row0) * a->d * 2;
}

void attn_block_begin(struct tl *tl, const struct attn *a,
		      struct attn_block *b, uint32_t head, uint32_t row0,
		      uint32_t rows)
{
	attn_block_with_q(tl, a, b, head, row0, rows,
			  tl_load(tl, attn_q_addr(a, head, row0), rows, a->d,
				  TL_F16));
}

void attn_block_with_q(struct tl *tl, const struct attn *a,
		       struct attn_block *b, uint32_t head, uint32_t row0,
		       uint32_t rows, tl_tensor q)
{
	b->head = head;
	b->row0 = row0;
	b->rows = rows;
	b->span = rows < a->sq ? rows : a->sq;
	b->pos0 = a->p0 + row0 % a->sq;
	b->q = q;
	b->m = tl_full(tl, rows, 1, TL_F32, -ATTN_NEG);
	b->l = tl_zeros(tl, rows, 1, TL_F32);
	b->o = tl_zeros(tl, rows, a->d, TL_F32);
}

uint32_t attn_visible_tiles(const struct attn *a, const struct attn_block *b,
			    uint64_t kpos0, uint32_t n)
{
	uint64_t last = b->pos0 + b->span - 1, vis;

	if (!a->causal)
		return n;
	if (kpos0 > last)
		return 0;
	vis = (last - kpos0) / a->tile + 1;
	return vis < n ? (uint32_t)vis : n;
}

/* Writes rows [row, row+n) (fp16 bits) of o [hq*sq, d] into DIR/o.npy.
 * Every program writes its own rows into the one file: all write the same
 * header and size, none truncates another's rows. */
static void o_file_rows(struct tl *tl, const struct attn *a, uint64_t row,
			uint64_t n, const uint16_t *bits)
{
	uint64_t shape[3] = { a->hq, a->sq, a->d };
	char path[1200], hdr[128];
	int len, fd;
	uint64_t total, rowb = (uint64_t)a->d * 2;
	size_t pad;

	if (!tl_output_file(tl, "o.npy", path, sizeof(path)))
		return;
	len = snprintf(hdr + 10, sizeof(hdr) - 10,
		       "{'descr': '<f2', 'fortran_order': False, 'shape': (%llu, %llu, %llu), }",
		       (unsigned long long)shape[0], (unsigned long long)shape[1],
		       (unsigned long long)shape[2]);
	pad = ((size_t)10 + (size_t)len + 1 + 63) / 64 * 64;
	memcpy(hdr, "\x93NUMPY\x01\x00", 8);
	hdr[8] = (char)((pad - 10) & 0xff);
	hdr[9] = (char)((pad - 10) >> 8);
	memset(hdr + 10 + len, ' ', pad - 10 - (size_t)len - 1);
	hdr[pad - 1] = '\n';
	total = pad + shape[0] * shape[1] * rowb;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		tl_fail(tl, "cannot open %s for writing", path);
	if (pwrite(fd, hdr, pad, 0) != (ssize_t)pad || ftruncate(fd, (off_t)total) ||
	    pwrite(fd, bits, n * rowb, (off_t)(pad + row * rowb)) != (ssize_t)(n * rowb)) {
		close(fd);
		tl_fail(tl, "cannot write %s", path);
	}
	close(fd);
	tl_stat_add(tl, "nonfinite_outputs", rt_npy_nonfinite(RT_NPY_F16, bits, n * a->d));
}

void attn_block_finish(struct tl *tl, const struct attn *a,
		       const struct attn_block *b)
{
	uint64_t row = (uint64_t)b->head * a->g * a->sq + b->row0;

	tl_store(tl, a->o_addr + row * a->d * 2,
		 tl_astype(tl, tl_div(tl, b->o, b->l), TL_F16));
}

void attn_save_o(struct tl *tl, const struct attn *a, uint32_t head,
		 uint32_t row0, uint32_t rows)
{
	uint64_t row = (uint64_t)head * a->g * a->sq + row0;
	uint64_t n = (uint64_t)rows * a->d;
	float *f;
	uint16_t *bits;

	if (tl_mode(tl) != TL_DATA)
		return;
	f = malloc((size_t)n * sizeof(float));
	bits = malloc((size_t)n * sizeof(uint16_t));
	if (!f || !bits) {
		free(f);
		free(bits);
		tl_fail(tl, "out of memory writing o");
	}
	tl_hbm_read(tl, a->o_addr + row * a->d * 2, TL_F16, f, (size_t)n);
	for (uint64_t i = 0; i < n; i++)
		bits[i] = rt_f32_to_f16(f[i]);
	o_file_rows(tl, a, row, rows, bits);
	free(f);
	free(bits);
}
