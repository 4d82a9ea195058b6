/* config.c — the hardware and run configuration.
 *
 * rt_config_fields[] is the single source of truth. The defaults, the YAML
 * loader, `--set key=value`, the validation rules and the Markdown reference
 * all walk it, so adding a field is one line here (plus its struct member).
 *
 * The YAML loader builds its libcyaml schema from the table: one mapping per
 * section (the part of the key before the dot), every leaf an optional
 * string. libcyaml therefore checks the shape (known keys, scalars where
 * scalars belong, no duplicates) and leaves absent keys NULL, which makes a
 * file an overlay over the previous values; the values themselves go through
 * the same parser as `--set`, so both report type errors in the same words. */
#include "rt/config.h"

#include <assert.h>
#include <cyaml/cyaml.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rt/buf.h"
#include "rt/config_doc.h"

#define FIELD(k, t, member, def, unit, doc)                                 \
	{ k, t, offsetof(struct rt_config, member),                         \
	  sizeof(((struct rt_config *)0)->member), def, unit, doc }
#define U32(k, m, def, unit, doc) FIELD(k, RT_CFG_U32, m, def, unit, doc)
#define U64(k, m, def, unit, doc) FIELD(k, RT_CFG_U64, m, def, unit, doc)
#define STR(k, m, def, unit, doc) FIELD(k, RT_CFG_STR, m, def, unit, doc)

/* Grouped by section: the YAML schema needs each section's keys contiguous. */
const struct rt_config_field rt_config_fields[] = {
	U32("machine.ranks", ranks, "1", "chips",
	    "number of ranks (chips), 1 to 64; `--ranks` overrides"),
	U32("machine.pes", pes, "8", "PEs",
	    "processing elements per rank, 1 to 64; `--pes` overrides"),
	U64("machine.clock_mhz", clock_mhz, "1000", "MHz",
	    "PE clock; must divide 1000000 so a cycle is a whole number of ps"),

	U64("memory.hbm_bytes", hbm_bytes, "17179869184", "bytes",
	    "HBM capacity per rank"),
	U64("memory.tcm_scratch_bytes", tcm_scratch_bytes, "1048576", "bytes",
	    "kernel scratch TCM per PE (host arenas)"),
	U64("memory.tcm_staging_bytes", tcm_staging_bytes, "524288", "bytes",
	    "scheduler staging TCM per PE, placed after the scratch"),

	STR("dma.model", dma_model, "linear", "name",
	    "PE_DMA latency model: `linear` or a path to a plugin .so"),
	U64("dma.setup_cycles", dma_setup_cycles, "64", "cycles",
	    "fixed cost of one DMA transfer"),
	U64("dma.bytes_per_cycle", dma_bytes_per_cycle, "64", "bytes/cycle",
	    "bandwidth of each DMA channel (one read, one write)"),

	U64("dma.outstanding", dma_outstanding, "4", "transfers",
	    "transfers each DMA channel keeps in flight (setup and HBM latency of the next overlap the current one's data); 1 to 64"),

	STR("hbm.model", hbm_model, "shared", "name",
	    "rank memory model: `shared` (the rank's DMA channels share hbm.bytes_per_cycle), `ideal` (no shared limit: every channel streams at dma.bytes_per_cycle, no HBM latency) or a path to a plugin .so"),
	U64("hbm.bytes_per_cycle", hbm_bytes_per_cycle, "3276", "bytes/cycle",
	    "peak HBM bandwidth of one rank (all stacks) at the PE clock, reads and writes together"),
	U32("hbm.channels", hbm_channels, "64", "channels",
	    "independent HBM channels of one rank; each serves bytes_per_cycle / channels, 1 to 4096"),
	U64("hbm.interleave_bytes", hbm_interleave_bytes, "256", "bytes",
	    "address interleave: consecutive blocks of this size go to consecutive channels"),
	U64("hbm.latency_cycles", hbm_latency_cycles, "120", "cycles",
	    "HBM access latency; pipelined: it delays a transfer's completion, it does not hold a channel"),

	STR("gemm.model", gemm_model, "systolic", "name",
	    "PE_GEMM latency model: `systolic`, `roofline` or a plugin .so"),
	U32("gemm.array_rows", gemm_array_rows, "128", "MAC rows",
	    "systolic array rows (K consumed per pass)"),
	U32("gemm.array_cols", gemm_array_cols, "128", "MAC cols",
	    "systolic array columns (N produced per pass)"),
	U64("gemm.setup_cycles", gemm_setup_cycles, "16", "cycles",
	    "fixed cost of one GEMM stage"),
	U32("gemm.weight_double_buffer", gemm_weight_double_buffer, "0", "0 or 1",
	    "systolic model: 1 loads the next fold's weights behind the current fold (docs/stages.md)"),
	U64("gemm.macs_per_cycle", gemm_macs_per_cycle, "16384", "MACs/cycle",
	    "roofline model: peak compute"),
	U64("gemm.bytes_per_cycle", gemm_bytes_per_cycle, "256", "bytes/cycle",
	    "roofline model: operand bandwidth"),
	U32("gemm.tile_m", gemm_tile_m, "128", "elements",
	    "scheduler GEMM tile size along M"),
	U32("gemm.tile_n", gemm_tile_n, "128", "elements",
	    "scheduler GEMM tile size along N"),
	U32("gemm.tile_k", gemm_tile_k, "128", "elements",
	    "scheduler GEMM tile size along K"),

	STR("math.model", math_model, "simd", "name",
	    "PE_MATH latency model: `simd` or a path to a plugin .so"),
	U32("math.lanes", math_lanes, "64", "elements/cycle",
	    "SIMD lanes: elements processed per step"),
	U64("math.setup_cycles", math_setup_cycles, "8", "cycles",
	    "fixed cost of one MATH stage"),
	U64("math.cycles_per_elem", math_cycles_per_elem, "1", "cycles",
	    "cost per step of simple ops (add, mul, max, copy)"),
	U64("math.exp_cycles_per_elem", math_exp_cycles_per_elem, "4",
	    "cycles", "cost per step of transcendental ops (exp and friends)"),
	U64("math.reduce_cycles_per_elem", math_reduce_cycles_per_elem, "1",
	    "cycles", "cost per step of reductions (rmax, rsum)"),

	U64("links.host_sched_cycles", link_host_sched_cycles, "1", "cycles",
	    "doorbell latency host to PE scheduler, at least 1"),
	U64("links.sched_engine_cycles", link_sched_engine_cycles, "1",
	    "cycles", "doorbell latency scheduler to engine, at least 1"),
	U64("links.ipcq_cycles", link_ipcq_cycles, "500", "cycles",
	    "IPCQ ring link latency (per rank pair and direction), at least 1"),
	U64("links.ipcq_bytes_per_cycle", ipcq_bytes_per_cycle, "160",
	    "bytes/cycle", "IPCQ ring link bandwidth per rank pair and direction, shared by all PEs of the rank, at least 1"),

	U64("dispatch.fixed_cycles", dispatch_fixed_cycles, "40", "cycles",
	    "PE_CPU cost of dispatching one command, fixed part (ADR-0064)"),
	U64("dispatch.cycles_per_kib", dispatch_cycles_per_kib, "64",
	    "cycles/KiB", "PE_CPU dispatch cost per KiB of a command's logical bytes"),
	U64("dispatch.max_composite_logical_bytes",
	    max_composite_logical_bytes, "1024", "bytes",
	    "largest logical size of one composite command"),

	U64("run.watchdog_ms", watchdog_ms, "30000", "ms",
	    "abort a run that makes no progress for this long (wall clock)"),
	STR("run.bind_host", bind_host, "127.0.0.1", "address",
	    "TCP address the daemons bind to"),
};

#define FIELD_COUNT (sizeof(rt_config_fields) / sizeof(rt_config_fields[0]))
const size_t rt_config_field_count = FIELD_COUNT;

/* ------------------------------------------------------------ one field */

/* Longest value text the YAML schema accepts; real limits are per field. */
#define TEXT_MAX 4096

enum uint_parse { UINT_OK, UINT_NOT_A_NUMBER, UINT_TOO_BIG };

/* Parses plain decimal digits (no sign, no spaces) up to `max`. */
static enum uint_parse parse_uint(const char *text, uint64_t max,
				  uint64_t *out)
{
	uint64_t v = 0;

	if (!*text)
		return UINT_NOT_A_NUMBER;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9')
			return UINT_NOT_A_NUMBER;
		if (v > (max - (uint64_t)(*p - '0')) / 10)
			return UINT_TOO_BIG;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*out = v;
	return UINT_OK;
}

/* Copies at most 40 bytes of `text` into `out`, control bytes as '?', so an
 * error line quoting user input stays one short line. */
static void quote_value(const char *text, char out[48])
{
	size_t n = 0;

	for (; n < 40 && text[n]; n++)
		out[n] = (unsigned char)text[n] < 0x20 ? '?' : text[n];
	if (text[n]) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

/* Stores `text` into `f`'s member of `cfg`. On failure leaves `cfg`
 * untouched and describes the problem in `why` ("expects ..."). */
static bool field_assign(struct rt_config *cfg,
			 const struct rt_config_field *f, const char *text,
			 char *why, size_t why_len)
{
	uint8_t *dst = (uint8_t *)cfg + f->offset;
	uint64_t max = f->type == RT_CFG_U32 ? UINT32_MAX : UINT64_MAX;
	char quoted[48];
	size_t len;
	uint64_t v;

	quote_value(text, quoted);
	if (f->type == RT_CFG_STR) {
		len = strlen(text);
		if (len >= f->size) {
			snprintf(why, why_len,
				 "is too long: %zu bytes, at most %zu", len,
				 f->size - 1);
			return false;
		}
		memset(dst, 0, f->size);
		memcpy(dst, text, len);
		return true;
	}
	switch (parse_uint(text, max, &v)) {
	case UINT_NOT_A_NUMBER:
		snprintf(why, why_len, "expects an unsigned integer, got '%s'",
			 quoted);
		return false;
	case UINT_TOO_BIG:
		snprintf(why, why_len, "is out of range: got '%s', at most %llu",
			 quoted, (unsigned long long)max);
		return false;
	case UINT_OK:
		break;
	}
	if (f->type == RT_CFG_U32) {
		uint32_t v32 = (uint32_t)v;
		memcpy(dst, &v32, sizeof(v32));
	} else {
		memcpy(dst, &v, sizeof(v));
	}
	return true;
}

/* The numeric value of `f` in `cfg` (strings: 0). */
static uint64_t field_u64(const struct rt_config *cfg,
			  const struct rt_config_field *f)
{
	const uint8_t *src = (const uint8_t *)cfg + f->offset;
	uint32_t v32;
	uint64_t v64;

	if (f->type == RT_CFG_U32) {
		memcpy(&v32, src, sizeof(v32));
		return v32;
	}
	if (f->type == RT_CFG_U64) {
		memcpy(&v64, src, sizeof(v64));
		return v64;
	}
	return 0;
}

static const struct rt_config_field *field_find(const char *key, size_t len)
{
	for (size_t i = 0; i < FIELD_COUNT; i++) {
		const char *k = rt_config_fields[i].key;
		if (strlen(k) == len && memcmp(k, key, len) == 0)
			return &rt_config_fields[i];
	}
	return NULL;
}

/* Levenshtein distance of two short strings (longer ones count as far). */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[64], prev, tmp;

	if (la >= 64 || lb >= 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t best = prev + (a[i - 1] != b[j - 1]);
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			tmp = row[j];
			row[j] = best;
			prev = tmp;
		}
	}
	return row[lb];
}

/* A known key the user probably meant by `key`: within two edits, or the
 * same leaf name given without (or under the wrong) section. */
static const char *field_suggest(const char *key)
{
	const char *leaf = strchr(key, '.') ? strchr(key, '.') + 1 : key;

	for (size_t i = 0; i < FIELD_COUNT; i++)
		if (edit_distance(key, rt_config_fields[i].key) <= 2)
			return rt_config_fields[i].key;
	for (size_t i = 0; i < FIELD_COUNT; i++)
		if (strcmp(strchr(rt_config_fields[i].key, '.') + 1, leaf) == 0)
			return rt_config_fields[i].key;
	return NULL;
}

/* " (did you mean 'x'?)" or "" into `out`. */
static const char *hint(const char *key, char *out, size_t len)
{
	const char *s = field_suggest(key);

	out[0] = '\0';
	if (s)
		snprintf(out, len, " (did you mean '%s'?)", s);
	return out;
}

/* ------------------------------------------------------------ public: basics */

void rt_config_defaults(struct rt_config *cfg)
{
	char why[128];
	bool ok;

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < FIELD_COUNT; i++) {
		ok = field_assign(cfg, &rt_config_fields[i],
				  rt_config_fields[i].def, why, sizeof(why));
		assert(ok && "rt_config_fields default does not parse");
		(void)ok;
	}
}

enum rt_err rt_config_set(struct rt_config *cfg, const char *assignment)
{
	const char *eq = strchr(assignment, '=');
	const struct rt_config_field *f;
	char key[128], why[160], tip[96];

	if (!eq)
		return rt_fail(RT_ECONFIG,
			       "--set %s: expected key=value, e.g. "
			       "dma.setup_cycles=32", assignment);
	f = field_find(assignment, (size_t)(eq - assignment));
	if (!f) {
		snprintf(key, sizeof(key), "%.*s", (int)(eq - assignment),
			 assignment);
		return rt_fail(RT_ECONFIG, "--set %s: unknown key%s",
			       assignment, hint(key, tip, sizeof(tip)));
	}
	if (!field_assign(cfg, f, eq + 1, why, sizeof(why)))
		return rt_fail(RT_ECONFIG, "--set %s: key '%s' %s", assignment,
			       f->key, why);
	return RT_EOK;
}

uint64_t rt_config_cycle_ps(const struct rt_config *cfg)
{
	return cfg->clock_mhz ? 1000000 / cfg->clock_mhz : 0;
}

/* ------------------------------------------------------------ validation */

/* Inclusive bounds for numeric fields; everything else is unbounded. */
static const struct range_rule {
	const char *key;
	uint64_t min, max;
} range_rules[] = {
	{ "machine.ranks", 1, 64 },
	{ "machine.pes", 1, 64 },
	{ "memory.tcm_scratch_bytes", 1, UINT64_MAX },
	{ "dma.bytes_per_cycle", 1, UINT64_MAX },
	{ "dma.outstanding", 1, 64 },
	{ "hbm.bytes_per_cycle", 1, UINT64_MAX },
	{ "hbm.channels", 1, 4096 },
	{ "hbm.interleave_bytes", 1, UINT64_MAX },
	{ "gemm.array_rows", 1, UINT32_MAX },
	{ "gemm.array_cols", 1, UINT32_MAX },
	{ "gemm.weight_double_buffer", 0, 1 },
	{ "gemm.macs_per_cycle", 1, UINT64_MAX },
	{ "gemm.bytes_per_cycle", 1, UINT64_MAX },
	{ "gemm.tile_m", 1, UINT32_MAX },
	{ "gemm.tile_n", 1, UINT32_MAX },
	{ "gemm.tile_k", 1, UINT32_MAX },
	{ "math.lanes", 1, UINT32_MAX },
	/* a zero-latency link would let a window grant itself forever */
	{ "links.host_sched_cycles", 1, UINT64_MAX },
	{ "links.sched_engine_cycles", 1, UINT64_MAX },
	{ "links.ipcq_cycles", 1, UINT64_MAX },
	{ "links.ipcq_bytes_per_cycle", 1, UINT64_MAX },
};

static enum rt_err check_range(const struct rt_config *cfg,
			       const struct range_rule *r)
{
	const struct rt_config_field *f = field_find(r->key, strlen(r->key));
	uint64_t v;

	assert(f && "range_rules names an unknown key");
	v = field_u64(cfg, f);
	if (v >= r->min && v <= r->max)
		return RT_EOK;
	if (r->max == UINT32_MAX || r->max == UINT64_MAX)
		return rt_fail(RT_ECONFIG, "config: %s = %llu, must be at least "
			       "%llu", r->key, (unsigned long long)v,
			       (unsigned long long)r->min);
	return rt_fail(RT_ECONFIG, "config: %s = %llu, must be %llu to %llu",
		       r->key, (unsigned long long)v,
		       (unsigned long long)r->min, (unsigned long long)r->max);
}

enum rt_err rt_config_validate(const struct rt_config *cfg)
{
	enum rt_err err;

	if (cfg->clock_mhz == 0 || 1000000 % cfg->clock_mhz != 0)
		return rt_fail(RT_ECONFIG,
			       "config: machine.clock_mhz = %llu must divide "
			       "1000000 exactly so a cycle is a whole number of "
			       "picoseconds (e.g. 500, 1000, 1250, 2000)",
			       (unsigned long long)cfg->clock_mhz);
	for (size_t i = 0; i < sizeof(range_rules) / sizeof(range_rules[0]);
	     i++) {
		err = check_range(cfg, &range_rules[i]);
		if (err)
			return err;
	}
	for (size_t i = 0; i < FIELD_COUNT; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		if (f->type == RT_CFG_STR && !*((const char *)cfg + f->offset))
			return rt_fail(RT_ECONFIG, "config: %s is empty",
				       f->key);
	}
	return RT_EOK;
}

/* ------------------------------------------------------------ YAML schema */

#define SECTION_MAX 16
#define SECTION_NAME_MAX 32

/* The libcyaml schema derived from rt_config_fields. The loaded document is
 * an array of section pointers, each an array of `char *` values in table
 * order; absent sections and keys stay NULL. */
struct cfg_schema {
	cyaml_schema_value_t root;
	cyaml_schema_field_t top[SECTION_MAX + 1];
	cyaml_schema_field_t leaf[FIELD_COUNT + SECTION_MAX]; /* + END each */
	char names[SECTION_MAX][SECTION_NAME_MAX];
	size_t first[SECTION_MAX]; /* table index of the section's first key */
	size_t count[SECTION_MAX];
	size_t nsec;
};

/* Opens a new section named by the first `len` bytes of `key`. */
static void schema_open_section(struct cfg_schema *s, const char *key,
				size_t len, size_t index)
{
	assert(s->nsec < SECTION_MAX && len < SECTION_NAME_MAX);
	memcpy(s->names[s->nsec], key, len);
	s->names[s->nsec][len] = '\0';
	for (size_t j = 0; j < s->nsec; j++)
		assert(strcmp(s->names[j], s->names[s->nsec]) != 0 &&
		       "rt_config_fields: section keys are not contiguous");
	s->first[s->nsec] = index;
	s->nsec++;
}

static void schema_build(struct cfg_schema *s)
{
	size_t leaf = 0, start[SECTION_MAX];

	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < FIELD_COUNT; i++) {
		const char *key = rt_config_fields[i].key;
		size_t plen = strcspn(key, ".");
		cyaml_schema_field_t *f;

		if (!s->nsec || strncmp(s->names[s->nsec - 1], key, plen) ||
		    s->names[s->nsec - 1][plen]) {
			if (s->nsec)
				leaf++; /* zeroed END entry of the previous */
			start[s->nsec] = leaf;
			schema_open_section(s, key, plen, i);
		}
		f = &s->leaf[leaf++];
		f->key = key + plen + 1;
		f->data_offset = (uint32_t)(s->count[s->nsec - 1]++ *
					    sizeof(char *));
		f->value.type = CYAML_STRING;
		f->value.flags = (enum cyaml_flag)(CYAML_FLAG_POINTER |
						   CYAML_FLAG_OPTIONAL);
		f->value.data_size = sizeof(char);
		f->value.string.max = TEXT_MAX;
	}
	for (size_t n = 0; n < s->nsec; n++) {
		cyaml_schema_field_t *t = &s->top[n];
		t->key = s->names[n];
		t->data_offset = (uint32_t)(n * sizeof(char **));
		t->value.type = CYAML_MAPPING;
		t->value.flags = (enum cyaml_flag)(CYAML_FLAG_POINTER |
						   CYAML_FLAG_OPTIONAL);
		t->value.data_size = (uint32_t)(s->count[n] * sizeof(char *));
		t->value.mapping.fields = &s->leaf[start[n]];
	}
	s->root.type = CYAML_MAPPING;
	s->root.flags = CYAML_FLAG_POINTER;
	s->root.data_size = (uint32_t)(s->nsec * sizeof(char **));
	s->root.mapping.fields = s->top;
}

/* ------------------------------------------------------------ YAML errors */

/* What libcyaml said at error level: its message and the backtrace of
 * mapping fields, which together name the offending key. */
struct cyaml_capture {
	char what[160];
	char path[4][64]; /* field names, innermost first */
	unsigned depth;
	unsigned line;    /* innermost backtrace line, 0 if none */
};

/* libcyaml log callback: records instead of printing to stderr. */
static void capture_log(cyaml_log_t level, void *ctx, const char *fmt,
			va_list args)
{
	struct cyaml_capture *c = ctx;
	char msg[256], *p;
	unsigned line;

	if (level < CYAML_LOG_ERROR)
		return;
	vsnprintf(msg, sizeof(msg), fmt, args);
	msg[strcspn(msg, "\r\n")] = '\0';
	if (!strncmp(msg, "Load: ", 6)) {
		if (!c->what[0] && strcmp(msg + 6, "Backtrace:"))
			quote_value(msg + 6, c->what);
		return;
	}
	p = strstr(msg, "(line: ");
	if (p && !c->line && sscanf(p, "(line: %u", &line) == 1)
		c->line = line;
	p = strstr(msg, "in mapping field '");
	if (p && c->depth < 4) {
		p += strlen("in mapping field '");
		p[strcspn(p, "'")] = '\0';
		snprintf(c->path[c->depth++], sizeof(c->path[0]), "%s", p);
	}
}

/* "section.key" from the backtrace, plus `leaf` when given. */
static void capture_key(const struct cyaml_capture *c, const char *leaf,
			char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (unsigned i = c->depth; i-- > 0 && n < len;)
		n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "." : "",
				      c->path[i]);
	if (leaf && n < len)
		snprintf(out + n, len - n, "%s%s", n ? "." : "", leaf);
}

static const char *event_noun(const char *what)
{
	if (strstr(what, "SEQUENCE"))
		return "a list";
	if (strstr(what, "MAPPING_START"))
		return "a mapping";
	return "a single value";
}

/* " (near key 'k', line n)", or as much of it as is known, into `out`. */
static const char *where(const struct cyaml_capture *c, const char *key,
			 char *out, size_t len)
{
	out[0] = '\0';
	if (key[0] && c->line)
		snprintf(out, len, " (near key '%s', line %u)", key, c->line);
	else if (key[0])
		snprintf(out, len, " (near key '%s')", key);
	else if (c->line)
		snprintf(out, len, " (near line %u)", c->line);
	return out;
}

/* Turns libcyaml's message into one line naming the origin and the key. */
static enum rt_err cyaml_failure(const struct cyaml_capture *c,
				 const char *origin, cyaml_err_t err)
{
	static const char unexpected[] = "Unexpected key: ";
	static const char twice[] = "Mapping field already seen: ";
	const char *w = c->what;
	char key[200], tip[256];

	if (!strncmp(w, unexpected, sizeof(unexpected) - 1)) {
		capture_key(c, w + sizeof(unexpected) - 1, key, sizeof(key));
		return rt_fail(RT_ECONFIG, "config %s: unknown key '%s'%s",
			       origin, key, hint(key, tip, sizeof(tip)));
	}
	capture_key(c, NULL, key, sizeof(key));
	if (!strncmp(w, twice, sizeof(twice) - 1))
		return rt_fail(RT_ECONFIG, "config %s: key '%s' appears twice",
			       origin, key);
	if (!strncmp(w, "Expecting STRING", 16))
		return rt_fail(RT_ECONFIG, "config %s: key '%s' expects a "
			       "single value, got %s", origin, key,
			       event_noun(w + 16));
	if (!strncmp(w, "Expecting MAPPING", 17) && key[0])
		return rt_fail(RT_ECONFIG, "config %s: key '%s' expects a "
			       "mapping such as '%s: {key: value}', got %s",
			       origin, key, key, event_noun(w + 17));
	if (!strncmp(w, "Expecting MAPPING", 17))
		return rt_fail(RT_ECONFIG, "config %s: expected a mapping of "
			       "sections (machine:, memory:, dma:, ...), got %s",
			       origin, event_noun(w + 17));
	return rt_fail(RT_ECONFIG, "config %s: %s%s", origin,
		       w[0] ? w : cyaml_strerror(err),
		       where(c, key, tip, sizeof(tip)));
}

/* ------------------------------------------------------------ YAML load */

/* Parses every present value of the loaded document into `cfg`. */
static enum rt_err apply_document(struct rt_config *cfg,
				  const struct cfg_schema *s, char ***doc,
				  const char *origin)
{
	char why[160];

	for (size_t n = 0; n < s->nsec; n++) {
		for (size_t i = 0; doc[n] && i < s->count[n]; i++) {
			const struct rt_config_field *f =
				&rt_config_fields[s->first[n] + i];
			if (!doc[n][i] ||
			    field_assign(cfg, f, doc[n][i], why, sizeof(why)))
				continue;
			return rt_fail(RT_ECONFIG, "config %s: key '%s' %s",
				       origin, f->key, why);
		}
	}
	return RT_EOK;
}

enum rt_err rt_config_load_text(struct rt_config *cfg, const char *text,
				size_t len, const char *origin)
{
	struct cyaml_capture capture = { 0 };
	const cyaml_config_t cc = {
		.log_fn = capture_log,
		.log_ctx = &capture,
		.mem_fn = cyaml_mem,
		.log_level = CYAML_LOG_ERROR,
		/* anchors buy nothing in a flat config and invite blow-ups */
		.flags = CYAML_CFG_NO_ALIAS,
	};
	struct cfg_schema schema;
	struct rt_config next = *cfg;
	char ***doc = NULL;
	cyaml_err_t cerr;
	enum rt_err err;

	if (!len) /* nothing to overlay; also spares libyaml a NULL buffer */
		return RT_EOK;
	schema_build(&schema);
	cerr = cyaml_load_data((const uint8_t *)text, len, &cc, &schema.root,
			       (cyaml_data_t **)&doc, NULL);
	if (cerr != CYAML_OK)
		return cyaml_failure(&capture, origin, cerr);
	if (!doc) /* empty document: nothing to overlay */
		return RT_EOK;
	err = apply_document(&next, &schema, doc, origin);
	cyaml_free(&cc, &schema.root, doc, 0);
	if (!err)
		*cfg = next; /* all or nothing */
	return err;
}

enum rt_err rt_config_load_file(struct rt_config *cfg, const char *path)
{
	struct rt_buf text;
	enum rt_err err;

	rt_buf_init(&text);
	errno = 0;
	if (rt_buf_read_file(&text, path)) {
		err = rt_fail(RT_ECONFIG, "config %s: cannot read the file: %s",
			      path, errno ? strerror(errno) : "I/O error");
		goto out_release;
	}
	err = rt_config_load_text(cfg, text.data, text.len, path);
out_release:
	rt_buf_release(&text);
	return err;
}

/* ------------------------------------------------------------ docs */

enum rt_err rt_config_doc(struct rt_buf *out)
{
	enum rt_err err = rt_buf_printf(out, "| key | default | unit | "
					"meaning |\n|---|---|---|---|\n");

	for (size_t i = 0; !err && i < FIELD_COUNT; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		err = rt_buf_printf(out, "| `%s` | `%s` | %s | %s |\n", f->key,
				    f->def, f->unit, f->doc);
	}
	return err;
}
