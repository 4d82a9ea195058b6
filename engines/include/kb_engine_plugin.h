/* kb_engine_plugin.h — the engine-model plug-in interface, self-contained.
 *
 * An engine model plug-in is a shared object that exports one symbol,
 * `kb_engine_plugin` (a `const struct kb_engine_plugin`). kernbench loads it
 * when an engine's model is a path (`--set gemm.model=/path/lib.so`), hands
 * it its own parameters (`--set gemm.params=cycles=900,...`, or under
 * `gemm:` in a YAML config `params: {cycles: 900}`, a block mapping, or
 * `params: "cycles=900"`; all three arrive alike), and asks it how many
 * cycles each stage occupies the engine. The data effect of a stage (data
 * mode) stays the built-in model's, so results never depend on a timing
 * plug-in.
 *
 * Build outside the tree with only this header:
 *     cc -std=c17 -fPIC -shared $(pkg-config --cflags kernbench) -o my.so my.c
 * Nothing here exposes kernbench's wire format or its generated types; the
 * ABI version below is checked when the plug-in is loaded. */
#ifndef KB_ENGINE_PLUGIN_H
#define KB_ENGINE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define KB_ENGINE_PLUGIN_ABI 4u /* 4: declared parameters; 3: queued, lead_cycles,
				  * stationary_held; 3 and 2 still load */
#define KB_ENGINE_PLUGIN_SYMBOL "kb_engine_plugin"

enum kb_engine_class { KB_ENGINE_DMA = 0, KB_ENGINE_GEMM = 1, KB_ENGINE_MATH = 2 };

/* One `name=value` parameter from the configuration, as text. */
struct kb_plugin_param {
	const char *name;
	const char *value;
};

/* ABI 4: a parameter the plug-in declares. kernbench checks every given
 * value against its declaration before any daemon starts (a known name,
 * with a did-you-mean; the type; the range), fills in the default, lists
 * it under `kernbench config`, and hands create() every declared
 * parameter, in declaration order, with its value normalised (an INT in
 * plain decimal); the texts live until create() returns: keep what you need. A plug-in that declares none (n_params 0) gets the
 * given pairs unchecked, as under ABI 3. */
enum kb_param_type {
	KB_PARAM_INT = 0,  /* unsigned decimal integer, min..max */
	KB_PARAM_REAL = 1, /* finite decimal number, min..max */
	KB_PARAM_TEXT = 2, /* any text without ',' */
};

struct kb_param_decl {
	const char *name;          /* letters, digits, '_' */
	enum kb_param_type type;
	const char *unit;          /* "cycles", "bytes", "" for none */
	double min, max;           /* INT and REAL: the inclusive range */
	const char *default_value; /* as text; NULL: the parameter is required */
	const char *description;   /* one line, for `kernbench config` */
};

/* The value of declared parameter `name` in what create() received
 * (ABI 4: kernbench checked it against its declaration), or NULL. */
static inline const char *kb_param_text(const struct kb_plugin_param *params, size_t n,
					const char *name)
{
	for (size_t i = 0; i < n; i++) {
		const char *a = params[i].name, *b = name;

		while (*a && *a == *b)
			a++, b++;
		if (*a == *b)
			return params[i].value;
	}
	return NULL;
}

/* A declared KB_PARAM_INT's value (0 if absent). */
static inline uint64_t kb_param_int(const struct kb_plugin_param *params, size_t n,
				    const char *name)
{
	const char *t = kb_param_text(params, n, name);
	uint64_t v = 0;

	while (t && *t >= '0' && *t <= '9')
		v = v * 10 + (uint64_t)(*t++ - '0');
	return v;
}

/* A declared KB_PARAM_REAL's value (0 if absent). */
static inline double kb_param_real(const struct kb_plugin_param *params, size_t n,
				   const char *name)
{
	const char *t = kb_param_text(params, n, name);

	return t ? strtod(t, NULL) : 0.0;
}

/* What a model may know about a stage (see docs/stages.md). */
struct kb_stage_info {
	const char *op_kind;   /* "memory", "gemm", "math" */
	const char *op_name;   /* "dma_read", "dma_write", "gemm", "exp", ... */
	uint64_t bytes;        /* bytes the stage moves or reads (DMA: the piece one
	                        * of the channel's queues moves, dma.queues) */
	uint64_t elements;     /* elements it produces */
	uint64_t m, k, n;      /* GEMM stages: C[m x n] += A[m x k] B[k x n]; else 0 */
	uint64_t command;      /* the command (composite) it belongs to */
	uint32_t index;        /* its index in that command's plan */
	/* ABI 3: where it stands in the engine's stream (docs/stages.md) */
	uint32_t queued;          /* 1: it arrived while the previous stage ran */
	uint64_t lead_cycles;     /* queued: cycles from its arrival to that end */
	uint32_t stationary_held; /* GEMM, 1: the array still holds its B tile */
};

struct kb_engine_plugin {
	uint32_t abi;                     /* KB_ENGINE_PLUGIN_ABI */
	enum kb_engine_class engine;      /* the class it models */
	const char *name;                 /* for messages */
	/* Checks and keeps its parameters; on a bad one returns non-zero with
	 * one line in `err` naming it. May be NULL (then no parameter is
	 * accepted). *state is passed to latency and destroy. */
	int (*create)(const struct kb_plugin_param *params, size_t n_params, void **state,
		      char *err, size_t err_cap);
	/* Cycles the stage occupies the engine; non-zero + `err` on failure. */
	int (*latency)(const void *state, const struct kb_stage_info *stage, uint64_t *cycles,
		       char *err, size_t err_cap);
	void (*destroy)(void *state);     /* may be NULL */
	/* ABI 4: the parameters it takes (read only when abi >= 4) */
	const struct kb_param_decl *params;
	size_t n_params;
};

#endif
