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
 * the same parser as `--set`, so both report type errors in the same words.
 *
 * Over 600 lines on purpose: the field table (a third of it), the YAML
 * loader built from the table, `--set`, validation and the parsers they
 * share: one table and everything that walks it. */
#include "rt/config.h"
#include "rt/yamlcheck.h"

#include <assert.h>
#include <cyaml/cyaml.h>
#include <yaml.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "rt/buf.h"
#include "rt/infile.h"
#include "rt/json.h"

#define FIELD(k, t, member, def, unit, doc, lo, hi)                         \
	{ k, t, offsetof(struct rt_config, member),                         \
	  sizeof(((struct rt_config *)0)->member), def, unit, doc, lo, hi }
#define U32(k, m, def, unit, lo, hi, doc) FIELD(k, RT_CFG_U32, m, def, unit, doc, lo, hi)
#define U64(k, m, def, unit, lo, hi, doc) FIELD(k, RT_CFG_U64, m, def, unit, doc, lo, hi)
#define STR(k, m, def, unit, doc) FIELD(k, RT_CFG_STR, m, def, unit, doc, 0, 0)

/* Ranges: wide enough for any machine worth simulating, narrow enough that
 * no product the models form (cycles x ps, bytes / rate) can overflow. */
#define GIGA 1000000000ULL
#define KI (1ULL << 10)
#define MI (1ULL << 20)
#define GI (1ULL << 30)
#define TI (1ULL << 40)

/* Grouped by section: the YAML schema needs each section's keys contiguous. */
const struct rt_config_field rt_config_fields[] = {
	STR("machine.preset", machine_preset, RT_DEFAULT_PRESET, "name",
	    "the machine preset the configuration starts from (deploy/configs/machines/NAME.yaml; `--machine` names it, `machine: NAME` in YAML); keys a file or `--set` gives override it"),
	U32("machine.ranks", ranks, "1", "chips", 1, 64,
	    "number of ranks (chips); `--ranks` overrides"),
	U32("machine.pes", pes, "8", "PEs", 1, 64,
	    "processing elements per rank; `--pes` overrides"),
	U64("machine.clock_mhz", clock_mhz, "1000", "MHz", 1, 1000000,
	    "PE clock; must divide 1000000 so a cycle is a whole number of ps"),

	U64("memory.hbm_bytes", hbm_bytes, "17179869184", "bytes", 4 * KI, TI,
	    "HBM capacity per rank"),
	U64("memory.tcm_scratch_bytes", tcm_scratch_bytes, "20971520", "bytes", 1, 4 * GI,
	    "kernel scratch TCM per PE (host arenas)"),
	U64("memory.tcm_staging_bytes", tcm_staging_bytes, "8388608", "bytes", 0, 4 * GI,
	    "scheduler staging TCM per PE, placed after the scratch"),

	STR("dma.model", dma_model, "linear", "name",
	    "PE_DMA latency model: `linear` or a path to a plugin .so"),
	STR("dma.params", dma_params, "none", "name=value,...",
	    "parameters handed to a plug-in model, `name=value,...`; in YAML also a mapping `{name: value}` (`none`: no parameters)"),
	U64("dma.setup_cycles", dma_setup_cycles, "91", "cycles", 0, GIGA,
	    "fixed cost of one DMA transfer"),
	U64("dma.bytes_per_cycle", dma_bytes_per_cycle, "27", "bytes/cycle", 1, MI,
	    "bandwidth of each DMA queue (a read and a write channel per PE, each of dma.queues queues)"),
	U64("dma.outstanding", dma_outstanding, "4", "transfers", 1, 64,
	    "transfers each DMA channel keeps in flight (setup and HBM latency of the next overlap the current one's data)"),
	U32("dma.queues", dma_queues, "16", "queues", 1, 64,
	    "DMA queues (engines) per channel: a transfer's rows are spread over up to this many queues, which move them in parallel"),
	U32("dma.rows_per_queue", dma_rows_per_queue, "8", "rows", 1, 65536,
	    "fewest rows of one transfer a queue takes: a transfer of r rows uses min(dma.queues, ceil(r / rows_per_queue)) queues"),

	STR("hbm.model", hbm_model, "shared", "name",
	    "rank memory model: `shared` (the rank's DMA channels share hbm.bytes_per_cycle), `interleaved` (per-channel first come first served over interleaved addresses), `ideal` (no shared limit: every channel streams at dma.bytes_per_cycle, no HBM latency) or a path to a plugin .so"),
	U64("hbm.bytes_per_cycle", hbm_bytes_per_cycle, "2900", "bytes/cycle", 1, MI,
	    "peak HBM bandwidth of one rank (all stacks) at the PE clock, reads and writes together"),
	U32("hbm.channels", hbm_channels, "64", "channels", 1, 4096,
	    "independent HBM channels of one rank; each serves bytes_per_cycle / channels"),
	U64("hbm.interleave_bytes", hbm_interleave_bytes, "256", "bytes", 1, GIGA,
	    "address interleave: consecutive blocks of this size go to consecutive channels"),
	U64("hbm.latency_cycles", hbm_latency_cycles, "120", "cycles", 0, GIGA,
	    "HBM access latency; pipelined: it delays a transfer's completion, it does not hold a channel (at least one cycle is charged when the rank's memory is modelled)"),

	STR("gemm.model", gemm_model, "tensor_engine", "name",
	    "PE_GEMM latency model: `systolic`, `roofline`, `tensor_engine` or a plugin .so"),
	STR("gemm.params", gemm_params, "none", "name=value,...",
	    "parameters handed to a plug-in model, `name=value,...`; in YAML also a mapping `{name: value}` (`none`: no parameters)"),
	U32("gemm.array_rows", gemm_array_rows, "128", "MAC rows", 1, 65536,
	    "systolic array rows (K consumed per pass)"),
	U32("gemm.array_cols", gemm_array_cols, "128", "MAC cols", 1, 65536,
	    "systolic array columns (N produced per pass)"),
	U64("gemm.setup_cycles", gemm_setup_cycles, "0", "cycles", 0, GIGA,
	    "fixed cost of one GEMM stage"),
	U32("gemm.weight_double_buffer", gemm_weight_double_buffer, "0", "0 or 1", 0, 1,
	    "systolic model: 1 loads the next fold's weights behind the current fold (docs/stages.md)"),
	U64("gemm.macs_per_cycle", gemm_macs_per_cycle, "0", "MACs/cycle", 0, 4 * GI,
	    "roofline model: peak compute; 0: the array's, gemm.array_rows x gemm.array_cols"),
	U64("gemm.bytes_per_cycle", gemm_bytes_per_cycle, "0", "bytes/cycle", 0, MI,
	    "roofline model: operand bandwidth; 0: what the array's edges move, array_rows elements of A + array_cols of B + array_cols results per cycle at the stage's dtypes (then roofline is a bound on systolic)"),
	U32("gemm.moving_max", gemm_moving_max, "512", "rows", 1, 65536,
	    "tensor_engine model: A rows one instruction streams (NKI nc_matmul: moving free size <= 512)"),
	U64("gemm.min_cycles", gemm_min_cycles, "64", "engine cycles", 0, 1000000,
	    "tensor_engine model: an instruction costs at least min(min_cycles, its B tile's columns) engine cycles"),
	U32("gemm.f32_factor", gemm_f32_factor, "4", "times", 1, 64,
	    "tensor_engine model: an instruction with a float32 input costs this many times more"),
	U64("gemm.clock_mhz", gemm_clock_mhz, "2400", "MHz", 0, 1000000,
	    "tensor_engine model: the engine's clock, its cycles converted to PE cycles (rounded up per stage); 0: machine.clock_mhz. The systolic and roofline models count PE cycles"),
	U32("gemm.buffers", gemm_buffers, "16", "slots", 2, 32,
	    "scheduler staging slots per streamed GEMM operand and per staged out (2: double buffering; more hide a longer DMA latency behind the GEMM)"),
	U32("gemm.tile_m", gemm_tile_m, "128", "elements", 1, 65536,
	    "scheduler GEMM tile size along M"),
	U32("gemm.tile_n", gemm_tile_n, "128", "elements", 1, 65536,
	    "scheduler GEMM tile size along N"),
	U32("gemm.tile_k", gemm_tile_k, "128", "elements", 1, 65536,
	    "scheduler GEMM tile size along K"),

	STR("math.model", math_model, "simd", "name",
	    "PE_MATH latency model: `simd` or a path to a plugin .so"),
	STR("math.params", math_params, "none", "name=value,...",
	    "parameters handed to a plug-in model, `name=value,...`; in YAML also a mapping `{name: value}` (`none`: no parameters)"),
	U32("math.lanes", math_lanes, "122", "elements/cycle", 1, 65536,
	    "SIMD lanes: elements processed per step"),
	U64("math.setup_cycles", math_setup_cycles, "67", "cycles", 0, GIGA,
	    "fixed cost of one MATH stage"),
	U64("math.cycles_per_elem", math_cycles_per_elem, "1", "cycles", 0, 10000,
	    "cost per step of simple ops (add, mul, max, copy)"),
	U64("math.exp_cycles_per_elem", math_exp_cycles_per_elem, "1", "cycles", 0, 10000,
	    "cost per step of transcendental ops (exp and friends)"),
	U64("math.reduce_cycles_per_elem", math_reduce_cycles_per_elem, "1", "cycles", 0, 10000,
	    "cost per step of reductions (rmax, rsum)"),

	/* a zero-latency link would let a window grant itself forever */
	U64("links.host_sched_cycles", link_host_sched_cycles, "1", "cycles", 1, GIGA,
	    "doorbell latency host to PE scheduler"),
	U64("links.sched_engine_cycles", link_sched_engine_cycles, "1", "cycles", 1, GIGA,
	    "doorbell latency scheduler to engine"),
	U64("links.ipcq_cycles", link_ipcq_cycles, "500", "cycles", 1, GIGA,
	    "IPCQ ring link latency (per rank pair and direction)"),
	U64("links.ipcq_bytes_per_cycle", ipcq_bytes_per_cycle, "160", "bytes/cycle", 1, MI,
	    "IPCQ ring link bandwidth per rank pair and direction, shared by all PEs of the rank"),
	STR("links.topology", link_topology, "ring", "name",
	    "how ranks are joined: `ring` (a link each way to each ring neighbour; a message to a farther rank is forwarded hop by hop, cut-through) or `switch` (one port per rank into a non-blocking switch: a message crosses the sender's egress and the receiver's ingress port, links.ipcq_cycles apart)"),
	U64("links.pe_sync_cycles", link_pe_sync_cycles, "100", "cycles", 1, GIGA,
	    "latency of a notification between two PEs of a rank (tl_barrier, program steps); a modelling choice, not a published figure"),

	U64("dispatch.fixed_cycles", dispatch_fixed_cycles, "40", "cycles", 0, GIGA,
	    "PE_CPU cost of dispatching one command, fixed part (dispatch-cost design)"),
	U64("dispatch.cycles_per_kib", dispatch_cycles_per_kib, "64", "cycles/KiB", 0, MI,
	    "PE_CPU dispatch cost per KiB of a command's logical bytes"),
	U64("dispatch.max_composite_logical_bytes", max_composite_logical_bytes, "1024",
	    "bytes", 1, 4 * GI, "largest logical size of one composite command"),

	/* Per-action energies: Horowitz, "Computing's energy problem (and what
	 * we can do about it)", ISSCC 2014, 45 nm at 0.9 V, unless marked as a
	 * modelling choice. Integers in fJ (1 pJ = 1000 fJ) and uW: the
	 * configuration has no floating point. */
	U64("energy.mac_f16_fj", energy_mac_f16_fj, "2000", "fJ/MAC", 0, GIGA,
	    "one f16 multiply-accumulate: f16 multiply 1.1 pJ + f32 add 0.9 pJ (Horowitz, ISSCC 2014; accumulation is f32)"),
	U64("energy.mac_bf16_fj", energy_mac_bf16_fj, "2000", "fJ/MAC", 0, GIGA,
	    "one bf16 multiply-accumulate: modelling choice, as f16 (Horowitz gives no bf16 figure; a bf16 multiplier is no larger than an f16 one)"),
	U64("energy.mac_f32_fj", energy_mac_f32_fj, "4600", "fJ/MAC", 0, GIGA,
	    "one f32 multiply-accumulate: f32 multiply 3.7 pJ + f32 add 0.9 pJ (Horowitz, ISSCC 2014)"),
	U64("energy.math_op_fj", energy_math_op_fj, "900", "fJ/element", 0, GIGA,
	    "one element of a simple or reduction MATH op: an f32 add, 0.9 pJ (Horowitz, ISSCC 2014)"),
	U64("energy.math_exp_fj", energy_math_exp_fj, "23000", "fJ/element", 0, GIGA,
	    "one element of a transcendental MATH op: modelling choice, a degree-5 polynomial = 5 f32 multiply-adds of 4.6 pJ (Horowitz, ISSCC 2014)"),
	U64("energy.tcm_read_fj_per_byte", energy_tcm_read_fj, "2500", "fJ/byte", 0, GIGA,
	    "TCM read: 20 pJ per 64-bit access of a 32 KB SRAM (Horowitz, ISSCC 2014); modelling choice: the TCM is banked in 32 KB banks"),
	U64("energy.tcm_write_fj_per_byte", energy_tcm_write_fj, "2500", "fJ/byte", 0, GIGA,
	    "TCM write: modelling choice, as a read (Horowitz gives reads)"),
	U64("energy.hbm_fj_per_byte", energy_hbm_fj, "31200", "fJ/byte", 0, GIGA,
	    "HBM read or write: about 3.9 pJ/bit for HBM2 (O'Connor et al., \"Fine-Grained DRAM\", MICRO 2017)"),
	U64("energy.link_fj_per_byte", energy_link_fj, "9360", "fJ/byte", 0, GIGA,
	    "a byte over an IPCQ link: 1.17 pJ/bit ground-referenced signalling (Poulton et al., JSSC 54(1), 2019)"),
	U64("energy.gemm_static_uw", energy_gemm_static_uw, "7864320", "uW", 0, GIGA,
	    "static power of one PE_GEMM: modelling choice, 10% of its dynamic power at full use with the default machine (trn2: 128 x 128 MACs x 2 pJ at 2.4 GHz)"),
	U64("energy.math_static_uw", energy_math_static_uw, "10980", "uW", 0, GIGA,
	    "static power of one PE_MATH: modelling choice, 10% of 122 lanes x 0.9 pJ at 1 GHz (trn2)"),
	U64("energy.dma_static_uw", energy_dma_static_uw, "216000", "uW", 0, GIGA,
	    "static power of one PE_DMA: modelling choice, 10% of 2 channels x 16 queues x 27 B/cycle x 2.5 pJ/B (TCM side) at 1 GHz (trn2)"),
	U64("energy.cpu_static_uw", energy_cpu_static_uw, "5000", "uW", 0, GIGA,
	    "static power of one PE_CPU: modelling choice, 10% of 50 mW for a small in-order core"),

	U64("run.watchdog_ms", watchdog_ms, "30000", "ms", 1, 86400000,
	    "abort a run that makes no progress for this long (wall clock)"),
	U32("run.critical_path", critical_path, "1", "0 or 1", 0, 1,
	    "1: every message carries the critical path to it and summary.json splits the latency by resource class (`critical_path`, docs/metrics.md); 0: none (to measure what it costs)"),
	STR("run.bind_host", bind_host, "127.0.0.1", "address",
	    "TCP address the daemons bind to: an IPv4 address (not a host name, not IPv6)"),
};

enum rt_parse rt_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!text || !*text || (text[0] == '0' && text[1]))
		return RT_PARSE_NOT_A_NUMBER; /* "", or "010" (octal to C, 10 to people) */
	for (const char *p = text; *p; p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (*p < '0' || *p > '9')
			return RT_PARSE_NOT_A_NUMBER;
		if (v > (UINT64_MAX - d) / 10) {
			/* keep scanning: "99999999999999999999x" is not a number */
			for (; *p; p++)
				if (*p < '0' || *p > '9')
					return RT_PARSE_NOT_A_NUMBER;
			return RT_PARSE_OUT_OF_RANGE;
		}
		v = v * 10 + d;
	}
	if (v < min || v > max)
		return RT_PARSE_OUT_OF_RANGE;
	*out = v;
	return RT_PARSE_OK;
}

#define FIELD_COUNT (sizeof(rt_config_fields) / sizeof(rt_config_fields[0]))
const size_t rt_config_field_count = FIELD_COUNT;

/* ------------------------------------------------------------ one field */

/* Longest value text the YAML schema accepts; real limits are per field. */
#define TEXT_MAX 4096

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
	switch (rt_parse_u64(text, f->min, f->max, &v)) {
	case RT_PARSE_NOT_A_NUMBER:
		snprintf(why, why_len, "expects an unsigned integer, got '%s' (decimal digits only)",
			 quoted);
		return false;
	case RT_PARSE_OUT_OF_RANGE:
		snprintf(why, why_len, "is out of range: got '%s', must be %llu to %llu (%s)",
			 quoted, (unsigned long long)f->min, (unsigned long long)f->max, f->unit);
		return false;
	case RT_PARSE_OK:
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
uint64_t rt_config_field_u64(const struct rt_config *cfg, const struct rt_config_field *f)
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

_Static_assert(FIELD_COUNT <= RT_CONFIG_FIELDS_MAX, "raise RT_CONFIG_FIELDS_MAX");

size_t rt_config_field_index(const char *key)
{
	const struct rt_config_field *f = field_find(key, strlen(key));

	return f ? (size_t)(f - rt_config_fields) : SIZE_MAX;
}

const char *rt_nearest_name(const char *given, const void *items, size_t n, size_t stride,
			    size_t name_at)
{
	const char *best = NULL;
	size_t best_d = 3;

	for (size_t i = 0; i < n; i++) {
		const char *name;
		size_t d;

		memcpy(&name, (const char *)items + i * stride + name_at, sizeof(name));
		d = name ? rt_edit_distance(given, name) : SIZE_MAX;
		if (d < best_d) {
			best_d = d;
			best = name;
		}
	}
	return best;
}

size_t rt_edit_distance(const char *a, const char *b)
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
		if (rt_edit_distance(key, rt_config_fields[i].key) <= 2)
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
	struct rt_config_layers *l = malloc(sizeof(*l));
	enum rt_err err;

	if (!l)
		return rt_fail(RT_ENOMEM, "--set %s: out of memory", assignment);
	rt_config_layers_init(l);
	l->cfg = *cfg;
	err = rt_config_layers_set(l, assignment);
	if (!err)
		err = rt_config_layers_finish(l, cfg);
	free(l);
	return err;
}

enum rt_err rt_config_set_layer(struct rt_config *cfg, const char *assignment, bool *given)
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
	if (given)
		given[f - rt_config_fields] = true;
	return RT_EOK;
}

uint64_t rt_config_cycle_ps(const struct rt_config *cfg)
{
	return cfg->clock_mhz ? 1000000 / cfg->clock_mhz : 0;
}

enum rt_topology_kind rt_config_topology(const struct rt_config *cfg)
{
	if (!strcmp(cfg->link_topology, "ring"))
		return RT_TOPOLOGY_RING;
	if (!strcmp(cfg->link_topology, "switch"))
		return RT_TOPOLOGY_SWITCH;
	return RT_TOPOLOGY_UNKNOWN;
}

/* ------------------------------------------------------------ validation */

/* A numeric field outside its documented range (a struct filled by hand
 * or by flags rather than through field_assign). */
static enum rt_err check_range(const struct rt_config *cfg, const struct rt_config_field *f)
{
	uint64_t v = rt_config_field_u64(cfg, f);

	/* a configuration can come as bytes (an agent's job): a string must
	 * end inside its field before anything reads it */
	if (f->type == RT_CFG_STR && !memchr((const char *)cfg + f->offset, '\0', f->size))
		return rt_fail(RT_ECONFIG, "config: %s is not a string of at most %zu bytes", f->key,
			       f->size - 1);
	if (f->type == RT_CFG_STR || (v >= f->min && v <= f->max))
		return RT_EOK;
	return rt_fail(RT_ECONFIG, "config: %s = %llu, must be %llu to %llu (%s)", f->key,
		       (unsigned long long)v, (unsigned long long)f->min,
		       (unsigned long long)f->max, f->unit);
}

/* A cost in cycles must stay a sane number of picoseconds at this clock. */
static enum rt_err check_cost(const struct rt_config *cfg, const struct rt_config_field *f)
{
	uint64_t v = rt_config_field_u64(cfg, f), cycle = rt_config_cycle_ps(cfg);

	if (strcmp(f->unit, "cycles") || v <= RT_CONFIG_MAX_COST_PS / cycle)
		return RT_EOK;
	return rt_fail(RT_ECONFIG, "config: %s = %llu cycles is more than %llu ps at "
		       "machine.clock_mhz = %llu (at most %llu cycles)", f->key,
		       (unsigned long long)v, RT_CONFIG_MAX_COST_PS,
		       (unsigned long long)cfg->clock_mhz,
		       (unsigned long long)(RT_CONFIG_MAX_COST_PS / cycle));
}

/* run.bind_host is what the coordinator binds and every daemon connects
 * to: a dotted IPv4 address. A name ("localhost") cannot be bound, and
 * IPv6 ("::1") is not enabled on the sockets: both are refused here, with
 * what to write instead, rather than failing at the bind. */
static enum rt_err check_bind_host(const char *host)
{
	struct in_addr ip;

	if (inet_pton(AF_INET, host, &ip) == 1)
		return RT_EOK;
	if (!strcmp(host, "localhost"))
		return rt_fail(RT_ECONFIG, "config: run.bind_host 'localhost': a host name cannot be "
			       "bound; give the address (127.0.0.1 for loopback)");
	if (strchr(host, ':'))
		return rt_fail(RT_ECONFIG, "config: run.bind_host '%.63s': IPv6 is not supported; give "
			       "an IPv4 address (127.0.0.1 for loopback)", host);
	return rt_fail(RT_ECONFIG, "config: run.bind_host '%.63s': expected an IPv4 address such as "
		       "127.0.0.1 or 10.0.0.5", host);
}

enum rt_err rt_config_validate(const struct rt_config *cfg)
{
	enum rt_err err = RT_EOK;

	for (size_t i = 0; !err && i < FIELD_COUNT; i++)
		err = check_range(cfg, &rt_config_fields[i]);
	if (err)
		return err;
	if (1000000 % cfg->clock_mhz != 0)
		return rt_fail(RT_ECONFIG,
			       "config: machine.clock_mhz = %llu must divide "
			       "1000000 exactly so a cycle is a whole number of "
			       "picoseconds (e.g. 500, 1000, 1250, 2000)",
			       (unsigned long long)cfg->clock_mhz);
	for (size_t i = 0; !err && i < FIELD_COUNT; i++)
		err = check_cost(cfg, &rt_config_fields[i]);
	for (size_t i = 0; !err && i < FIELD_COUNT; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		if (f->type == RT_CFG_STR && !*((const char *)cfg + f->offset))
			err = rt_fail(RT_ECONFIG, "config: %s is empty", f->key);
	}
	if (!err && rt_config_topology(cfg) == RT_TOPOLOGY_UNKNOWN)
		err = rt_fail(RT_ECONFIG, "config: links.topology = '%.40s': expected ring or switch",
			      cfg->link_topology);
	return err ? err : check_bind_host(cfg->bind_host);
}

/* ------------------------------------------------------------ YAML schema */

#define SECTION_MAX 16

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

/* "gemm.params" and the like: plug-in parameters, which a YAML file may
 * give as a mapping (`params: {cycles: 900}`) or as the `--set` string. */
static bool is_params_key(const char *key)
{
	const char *dot = strchr(key, '.');

	return dot && !strcmp(dot + 1, "params");
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
		if (is_params_key(key)) {
			/* a string or a mapping: read by the libyaml pre-pass */
			f->value.type = CYAML_IGNORE;
			f->value.flags = CYAML_FLAG_OPTIONAL;
			continue;
		}
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

/* Where each key of the document is: "section" and "section.key" with
 * the line of the key, in document order (from the libyaml pre-pass), so
 * errors name the line libyaml saw rather than libcyaml's backtrace. */
#define KEY_LINES_MAX 256
#define PARAMS_MAX SECTION_MAX
struct key_lines {
	char key[KEY_LINES_MAX][SECTION_NAME_MAX + 64];
	size_t line[KEY_LINES_MAX];
	size_t n;
	/* `SECTION.params` values, as the `name=value,...` text `--set`
	 * takes (a mapping joined in document order) */
	struct {
		char key[SECTION_NAME_MAX + 8];
		char text[TEXT_MAX];
		size_t line;
	} params[PARAMS_MAX];
	size_t n_params;
	/* `machine: NAME`, the short form of `machine: {preset: NAME}`: the
	 * name, its line and the bytes of the scalar in the text */
	bool has_machine;
	char machine[TEXT_MAX];
	size_t machine_line, machine_start, machine_end;
};

/* " (line N)" for the `nth` (0: first) occurrence of `key`, or "". */
static const char *key_line(const struct key_lines *kl, const char *key, unsigned nth,
			    char *out, size_t cap)
{
	out[0] = '\0';
	for (size_t i = 0; kl && i < kl->n; i++)
		if (!strcmp(kl->key[i], key) && nth-- == 0) {
			snprintf(out, cap, " (line %zu)", kl->line[i]);
			break;
		}
	return out;
}

/* Turns libcyaml's message into one line naming the origin and the key. */
static enum rt_err cyaml_failure(const struct cyaml_capture *c,
				 const char *origin, cyaml_err_t err,
				 const struct key_lines *kl)
{
	char at[32];

	static const char unexpected[] = "Unexpected key: ";
	static const char twice[] = "Mapping field already seen: ";
	const char *w = c->what;
	char key[200], tip[256];

	if (!strncmp(w, unexpected, sizeof(unexpected) - 1)) {
		capture_key(c, w + sizeof(unexpected) - 1, key, sizeof(key));
		return rt_fail(RT_ECONFIG, "config %s: unknown key '%s'%s%s",
			       origin, key, key_line(kl, key, 0, at, sizeof(at)),
			       hint(key, tip, sizeof(tip)));
	}
	capture_key(c, NULL, key, sizeof(key));
	if (!strncmp(w, twice, sizeof(twice) - 1))
		return rt_fail(RT_ECONFIG, "config %s: key '%s' appears twice%s",
			       origin, key, key_line(kl, key, 1, at, sizeof(at)));
	if (!strncmp(w, "Expecting STRING", 16))
		return rt_fail(RT_ECONFIG, "config %s: key '%s' expects a "
			       "single value, got %s%s", origin, key, event_noun(w + 16),
			       key_line(kl, key, 0, at, sizeof(at)));
	if (!strncmp(w, "Expecting MAPPING", 17) && key[0])
		return rt_fail(RT_ECONFIG, "config %s: key '%s' expects a "
			       "mapping such as '%s: {key: value}', got %s%s",
			       origin, key, key, event_noun(w + 17),
			       key_line(kl, key, 0, at, sizeof(at)));
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
				  const char *origin, const struct key_lines *kl, bool *given)
{
	char why[160], at[32];

	for (size_t n = 0; n < s->nsec; n++) {
		for (size_t i = 0; doc[n] && i < s->count[n]; i++) {
			const struct rt_config_field *f =
				&rt_config_fields[s->first[n] + i];
			if (doc[n][i] && given)
				given[s->first[n] + i] = true;
			if (!doc[n][i] ||
			    field_assign(cfg, f, doc[n][i], why, sizeof(why)))
				continue;
			return rt_fail(RT_ECONFIG, "config %s: key '%s' %s%s",
				       origin, f->key, why,
				       key_line(kl, f->key, 0, at, sizeof(at)));
		}
	}
	return RT_EOK;
}

/* The params values the pre-pass read, through the same parser as --set
 * (the last one given wins, as for any key). */
static enum rt_err apply_params(struct rt_config *cfg, const struct key_lines *kl,
				const char *origin, bool *given)
{
	char why[160];

	for (size_t i = 0; i < kl->n_params; i++) {
		const struct rt_config_field *f = field_find(kl->params[i].key,
							     strlen(kl->params[i].key));

		if (f && !field_assign(cfg, f, kl->params[i].text, why, sizeof(why)))
			return rt_fail(RT_ECONFIG, "config %s: key '%s' %s (line %zu)", origin,
				       f->key, why, kl->params[i].line);
		if (f && given)
			given[f - rt_config_fields] = true;
	}
	if (kl->has_machine) {
		const struct rt_config_field *f = field_find("machine.preset", 14);

		if (!field_assign(cfg, f, kl->machine, why, sizeof(why)))
			return rt_fail(RT_ECONFIG, "config %s: key 'machine' (line %zu): the preset "
				       "name %s", origin, kl->machine_line, why);
		if (given)
			given[f - rt_config_fields] = true;
	}
	return RT_EOK;
}

/* libyaml's own account of a syntax error: problem, context and line. */
static enum rt_err yaml_failure(const yaml_parser_t *p, const char *origin)
{
	/* libyaml's messages are its own constant strings, not user bytes */
	const char *problem = p->problem ? p->problem : "syntax error";
	char context[256];

	if (p->context)
		snprintf(context, sizeof(context), ", %.100s (line %zu, column %zu)", p->context,
			 p->context_mark.line + 1, p->context_mark.column + 1);
	else
		context[0] = '\0';
	return rt_fail(RT_ECONFIG, "config %s: YAML error: %s at line %zu, column %zu%s", origin,
		       problem, p->problem_mark.line + 1, p->problem_mark.column + 1, context);
}

/* Checks the text is well-formed YAML with at most one document, before
 * libcyaml (which reads only the first document and reports syntax errors
 * with a shortened message) sees it. */
/* Follows the event stream far enough to know which scalars are keys:
 * mapping depth, key-or-value per depth, and sequences skipped whole. */
struct key_walk {
	unsigned depth;            /* open mappings */
	unsigned seq;              /* open sequences (their scalars are values) */
	bool want_key[8];          /* per mapping depth: next scalar is a key */
	char section[SECTION_NAME_MAX];
	int params;                /* 1: a params value is next; 2: in its mapping */
	char param_name[TEXT_MAX]; /* in the mapping: the name awaiting its value */
	bool have_name;
	char err[TEXT_MAX + 160];  /* what is wrong with a params value ("" ok) */
	size_t err_line;           /* ... and where */
	bool machine_value;        /* the next value is that of the top-level `machine` */
};

static void walk_value_done(struct key_walk *w)
{
	if (w->depth && w->depth < 8)
		w->want_key[w->depth] = true;
}

/* Appends `name=value` to the params text being built; names and values
 * that the name=value,... form cannot carry are refused. */
static void params_add(struct key_walk *w, struct key_lines *kl, const char *value)
{
	char *text = kl->params[kl->n_params - 1].text;
	size_t used = strlen(text);

	if (!w->param_name[0] || strpbrk(w->param_name, ",="))
		snprintf(w->err, sizeof(w->err), "parameter name '%.200s' must be non-empty and "
			 "without ',' or '='", w->param_name);
	else if (strchr(value, ','))
		snprintf(w->err, sizeof(w->err), "value of parameter '%.200s' may not contain ','",
			 w->param_name);
	else if ((size_t)snprintf(text + used, TEXT_MAX - used, "%s%s=%s", used ? "," : "",
				  w->param_name, value) >= TEXT_MAX - used)
		snprintf(w->err, sizeof(w->err), "is too long (at most %d bytes)", TEXT_MAX - 1);
}

/* A params value: a scalar (the --set string) or a mapping of scalars.
 * True if the event belonged to it. */
static bool params_event(struct key_walk *w, const yaml_event_t *ev, struct key_lines *kl)
{
	bool scalar = ev->type == YAML_SCALAR_EVENT;
	const char *text = scalar ? (const char *)ev->data.scalar.value : "";

	if (!w->params)
		return false;
	w->err_line = ev->start_mark.line + 1; /* where a refusal points */
	if (w->params == 1 && scalar) {
		snprintf(kl->params[kl->n_params - 1].text, TEXT_MAX, "%s", text);
		w->params = 0;
		walk_value_done(w);
	} else if (w->params == 1 && ev->type == YAML_MAPPING_START_EVENT) {
		w->params = 2;
		w->have_name = false;
	} else if (w->params == 2 && scalar) {
		if (w->have_name)
			params_add(w, kl, text);
		else
			snprintf(w->param_name, sizeof(w->param_name), "%s", text);
		w->have_name = !w->have_name;
	} else if (w->params == 2 && ev->type == YAML_MAPPING_END_EVENT) {
		if (!kl->params[kl->n_params - 1].text[0])
			snprintf(kl->params[kl->n_params - 1].text, TEXT_MAX, "none"); /* {} */
		w->params = 0;
		walk_value_done(w);
	} else if (w->params == 2) {
		snprintf(w->err, sizeof(w->err), "value of parameter '%.200s' must be a scalar "
			 "(name: value)", w->have_name ? w->param_name : "?");
	} else {
		snprintf(w->err, sizeof(w->err), "must be a mapping (params: {name: value}) or "
			 "a string (params: \"name=value,...\")");
	}
	return true;
}

/* A `params` key at section level: its value is read by params_event. */
static void params_key(struct key_walk *w, struct key_lines *kl, size_t line)
{
	if (kl->n_params == PARAMS_MAX) {
		snprintf(w->err, sizeof(w->err), "is given more than %d times", PARAMS_MAX);
		return;
	}
	snprintf(kl->params[kl->n_params].key, sizeof(kl->params[0].key), "%s.params",
		 w->section);
	kl->params[kl->n_params].text[0] = '\0';
	kl->params[kl->n_params++].line = line;
	w->params = 1;
}

/* `machine: NAME` (a scalar where the section's mapping would be): keeps
 * the name and where its bytes are, so the loader can hand libcyaml an
 * empty mapping there instead. */
static bool machine_event(struct key_walk *w, const yaml_event_t *ev, struct key_lines *kl)
{
	bool was = w->machine_value;

	w->machine_value = false;
	if (!was || w->depth != 1 || ev->type != YAML_SCALAR_EVENT)
		return false;
	kl->has_machine = true;
	snprintf(kl->machine, sizeof(kl->machine), "%s", (const char *)ev->data.scalar.value);
	kl->machine_line = ev->start_mark.line + 1;
	kl->machine_start = ev->start_mark.index;
	kl->machine_end = ev->end_mark.index;
	walk_value_done(w);
	return true;
}

static void walk_event(struct key_walk *w, const yaml_event_t *ev, struct key_lines *kl)
{
	if (params_event(w, ev, kl) || machine_event(w, ev, kl))
		return;
	if (ev->type == YAML_SEQUENCE_START_EVENT) {
		w->seq++;
	} else if (ev->type == YAML_SEQUENCE_END_EVENT) {
		if (w->seq && !--w->seq)
			walk_value_done(w);
	} else if (w->seq) {
		return;
	} else if (ev->type == YAML_MAPPING_START_EVENT) {
		w->depth++;
		if (w->depth < 8)
			w->want_key[w->depth] = true;
	} else if (ev->type == YAML_MAPPING_END_EVENT) {
		if (w->depth)
			w->depth--;
		walk_value_done(w);
	} else if (ev->type == YAML_SCALAR_EVENT && w->depth < 8 && w->want_key[w->depth]) {
		const char *name = (const char *)ev->data.scalar.value;

		w->want_key[w->depth] = false;
		if (w->depth == 1)
			snprintf(w->section, sizeof(w->section), "%s", name);
		w->machine_value = w->depth == 1 && !strcmp(name, "machine");
		if ((w->depth == 1 || w->depth == 2) && kl->n < KEY_LINES_MAX) {
			snprintf(kl->key[kl->n], sizeof(kl->key[0]), "%s%s%s",
				 w->depth == 2 ? w->section : "", w->depth == 2 ? "." : "", name);
			kl->line[kl->n++] = ev->start_mark.line + 1;
		}
		if (w->depth == 2 && !strcmp(name, "params"))
			params_key(w, kl, ev->start_mark.line + 1);
	} else if (ev->type == YAML_SCALAR_EVENT || ev->type == YAML_ALIAS_EVENT) {
		walk_value_done(w);
	}
}

/* Checks the text is well-formed YAML with at most one document, before
 * libcyaml (which reads only the first document and reports syntax errors
 * with a shortened message) sees it; records where each key is. */
static enum rt_err yaml_precheck(const char *text, size_t len, const char *origin,
				 struct key_lines *kl)
{
	struct key_walk walk = { 0 };
	yaml_parser_t p;
	yaml_event_t ev;
	enum rt_err err = RT_EOK;
	unsigned docs = 0;
	bool done = false;

	kl->n = kl->n_params = 0;
	kl->has_machine = false;
	if (!yaml_parser_initialize(&p))
		return rt_fail(RT_ENOMEM, "config %s: cannot start the YAML parser", origin);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	while (!err && !done) {
		if (!yaml_parser_parse(&p, &ev)) {
			err = yaml_failure(&p, origin);
			break;
		}
		if (ev.type == YAML_DOCUMENT_START_EVENT && ++docs > 1)
			err = rt_fail(RT_ECONFIG, "config %s: a second YAML document starts at "
				      "line %zu; a configuration is one document (merge them, or "
				      "give several --config files)", origin,
				      ev.start_mark.line + 1);
		walk_event(&walk, &ev, kl);
		if (!err && walk.err[0])
			err = rt_fail(RT_ECONFIG, "config %s: key '%s' (line %zu) %s", origin,
				      kl->params[kl->n_params - 1].key,
				      walk.err_line ? walk.err_line : kl->params[kl->n_params - 1].line,
				      walk.err);
		done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	return err;
}

/* `*.model` values that name a relative .so path are relative to the
 * folder of the YAML file that names them, not to the current directory. */
static enum rt_err resolve_paths(struct rt_config *cfg, const struct rt_config *before,
				 const char *base_dir)
{
	for (size_t i = 0; base_dir && i < FIELD_COUNT; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		char *v = (char *)cfg + f->offset, joined[RT_MODEL_NAME_MAX * 2];
		size_t len = strlen(v);

		if (f->type != RT_CFG_STR || !strstr(f->key, ".model") || v[0] == '/' ||
		    !(strchr(v, '/') || (len > 3 && !strcmp(v + len - 3, ".so"))) ||
		    !strcmp(v, (const char *)before + f->offset))
			continue;
		if ((size_t)snprintf(joined, sizeof(joined), "%s/%s", base_dir, v) >= f->size)
			return rt_fail(RT_ECONFIG, "config: key '%s': path %s/%s is longer than %zu "
				       "bytes", f->key, base_dir, v, f->size - 1);
		memcpy(v, joined, strlen(joined) + 1);
	}
	return RT_EOK;
}

/* The text libcyaml reads: `machine: NAME` becomes `machine: {}` padded
 * with spaces (same length and lines, so errors point where they did).
 * NULL when the text has no such scalar (use it as is) or on no memory. */
static char *blank_machine_scalar(const char *text, size_t len, const struct key_lines *kl,
				  bool *no_memory)
{
	char *copy;

	size_t start = kl->machine_start;

	*no_memory = false;
	/* a one-letter name: `{}` takes the space before it too */
	if (kl->has_machine && start + 2 > kl->machine_end && start && text[start - 1] == ' ')
		start--;
	if (!kl->has_machine || kl->machine_end > len || start + 2 > kl->machine_end)
		return NULL;
	copy = malloc(len);
	if (!copy) {
		*no_memory = true;
		return NULL;
	}
	memcpy(copy, text, len);
	for (size_t i = start; i < kl->machine_end; i++)
		if (copy[i] != '\n' && copy[i] != '\r')
			copy[i] = ' ';
	copy[start] = '{';
	copy[start + 1] = '}';
	return copy;
}

static enum rt_err load_text(struct rt_config *cfg, const char *text, size_t len,
			     const char *origin, const char *base_dir, bool *given)
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
	struct key_lines *kl = malloc(sizeof(*kl));
	struct rt_config next = *cfg;
	bool mark[RT_CONFIG_FIELDS_MAX] = { false }, no_memory;
	char ***doc = NULL, *blanked, what[RT_PATH_MAX + 16];
	cyaml_err_t cerr;
	enum rt_err err;

	if (!len) { /* nothing to overlay; also spares libyaml a NULL buffer */
		free(kl);
		return RT_EOK;
	}
	if (!kl)
		return rt_fail(RT_ENOMEM, "config %s: out of memory", origin);
	snprintf(what, sizeof(what), "config %s", origin);
	err = rt_yaml_check_depth(text, len, RT_YAML_MAX_DEPTH, what);
	if (!err)
		err = yaml_precheck(text, len, origin, kl);
	if (err)
		goto out_free_lines;
	blanked = blank_machine_scalar(text, len, kl, &no_memory);
	if (no_memory) {
		err = rt_fail(RT_ENOMEM, "config %s: out of memory", origin);
		goto out_free_lines;
	}
	schema_build(&schema);
	cerr = cyaml_load_data((const uint8_t *)(blanked ? blanked : text), len, &cc,
			       &schema.root, (cyaml_data_t **)&doc, NULL);
	free(blanked);
	if (cerr != CYAML_OK) {
		err = cyaml_failure(&capture, origin, cerr, kl);
		goto out_free_lines;
	}
	if (!doc) /* empty document: nothing to overlay */
		goto out_free_lines;
	err = apply_document(&next, &schema, doc, origin, kl, mark);
	cyaml_free(&cc, &schema.root, doc, 0);
	if (!err)
		err = apply_params(&next, kl, origin, mark);
	if (!err)
		err = resolve_paths(&next, cfg, base_dir);
	if (!err) {
		*cfg = next; /* all or nothing */
		for (size_t i = 0; given && i < FIELD_COUNT; i++)
			given[i] = given[i] || mark[i];
	}
out_free_lines:
	free(kl);
	return err;
}

enum rt_err rt_config_load_layer(struct rt_config *cfg, const char *text, size_t len,
				 const char *origin, bool *given)
{
	return load_text(cfg, text, len, origin, NULL, given);
}

/* One layer applied at once: a text or file that names a preset takes
 * the preset's values for every key it does not give itself. */
static enum rt_err load_one(struct rt_config *cfg, const char *text, size_t len,
			    const char *origin, const char *path)
{
	struct rt_config_layers *l = malloc(sizeof(*l));
	enum rt_err err;

	if (!l)
		return rt_fail(RT_ENOMEM, "config %s: out of memory", origin);
	rt_config_layers_init(l);
	l->cfg = *cfg;
	err = path ? rt_config_layers_file(l, path)
		   : rt_config_layers_text(l, text, len, origin);
	if (!err)
		err = rt_config_layers_finish(l, cfg);
	free(l);
	return err;
}

enum rt_err rt_config_load_text(struct rt_config *cfg, const char *text,
				size_t len, const char *origin)
{
	return load_one(cfg, text, len, origin, NULL);
}

/* The folder holding `path` ("." for a bare name). */
static void dir_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (!slash) {
		path = ".";
		n = 1;
	} else if (n == 0) {
		n = 1; /* "/x.yaml": the root */
	}
	n = n < cap - 1 ? n : cap - 1;
	memcpy(out, path, n);
	out[n] = '\0';
}

enum rt_err rt_config_read_layer(struct rt_config *cfg, const char *path, bool *given)
{
	struct rt_buf text;
	char dir[1024];
	enum rt_err err;

	rt_buf_init(&text);
	if (rt_infile_read(path, "config", RT_CONFIG_FILE_MAX, true, &text)) {
		err = rt_fail(RT_ECONFIG, "%s", rt_last_error());
		goto out_release;
	}
	dir_of(path, dir, sizeof(dir));
	/* a pipe has no folder of its own: relative paths stay as given */
	err = load_text(cfg, text.data, text.len, path,
			strncmp(path, "/dev/", 5) && strncmp(path, "/proc/", 6) ? dir : NULL,
			given);
out_release:
	rt_buf_release(&text);
	return err;
}

enum rt_err rt_config_load_file(struct rt_config *cfg, const char *path)
{
	return load_one(cfg, NULL, 0, path, path);
}
