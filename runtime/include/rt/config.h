/* config.h — the hardware and run configuration.
 *
 * One flat table of fields (rt_config_fields) is the single source of truth:
 * it gives each field's dotted key, type, default, unit and one-line doc. The
 * YAML loader (libcyaml, schema-validated), `--set key=value` and the
 * generated docs (`kernbench config`) all read it.
 *
 * All times are integer picoseconds or integer cycles of the PE clock; no
 * field is floating point except data-mode scalars, so config never lets a
 * float decide event order. */
#ifndef RT_CONFIG_H
#define RT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

#define RT_MODEL_NAME_MAX 256
#define RT_PATH_MAX 1024

/* The one parser of unsigned numbers from users (--arg, --set, YAML,
 * --seed; in config.c, job.h's users see it through this header): decimal
 * digits only (no sign, blank, 0x or octal prefix; a leading zero only in
 * "0"), overflow-checked, inclusive range [min, max]. */
enum rt_parse { RT_PARSE_OK, RT_PARSE_NOT_A_NUMBER, RT_PARSE_OUT_OF_RANGE };
enum rt_parse rt_parse_u64(const char *text, uint64_t min, uint64_t max,
			   uint64_t *out);

#define RT_PRESET_NAME_MAX 64

struct rt_config {
	/* machine */
	char machine_preset[RT_PRESET_NAME_MAX]; /* the preset it starts from */
	uint32_t ranks;            /* chips; --ranks overrides */
	uint32_t pes;              /* PEs per rank; --pes overrides */
	uint64_t clock_mhz;        /* PE clock, MHz; cycle_ps = 1e6 / clock_mhz */

	/* memory */
	uint64_t hbm_bytes;        /* HBM per rank, bytes */
	uint64_t tcm_scratch_bytes;/* kernel scratch per PE (host arenas) */
	uint64_t tcm_staging_bytes;/* scheduler staging per PE, after scratch */

	/* PE_DMA: one read and one write channel, each spread over
	 * dma_queues queues (engines) that move one transfer's rows in
	 * parallel (engines/README.md, "DMA queues") */
	uint64_t dma_setup_cycles;     /* fixed cost per transfer */
	uint64_t dma_bytes_per_cycle;  /* per queue */
	uint64_t dma_outstanding;      /* transfers in flight per channel */
	uint32_t dma_queues;           /* queues per channel */
	uint32_t dma_rows_per_queue;   /* fewest rows a queue takes of one transfer */

	/* HBM of one rank, shared by its DMA channels (engines/src/hbm) */
	char hbm_model[RT_MODEL_NAME_MAX]; /* "shared", "ideal" or path.so */
	uint64_t hbm_bytes_per_cycle;  /* rank peak at the PE clock */
	uint32_t hbm_channels;         /* each serves 1/channels of the peak */
	uint64_t hbm_interleave_bytes; /* address block per channel */
	uint64_t hbm_latency_cycles;   /* pipelined access latency */

	/* PE_GEMM */
	char gemm_model[RT_MODEL_NAME_MAX]; /* "systolic", "roofline" or path.so */
	char gemm_params[RT_MODEL_NAME_MAX]; /* plug-in parameters "a=1,b=2" or "none" */
	uint32_t gemm_array_rows;      /* systolic array rows (K per pass) */
	uint32_t gemm_array_cols;      /* systolic array cols (N per pass) */
	uint64_t gemm_setup_cycles;
	uint32_t gemm_weight_double_buffer; /* systolic: 1 hides weight loads */
	uint64_t gemm_macs_per_cycle;  /* roofline peak (0: array_rows x array_cols) */
	uint64_t gemm_bytes_per_cycle; /* roofline operand bandwidth (0: the array's edges) */
	uint32_t gemm_moving_max;      /* tensor_engine: moving rows per instruction */
	uint64_t gemm_min_cycles;      /* tensor_engine: instruction floor min(this, N) */
	uint32_t gemm_f32_factor;      /* tensor_engine: float32 inputs cost this many times */
	uint64_t gemm_clock_mhz;       /* tensor_engine: engine clock (0: the PE clock) */
	uint32_t gemm_buffers;         /* scheduler staging slots per streamed operand */
	uint32_t gemm_tile_m;          /* scheduler tile sizes */
	uint32_t gemm_tile_n;
	uint32_t gemm_tile_k;

	/* PE_MATH */
	char math_model[RT_MODEL_NAME_MAX]; /* "simd" or path.so */
	char math_params[RT_MODEL_NAME_MAX]; /* plug-in parameters "a=1,b=2" or "none" */
	uint32_t math_lanes;           /* elements per cycle */
	uint64_t math_setup_cycles;
	uint64_t math_cycles_per_elem; /* simple ops (add, mul, max, copy) */
	uint64_t math_exp_cycles_per_elem; /* transcendental ops (exp*) */
	uint64_t math_reduce_cycles_per_elem;

	char dma_model[RT_MODEL_NAME_MAX]; /* "linear" or path.so */
	char dma_params[RT_MODEL_NAME_MAX]; /* plug-in parameters "a=1,b=2" or "none" */

	/* links (doorbell latencies), at least one cycle each */
	uint64_t link_host_sched_cycles;
	uint64_t link_sched_engine_cycles;
	uint64_t link_ipcq_cycles;         /* rank-to-rank latency */
	uint64_t ipcq_bytes_per_cycle;     /* rank-to-rank bandwidth */
	char link_topology[16];            /* "ring" or "switch" (rt_config_topology) */
	uint64_t link_pe_sync_cycles;      /* PE-to-PE notification in a rank */

	/* dispatch cost (dispatch-cost design): FIXED + R * logical_bytes cycles */
	uint64_t dispatch_fixed_cycles;
	uint64_t dispatch_cycles_per_kib;  /* R * 1024 (0.0625 c/B -> 64) */
	uint64_t max_composite_logical_bytes;

	/* energy per action (femtojoules) and static power (microwatts):
	 * what summary.json's "energy" prices the run's op counts with */
	uint64_t energy_mac_f16_fj;
	uint64_t energy_mac_bf16_fj;
	uint64_t energy_mac_f32_fj;
	uint64_t energy_math_op_fj;      /* simple and reduction element ops */
	uint64_t energy_math_exp_fj;     /* transcendental element ops */
	uint64_t energy_tcm_read_fj;     /* per byte */
	uint64_t energy_tcm_write_fj;    /* per byte */
	uint64_t energy_hbm_fj;          /* per byte read or written */
	uint64_t energy_link_fj;         /* per byte sent over an IPCQ link */
	uint64_t energy_gemm_static_uw;  /* per engine instance */
	uint64_t energy_math_static_uw;
	uint64_t energy_dma_static_uw;
	uint64_t energy_cpu_static_uw;   /* PE_CPU (the kernel host) */

	/* run */
	uint64_t watchdog_ms;      /* wall ms without progress before abort */
	uint32_t critical_path;    /* 1: messages carry critical paths (ADR 0030) */
	char bind_host[64];        /* tcp bind address (loopback default) */
};

enum rt_config_type { RT_CFG_U32, RT_CFG_U64, RT_CFG_STR };

struct rt_config_field {
	const char *key;     /* dotted: "dma.bytes_per_cycle" */
	enum rt_config_type type;
	size_t offset;       /* into struct rt_config */
	size_t size;         /* for strings: buffer size */
	const char *def;     /* default, as text */
	const char *unit;    /* "cycles", "bytes", "MHz", ... */
	const char *doc;     /* one line */
	uint64_t min, max;   /* numbers: inclusive range (documented) */
};

/* Longest simulated time one configured cost may take: every field in
 * cycles, times the cycle in ps, stays at or below this (1 simulated
 * second), so sums of many costs stay far from 2^64 ps. */
#define RT_CONFIG_MAX_COST_PS 1000000000000ULL

extern const struct rt_config_field rt_config_fields[];
extern const size_t rt_config_field_count;

/* Fill `cfg` with every field's default. */
void rt_config_defaults(struct rt_config *cfg);
/* Load a YAML file over `cfg`. Unknown key, wrong type, missing file:
 * RT_ECONFIG with a line naming the file and key. The file is read once,
 * at most RT_CONFIG_FILE_MAX bytes; a regular file or a pipe (`<(...)`,
 * /dev/stdin), nothing else. A relative plugin path (`*.model` naming a
 * .so) resolves against the file's folder. */
#define RT_CONFIG_FILE_MAX (1u << 20)
enum rt_err rt_config_load_file(struct rt_config *cfg, const char *path);
/* Load YAML text (for tests and fuzzing); `origin` names it in errors.
 * Exactly one YAML document; syntax errors carry libyaml's whole message
 * and the line. */
enum rt_err rt_config_load_text(struct rt_config *cfg, const char *text,
				size_t len, const char *origin);
/* Apply one "key=value" override. */
enum rt_err rt_config_set(struct rt_config *cfg, const char *assignment);
/* Check cross-field rules (nonzero clock, links >= 1 cycle, ...). */
enum rt_err rt_config_validate(const struct rt_config *cfg);

/* ---- layers and machine presets (runtime/src/config_layers.c)
 *
 * A configuration is built in layers:
 *
 *   defaults < the preset's values < each --config file in order
 *            < each --set < --ranks / --pes (the caller's flags)
 *
 * The preset is named by `--machine NAME`, else by the last `machine.preset`
 * a file or a --set gives (`machine: NAME` in YAML is the short form of
 * `machine: {preset: NAME}`). Its values sit under every key a file or a
 * --set gives, whatever their order: a preset changes only the keys nobody
 * named. Presets are the YAML files of deploy/configs/machines/ (installed
 * to PREFIX/share/kernbench/machines/); a NAME with a '/' or ending in
 * .yaml is a file of that form. Unnamed, the machine is the built-in
 * defaults, which are the default preset's values (RT_DEFAULT_PRESET). */
#define RT_DEFAULT_PRESET "trn2"
#define RT_CONFIG_FIELDS_MAX 96

struct rt_config_layers {
	struct rt_config cfg;              /* the values so far */
	bool given[RT_CONFIG_FIELDS_MAX];  /* set by a file or a --set */
	char preset[RT_PRESET_NAME_MAX];   /* named by --machine */
	bool forced;                       /* named by --machine: files cannot rename it */
	char preset_path[1024];            /* the file it resolved to (after finish) */
};

void rt_config_layers_init(struct rt_config_layers *l);
/* One --config file / one --set over what is there (RT_ECONFIG naming it). */
enum rt_err rt_config_layers_file(struct rt_config_layers *l, const char *path);
enum rt_err rt_config_layers_text(struct rt_config_layers *l, const char *text, size_t len,
				  const char *origin);
enum rt_err rt_config_layers_set(struct rt_config_layers *l, const char *assignment);
/* `--machine NAME`: names the preset whatever the files and --set name. */
enum rt_err rt_config_layers_machine(struct rt_config_layers *l, const char *name);
/* Applies the preset under the given keys (an unknown name is RT_ECONFIG
 * with a did-you-mean and the list of presets) and writes the result, not
 * yet validated, to *out. */
enum rt_err rt_config_layers_finish(struct rt_config_layers *l, struct rt_config *out);

/* The file of preset `name` (a path, or NAME.yaml in the first presets
 * folder that has it) into `path`; RT_ECONFIG with a did-you-mean and the
 * list when there is none. */
enum rt_err rt_config_preset_path(const char *name, char *path, size_t cap);
/* The preset names found, sorted, comma-separated, into `out` ("" if none),
 * and the folders searched. */
void rt_config_preset_list(char *out, size_t cap);

/* Levenshtein distance of two short strings (63 bytes or more: SIZE_MAX),
 * for "did you mean" hints. */
size_t rt_edit_distance(const char *a, const char *b);
/* Of `n` items of `stride` bytes, each with a `const char *` name `name_at`
 * bytes in, the name within two edits of `given` (the closest, the first
 * of equals), or NULL: what a "did you mean" names. */
const char *rt_nearest_name(const char *given, const void *items, size_t n, size_t stride,
			    size_t name_at);

/* Picoseconds per PE cycle. */
uint64_t rt_config_cycle_ps(const struct rt_config *cfg);

/* How the ranks are joined (links.topology). */
enum rt_topology_kind { RT_TOPOLOGY_RING, RT_TOPOLOGY_SWITCH, RT_TOPOLOGY_UNKNOWN };
enum rt_topology_kind rt_config_topology(const struct rt_config *cfg);

#endif
