/* hbm_probe.c — a bandwidth probe: every PE of every rank issues `loads`
 * reads of `rows` x 128 f16 from its own HBM region at once, then waits for
 * them all. Aggregate read bandwidth = all bytes / latency; with the shared
 * memory model it grows with the PE count until the rank's HBM saturates
 * (tests/integration/test_hbm.c).
 *
 *   kernbench run build/plugins/hbm_probe.so:hbm_probe --arg loads=16 */
#include "tl.h"

#define MAX_LOADS 64

int hbm_probe(struct tl *tl, const struct tl_args *args);

int hbm_probe(struct tl *tl, const struct tl_args *args)
{
	uint32_t rows = tl_arg_u32(args, "rows", 128, 1, 65536);
	uint64_t loads = tl_arg_u32(args, "loads", 8, 1, MAX_LOADS);
	uint64_t tile = 2ull * rows * 128;
	uint64_t base = (uint64_t)tl_program_id(tl) * loads * tile;
	tl_future f[MAX_LOADS];

	for (uint64_t i = 0; i < loads; i++)
		f[i] = tl_load_async(tl, base + i * tile, rows, 128, TL_F16);
	for (uint64_t i = 0; i < loads; i++)
		tl_wait(tl, f[i]);
	return 0;
}
