/* elf_syms.c — exported function names from an ELF .dynsym, bounds-checked
 * (outside bytes: tests/fuzz/fuzz_elf.c). Headers are copied out with
 * memcpy, so a misaligned table is no undefined behaviour. */
#include "rt/elf_syms.h"

#include <elf.h>
#include <stdint.h>
#include <string.h>

/* Whether [off, off + size) lies inside a file of `len` bytes. */
static int in_file(uint64_t off, uint64_t size, size_t len)
{
	return off <= len && size <= len - off;
}

static enum rt_err section(const unsigned char *d, size_t len, const Elf64_Ehdr *eh,
			   uint32_t i, Elf64_Shdr *out)
{
	if (i >= eh->e_shnum)
		return rt_fail(RT_EINVAL, "section %u is not in the section table", i);
	memcpy(out, d + eh->e_shoff + (uint64_t)i * sizeof(*out), sizeof(*out));
	if (out->sh_type != SHT_NOBITS && !in_file(out->sh_offset, out->sh_size, len))
		return rt_fail(RT_EINVAL, "section %u lies outside the file", i);
	return RT_EOK;
}

static enum rt_err check_header(const unsigned char *d, size_t len, Elf64_Ehdr *eh)
{
	if (len < sizeof(*eh) || memcmp(d, ELFMAG, SELFMAG))
		return rt_fail(RT_EINVAL, "not an ELF file");
	memcpy(eh, d, sizeof(*eh));
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB :
									   ELFDATA2MSB))
		return rt_fail(RT_EINVAL, "not a 64-bit ELF file of this machine's byte order");
	if (eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_file(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), len))
		return rt_fail(RT_EINVAL, "ELF section table lies outside the file");
	return RT_EOK;
}

static enum rt_err each_symbol(const unsigned char *d, const Elf64_Shdr *sym,
			       const Elf64_Shdr *str, void (*fn)(void *, const char *), void *ctx)
{
	const char *names = (const char *)d + str->sh_offset;

	if (sym->sh_entsize != sizeof(Elf64_Sym) || str->sh_type != SHT_STRTAB)
		return rt_fail(RT_EINVAL, "malformed ELF dynamic symbol table");
	for (uint64_t i = 0; i < sym->sh_size / sizeof(Elf64_Sym); i++) {
		Elf64_Sym s;
		unsigned bind;

		memcpy(&s, d + sym->sh_offset + i * sizeof(s), sizeof(s));
		bind = ELF64_ST_BIND(s.st_info);
		if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF ||
		    (bind != STB_GLOBAL && bind != STB_WEAK))
			continue;
		if (s.st_name >= str->sh_size ||
		    !memchr(names + s.st_name, '\0', str->sh_size - s.st_name))
			return rt_fail(RT_EINVAL, "ELF symbol %llu has a name outside its table",
				       (unsigned long long)i);
		fn(ctx, names + s.st_name);
	}
	return RT_EOK;
}

/* The dynamic symbol table and its strings, or an error. */
static enum rt_err dynsym(const unsigned char *d, size_t len, Elf64_Ehdr *eh, Elf64_Shdr *sym,
			  Elf64_Shdr *str)
{
	enum rt_err err = check_header(d, len, eh);

	for (uint32_t i = 0; !err && i < eh->e_shnum; i++) {
		err = section(d, len, eh, i, sym);
		if (err || sym->sh_type != SHT_DYNSYM)
			continue;
		err = section(d, len, eh, sym->sh_link, str);
		if (!err && (sym->sh_entsize != sizeof(Elf64_Sym) || str->sh_type != SHT_STRTAB))
			err = rt_fail(RT_EINVAL, "malformed ELF dynamic symbol table");
		return err;
	}
	return err ? err : rt_fail(RT_EINVAL, "ELF file has no dynamic symbol table");
}

enum rt_err rt_elf_u32(const void *data, size_t len, const char *name, uint32_t *out)
{
	const unsigned char *d = data;
	Elf64_Ehdr eh;
	Elf64_Shdr sym, str, home;
	enum rt_err err = dynsym(d, len, &eh, &sym, &str);
	const char *names = (const char *)d + str.sh_offset;

	for (uint64_t i = 0; !err && i < sym.sh_size / sizeof(Elf64_Sym); i++) {
		Elf64_Sym s;

		memcpy(&s, d + sym.sh_offset + i * sizeof(s), sizeof(s));
		if (ELF64_ST_TYPE(s.st_info) != STT_OBJECT || s.st_shndx == SHN_UNDEF ||
		    s.st_shndx >= SHN_LORESERVE || s.st_name >= str.sh_size ||
		    !memchr(names + s.st_name, '\0', str.sh_size - s.st_name) ||
		    strcmp(names + s.st_name, name))
			continue;
		err = section(d, len, &eh, s.st_shndx, &home);
		if (err)
			return err;
		/* its bytes: an offset into the section that holds it */
		if (home.sh_type == SHT_NOBITS || s.st_size != sizeof(*out) ||
		    s.st_value < home.sh_addr || s.st_value - home.sh_addr > home.sh_size ||
		    home.sh_size - (s.st_value - home.sh_addr) < sizeof(*out))
			return rt_fail(RT_EINVAL, "ELF symbol %s is not a 4-byte value in the file", name);
		memcpy(out, d + home.sh_offset + (s.st_value - home.sh_addr), sizeof(*out));
		return RT_EOK;
	}
	return err ? err : RT_ENOTFOUND;
}

enum rt_err rt_elf_functions(const void *data, size_t len,
			     void (*fn)(void *ctx, const char *name), void *ctx)
{
	const unsigned char *d = data;
	Elf64_Ehdr eh;
	Elf64_Shdr sym, str;
	enum rt_err err = dynsym(d, len, &eh, &sym, &str);

	return err ? err : each_symbol(d, &sym, &str, fn, ctx);
}
