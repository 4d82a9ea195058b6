/* elf_syms.h — the function names a shared object exports, read from its
 * ELF dynamic symbol table without loading it (a constructor in a user's
 * object must not run inside the launcher). The bytes are the user's: every
 * offset and size is checked against the file. */
#ifndef RT_ELF_SYMS_H
#define RT_ELF_SYMS_H

#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

/* Calls `fn` with each defined global or weak function symbol of the
 * 64-bit native-endian ELF `data` (its NUL-terminated name lies inside
 * `data`). RT_EINVAL with one line when the bytes are not such an ELF. */
enum rt_err rt_elf_functions(const void *data, size_t len,
			     void (*fn)(void *ctx, const char *name), void *ctx);

/* The 4-byte value of the defined data symbol `name` (an exported const
 * uint32_t, read from the file's bytes); RT_ENOTFOUND (no line) when the
 * object has none, RT_EINVAL with one line when the bytes are not such an
 * ELF or the symbol lies outside them. */
enum rt_err rt_elf_u32(const void *data, size_t len, const char *name, uint32_t *out);

#endif
