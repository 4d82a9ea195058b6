/* registry.c — the built-in kernels, one line each (name, function, help).
 * Kernels named test_* exist for the integration tests: they are compiled
 * only into the test build (build/bin/kernbench-test, -DKB_TEST_BUILD). */
#include "registry.h"

#include "attn.h"
#include "kernels.h"
#include "llama.h"

const struct tl_kernel_info tl_builtin_kernels[] = {
	TL_KERNEL(gqa_decode_opt2, "GQA flash decode, flat-composite design opt2 (2 composites/tile): --arg heads_q=64 heads_kv=8 head_dim=128 seq_kv=1024 (any length) tile=128 depth=2"),
	TL_KERNEL(gqa_decode_opt3, "GQA flash decode, opt3 (separate ops, pipelined Q·Kᵀ): args as gqa_decode_opt2"),
	TL_KERNEL(gqa_decode_prefetch, "GQA flash decode with explicit K/V prefetch into two persistent buffers across per-tile scopes (tl_load_async_into): --arg prefetch=1|0 (0: blocking loads)"),
	TL_KERNEL(gqa_decode_paged, "batched GQA decode over a paged KV cache (vLLM layout): --arg batch=B lens=L0,L1,... page=128, or --inputs DIR"),
	TL_KERNEL(gqa_prefill, "GQA flash prefill, query blocks x KV tiles: --arg seq_q= seq_kv= causal=1 qblock= opt=2|3"),
	TL_KERNEL(ring_attention, "ring attention over --ranks R: --arg pass=kv|q layout=contiguous|zigzag merge=tree|chain seq_q= seq_kv=(per rank) causal=1"),
	TL_KERNEL(gemm, "C = A·B via a composite with streamed tl_ref operands: --arg m= k= n= (64)"),
	TL_KERNEL(softmax, "row softmax with lazy prefetching loads: --arg rows=64 cols=128 block=16"),
	TL_KERNEL(llama_decode_step, "one Llama decoder layer, decode (docs/model-step.md): --arg batch=1 seq_kv=8192 (keys: cache + this token) hidden=8192 heads_q=64 heads_kv=8 head_dim=128 ffn=28672 layers=80 tp=--ranks"),
	TL_KERNEL(llama_prefill_step, "one Llama decoder layer, prefill of seq_kv tokens: as llama_decode_step, plus cp= (context parallel, ring attention; ranks = tp x cp)"),
	TL_KERNEL(llama_setup, "program step (llama): RoPE tables and permutation into cos, sin, p"),
	TL_KERNEL(llama_rmsnorm, "program step (llama): y = RMSNorm(x [+ r]) * w, the sum into `sum`"),
	TL_KERNEL(llama_linear, "program step (llama): c = a · w, 128 x 128 output tiles over the PEs"),
	TL_KERNEL(llama_rope, "program step (llama): RoPE on qkv's q and k heads, k and v into the cache"),
	TL_KERNEL(llama_attention, "program step (llama): attention over the KV cache into o"),
	TL_KERNEL(llama_silu_mul, "program step (llama): y = silu(gate) * up of gu = [gate | up]"),
	TL_KERNEL(matmul, "program step: tensors a [M,K], b [K,N] -> c [M,N] (rows over the PEs): --arg block=128"),
	TL_KERNEL(add, "program step: tensors a, b [M,N] (b may be 1 x N) -> c = a + b"),
	TL_KERNEL(coll, "program step: a collective of tensor x into y: --arg op=all_reduce|reduce_scatter|all_gather|broadcast algo= span=split|ranks|pes"),
	TL_KERNEL(collective, "one collective on seeded inputs: --arg op=all_reduce|reduce_scatter|all_gather|broadcast n=65536 dtype=f32|f16|bf16 algo=auto|ring|bidir|tree span=ranks|split|pes first= count= stride= root= chunk="),
#ifdef KB_TEST_BUILD
	TL_KERNEL(test_overlap, "test: lazy load vs independent GEMM: --arg part=load|gemm|both serial=0|1"),
	TL_KERNEL(test_loads, "test: lazy, async and blocking loads return the same bytes (data mode)"),
	TL_KERNEL(test_load_into, "test: tl_load_async_into hazards, tl_hbm_write after a lazy load (data mode)"),
	TL_KERNEL(test_flash, "test: flash-decode sweep: --arg tiles= opt=2|3 scoped=0|1 g= tile= d="),
	TL_KERNEL(test_ops, "test: every tl op on seeded inputs, results as .npy (data mode)"),
	TL_KERNEL(test_ipcq, "test: ring send right / receive left (--ranks 2+)"),
	TL_KERNEL(test_reduce, "test: tl_sum / tl_max (max=1) of a seeded rows x cols along axis=0|1, as y.npy (data mode)"),
	TL_KERNEL(test_overflow, "test: a kernel that overflows its stack"),
	TL_KERNEL(test_dma_sweep, "test: n back-to-back lazy loads of rows x cols f16 (a DMA-bound sweep): --arg n= rows= cols="),
	TL_KERNEL(test_chain, "test: one dependent chain load, exp, dot, store (ring=1: and round the ring) on program 0: --arg steps= rows= ring=0|1"),
	TL_KERNEL(test_no_wait, "test: a composite (and a dot, a MATH op, a store) reading a running fill is dispatched at once; a load's first use waits: --arg rows= cols= use=composite|dot|math|store|load"),
#endif
};
const size_t tl_builtin_count =
	sizeof(tl_builtin_kernels) / sizeof(tl_builtin_kernels[0]);
