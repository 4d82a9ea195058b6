/* ipcq_probe.c — every PE of every rank sends one rows x cols f16 tile to
 * its right neighbour and waits for the one from its left. With several PEs
 * per rank all sends leave at the same kernel time and share the rank's
 * link, so the last one arrives P serialisations after the start
 * (tests/integration/test_hbm.c).
 *
 *   kernbench run build/plugins/ipcq_probe.so:ipcq_probe --ranks 2 --pes 4 */
#include "tl.h"

int ipcq_probe(struct tl *tl, const struct tl_args *args);

int ipcq_probe(struct tl *tl, const struct tl_args *args)
{
	uint32_t rows = tl_arg_u32(args, "rows", 64, 1, 65536);
	uint32_t cols = tl_arg_u32(args, "cols", 128, 1, 65536);
	tl_tensor t = tl_zeros(tl, rows, cols, TL_F16);
	tl_future f;

	tl_send(tl, TL_RIGHT, t);
	f = tl_recv_async(tl, TL_LEFT, rows, cols, TL_F16);
	tl_wait(tl, f);
	return 0;
}
