/* llama.h — the Llama decoder layer as a program of kernels (llama.c,
 * llama_steps.c), written against tl.h and tl_io.h only: the model's
 * dimensions from --arg (Llama-3-70B's by default), tensor parallel over
 * `tp` ranks (Megatron: QKV and gate/up split by columns, O and down by
 * rows, an all-reduce after each), context parallel over `cp` ranks for
 * prefill (ring attention), ranks = tp x cp. docs/model-step.md. */
#ifndef LLAMA_H
#define LLAMA_H

#include <stdbool.h>
#include <stdint.h>

#include "tl.h"
#include "tl_io.h"

struct llama {
	uint32_t hidden, heads_q, heads_kv, head_dim, ffn, layers; /* the model */
	uint32_t batch, seq;   /* sequences; decode: keys attended (the cache
				  plus this token), prefill: prompt tokens */
	uint32_t tp, cp;       /* ranks = tp x cp; rank = c * tp + t */
	uint32_t t, c;         /* this rank's place */
	bool prefill;
	/* per rank */
	uint32_t hq, hk, f;    /* query heads, KV heads, FFN columns */
	uint32_t nqkv;         /* QKV columns: (hq + 2 hk) x head_dim */
	uint32_t tokens;       /* activation rows: decode batch; prefill
				  batch x this rank's seq / cp */
	uint32_t seq_local;    /* prefill: prompt tokens this rank holds */
	double eps, theta;
};

/* Reads and checks the model arguments (every step does: they are the
 * run's --arg). */
void llama_args(struct tl *tl, const struct tl_args *args, bool prefill, struct llama *m);

int llama_decode_step(struct tl *tl, const struct tl_args *args);
int llama_prefill_step(struct tl *tl, const struct tl_args *args);
/* The steps (also usable in a program file of one's own). */
int llama_setup(struct tl *tl, const struct tl_args *args);
int llama_rmsnorm(struct tl *tl, const struct tl_args *args);
int llama_linear(struct tl *tl, const struct tl_args *args);
int llama_rope(struct tl *tl, const struct tl_args *args);
int llama_attention(struct tl *tl, const struct tl_args *args);
int llama_silu_mul(struct tl *tl, const struct tl_args *args);

#endif
