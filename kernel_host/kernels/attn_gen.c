/* attn_gen.c — the seeded input generator of the attention kernels:
 * standard normal samples (Box-Muller over splitmix64), rounded to fp16. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attn.h"

uint64_t attn_mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

float attn_normal(uint64_t seed, uint32_t which, uint64_t index)
{
	uint64_t base = attn_mix(seed ^ attn_mix((uint64_t)which + 1));
	uint64_t pair = index >> 1;
	double u1 = (double)((attn_mix(base + 2 * pair) >> 11) + 1) * 0x1.0p-53;
	double u2 = (double)(attn_mix(base + 2 * pair + 1) >> 11) * 0x1.0p-53;
	double r = sqrt(-2.0 * log(u1));
	double z = (index & 1) ? r * sin(2.0 * M_PI * u2) : r * cos(2.0 * M_PI * u2);

	return tl_f16_to_f32(tl_f32_to_f16((float)z));
}

void attn_normal_fill(uint64_t seed, uint32_t which, uint64_t first, uint64_t n, float *out)
{
	uint64_t base = attn_mix(seed ^ attn_mix((uint64_t)which + 1));
	uint64_t end = first + n;

	for (uint64_t pair = first >> 1; 2 * pair < end; pair++) {
		/* exactly attn_normal's operations, each done once per pair */
		double u1 = (double)((attn_mix(base + 2 * pair) >> 11) + 1) * 0x1.0p-53;
		double u2 = (double)(attn_mix(base + 2 * pair + 1) >> 11) * 0x1.0p-53;
		double r = sqrt(-2.0 * log(u1)), sn, cs;

		/* glibc's sincos gives sin's and cos's bits (same reductions and
		 * polynomials; checked on 5e7 angles, and test attn_gen) */
		sincos(2.0 * M_PI * u2, &sn, &cs);
		if (2 * pair >= first)
			*out++ = tl_f16_to_f32(tl_f32_to_f16((float)(r * cs)));
		if (2 * pair + 1 < end)
			*out++ = tl_f16_to_f32(tl_f32_to_f16((float)(r * sn)));
	}
}

void attn_npy_rows(struct tl *tl, const char *file, const uint64_t shape[3], uint64_t row,
		   uint64_t n, const uint16_t *bits)
{
	char path[1200], hdr[160];
	uint64_t rowb = shape[2] * 2, total;
	size_t pad;
	int len, fd;

	if (!tl_output_file(tl, file, path, sizeof(path)))
		return;
	/* the header rt_npy_write and attn_common.c's o.npy writer give */
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
	/* no O_TRUNC: the other PEs' rows stay; all write the same header and size */
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		tl_fail(tl, "cannot open %s for writing", path);
	if (pwrite(fd, hdr, pad, 0) != (ssize_t)pad || ftruncate(fd, (off_t)total) ||
	    pwrite(fd, bits, n * rowb, (off_t)(pad + row * rowb)) != (ssize_t)(n * rowb)) {
		close(fd);
		tl_fail(tl, "cannot write %s", path);
	}
	close(fd);
}
