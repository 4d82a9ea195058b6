/* trace.c — binary trace records: writing parts, filters, reading parts. */
#include "rt/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PATH 2048

/* ---------------------------------------------------------------- writer */

void rt_trace_writer_init(struct rt_trace_writer *w)
{
	memset(w, 0, sizeof(*w));
	rt_buf_init(&w->recs);
	for (unsigned i = 0; i < RT_TRACE_TRACKS; i++)
		w->track_name[i] = RT_TRACE_NONE;
}

void rt_trace_writer_release(struct rt_trace_writer *w)
{
	for (uint32_t i = 0; i < w->n_names; i++)
		free(w->names[i]);
	free(w->names);
	rt_buf_release(&w->recs);
	if (w->file)
		fclose(w->file);
	memset(w, 0, sizeof(*w));
}

/* A component names a few dozen distinct things (op names, call sites), so
 * a scan from the most recent entry is cheap. */
uint16_t rt_trace_intern(struct rt_trace_writer *w, const char *s)
{
	char *copy;

	for (uint32_t i = w->n_names; i-- > 0;)
		if (w->names[i][0] == s[0] && !strcmp(w->names[i], s))
			return (uint16_t)i;
	if (w->n_names >= RT_TRACE_MAX_NAMES) {
		w->full = true;
		return RT_TRACE_NONE;
	}
	if (w->n_names == w->cap_names) {
		uint32_t cap = w->cap_names ? w->cap_names * 2 : 32;
		char **grown = realloc(w->names, cap * sizeof(*grown));

		if (!grown)
			return RT_TRACE_NONE;
		w->names = grown;
		w->cap_names = cap;
	}
	copy = strdup(s);
	if (!copy)
		return RT_TRACE_NONE;
	w->names[w->n_names] = copy;
	return (uint16_t)w->n_names++;
}

void rt_trace_name_track(struct rt_trace_writer *w, unsigned track, const char *name)
{
	if (track < RT_TRACE_TRACKS && w->track_name[track] == RT_TRACE_NONE)
		w->track_name[track] = rt_trace_intern(w, name);
}

enum rt_err rt_trace_put(struct rt_trace_writer *w, const struct rt_trace_rec *r)
{
	return rt_buf_append(&w->recs, r, sizeof(*r));
}

/* The string table goes after the records, in the same file, followed by
 * its length and RT_TRACE_TAIL_MAGIC: one file per part, not two (the
 * file system's cost of creating and removing a file was a good part of a
 * short run's; ADR 0062). */
static enum rt_err write_tail(const struct rt_trace_writer *w, FILE *f, const char *stem)
{
	uint64_t tail[2] = { sizeof(w->track_name), RT_TRACE_TAIL_MAGIC };
	bool ok = fwrite(w->track_name, 1, sizeof(w->track_name), f) == sizeof(w->track_name);

	for (uint32_t i = 0; ok && i < w->n_names; i++) {
		size_t n = strlen(w->names[i]) + 1;

		ok = fwrite(w->names[i], 1, n, f) == n;
		tail[0] += n;
	}
	if (!ok || fwrite(tail, 1, sizeof(tail), f) != sizeof(tail))
		return rt_fail(RT_EIO, "cannot write the string table of trace part %s: %s", stem,
			       strerror(errno));
	return RT_EOK;
}

enum rt_err rt_trace_flush(struct rt_trace_writer *w, const char *dir, const char *stem,
			   bool final)
{
	return rt_trace_flush_as(w, dir, stem, "trace", final);
}

enum rt_err rt_trace_flush_as(struct rt_trace_writer *w, const char *dir, const char *stem,
			      const char *ext, bool final)
{
	char path[MAX_PATH];
	enum rt_err err;

	if (w->recs.len) {
		if (!w->file) {
			snprintf(path, sizeof(path), "%s/%s.%s", dir, stem, ext);
			w->file = fopen(path, "wb");
			if (!w->file)
				return rt_fail(RT_EIO, "cannot create %s: %s", path, strerror(errno));
		}
		if (fwrite(w->recs.data, 1, w->recs.len, w->file) != w->recs.len)
			return rt_fail(RT_EIO, "cannot write trace part %s: %s", stem,
				       strerror(errno));
		rt_buf_reset(&w->recs);
	}
	if (!final || !w->file)
		return RT_EOK;
	err = write_tail(w, w->file, stem);
	if (fclose(w->file) && !err)
		err = rt_fail(RT_EIO, "cannot close trace part %s", stem);
	w->file = NULL;
	return err;
}

/* ---------------------------------------------------------------- filters */

bool rt_trace_wanted(const struct rt_trace_opts *o, uint32_t rank, uint64_t from, uint64_t to)
{
	if (o->ranks && (rank >= 64 || !(o->ranks >> rank & 1)))
		return false;
	if (to < o->from_ps)
		return false;
	return !o->to_ps || from <= o->to_ps;
}

/* Decimal microseconds with up to six decimals, as exact picoseconds. */
static bool parse_us(const char *s, const char *end, uint64_t *ps)
{
	uint64_t whole = 0, frac = 0, scale = 1000000;
	const char *p = s;

	if (p == end)
		return false;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (whole > (UINT64_MAX / 1000000 - 9) / 10)
			return false;
		whole = whole * 10 + (uint64_t)(*p - '0');
	}
	if (p < end && *p == '.') {
		if (++p == end)
			return false;
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			if (scale == 1)
				return false; /* finer than a picosecond */
			scale /= 10;
			frac += (uint64_t)(*p - '0') * scale;
		}
	}
	if (p != end || (p > s && p[-1] == '.'))
		return false;
	*ps = whole * 1000000 + frac;
	return true;
}

enum rt_err rt_trace_parse_window(const char *s, struct rt_trace_opts *o)
{
	const char *colon = strchr(s, ':');
	const char *end = s + strlen(s);

	if (!colon || !parse_us(s, colon, &o->from_ps) ||
	    (colon + 1 < end && !parse_us(colon + 1, end, &o->to_ps)))
		return rt_fail(RT_EINVAL,
			       "--trace-window '%s': expected START:END in simulated microseconds (e.g. 10:25.5; END may be empty)",
			       s);
	if (colon + 1 == end)
		o->to_ps = 0;
	else if (o->to_ps <= o->from_ps)
		return rt_fail(RT_EINVAL, "--trace-window '%s': END must be after START", s);
	return RT_EOK;
}

static bool parse_rank(const char **p, unsigned *out)
{
	unsigned v = 0;
	const char *s = *p;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (unsigned)(*s - '0');
		if (v >= 64)
			return false;
	}
	*p = s;
	*out = v;
	return true;
}

enum rt_err rt_trace_parse_ranks(const char *s, struct rt_trace_opts *o)
{
	const char *p = s;
	uint64_t mask = 0;
	unsigned lo, hi;

	for (;;) {
		if (!parse_rank(&p, &lo))
			break;
		hi = lo;
		if (*p == '-' && (p++, !parse_rank(&p, &hi) || hi < lo))
			break;
		for (unsigned r = lo; r <= hi; r++)
			mask |= 1ull << r;
		if (*p == '\0') {
			o->ranks = mask;
			return RT_EOK;
		}
		if (*p++ != ',')
			break;
	}
	return rt_fail(RT_EINVAL,
		       "--trace-ranks '%s': expected a list of ranks 0-63 such as 0,2-3", s);
}

enum rt_err rt_trace_parse_format(const char *s, struct rt_trace_opts *o)
{
	if (!strcmp(s, "json"))
		o->format = RT_TRACE_JSON;
	else if (!strcmp(s, "json.gz") || !strcmp(s, "gzip"))
		o->format = RT_TRACE_JSON_GZ;
	else if (!strcmp(s, "perfetto"))
		o->format = RT_TRACE_PERFETTO;
	else
		return rt_fail(RT_EINVAL, "--trace-format '%s': expected json, json.gz or perfetto",
			       s);
	return RT_EOK;
}

/* ---------------------------------------------------------------- reader */

static enum rt_err split_names(struct rt_trace_part *p, const struct rt_buf *b,
			       const char *path)
{
	size_t head = sizeof(p->track_name), n = 0;

	if (b->len < head)
		return rt_fail(RT_EPROTOCOL, "corrupt trace part %s: no track table", path);
	memcpy(p->track_name, b->data, head);
	for (size_t i = head; i < b->len; i++)
		n += b->data[i] == '\0';
	p->names = malloc((n ? n : 1) * sizeof(*p->names));
	p->strings = malloc(b->len + 1);
	if (!p->names || !p->strings)
		return rt_fail(RT_ENOMEM, "no memory to read %s", path);
	memcpy(p->strings, b->data, b->len);
	for (size_t i = head, start = head; i < b->len; i++)
		if (p->strings[i] == '\0') {
			p->names[p->n_names++] = p->strings + start;
			start = i + 1;
		}
	return RT_EOK;
}

static bool str_ok(const struct rt_trace_part *p, uint16_t id)
{
	return id == RT_TRACE_NONE || id < p->n_names;
}

bool rt_trace_rec_ok(const struct rt_trace_part *p, const struct rt_trace_rec *r)
{
	return str_ok(p, r->name) && str_ok(p, r->cat) && str_ok(p, r->site) &&
	       r->kind >= RT_TRACE_SLICE && r->kind <= RT_TRACE_COUNTER &&
	       r->track < RT_TRACE_TRACKS;
}

static enum rt_err check_tracks(const struct rt_trace_part *p, const char *path)
{
	for (unsigned t = 0; t < RT_TRACE_TRACKS; t++)
		if (!str_ok(p, p->track_name[t]))
			return rt_fail(RT_EPROTOCOL, "corrupt trace part %s: bad track name", path);
	return RT_EOK;
}

static enum rt_err check_part(const struct rt_trace_part *p, const char *path)
{
	enum rt_err err = check_tracks(p, path);

	for (size_t i = 0; !err && i < p->n; i++)
		if (!rt_trace_rec_ok(p, &p->recs[i]))
			return rt_fail(RT_EPROTOCOL, "corrupt trace part %s: record %zu", path, i);
	return err;
}

enum rt_err rt_trace_part_parse(const void *recs, size_t len, const void *names,
				size_t names_len, const char *what, struct rt_trace_part *p)
{
	struct rt_buf nb = { .data = (char *)names, .len = names_len, .cap = names_len };
	enum rt_err err = RT_EOK;

	memset(p, 0, sizeof(*p));
	for (unsigned t = 0; t < RT_TRACE_TRACKS; t++)
		p->track_name[t] = RT_TRACE_NONE;
	if (len % sizeof(struct rt_trace_rec))
		return rt_fail(RT_EPROTOCOL, "corrupt trace part %s: %zu bytes", what, len);
	if (!len)
		return RT_EOK;
	p->n = len / sizeof(struct rt_trace_rec);
	p->recs = malloc(len);
	if (!p->recs)
		return rt_fail(RT_ENOMEM, "no memory to read %s", what);
	memcpy(p->recs, recs, len);
	err = split_names(p, &nb, what);
	if (!err)
		err = check_part(p, what);
	return err;
}

/* Where a part's string table lies, from its last 16 bytes and its size:
 * *recs_len bytes of records, then *names_len of table. */
static enum rt_err tail_split(const uint64_t tail[2], uint64_t size, const char *what,
			      uint64_t *recs_len, uint64_t *names_len)
{
	if (size < 2 * sizeof(uint64_t) || tail[1] != RT_TRACE_TAIL_MAGIC ||
	    tail[0] > size - 2 * sizeof(uint64_t))
		return rt_fail(RT_EPROTOCOL, "corrupt trace part %s: no string table at its end",
			       what);
	*names_len = tail[0];
	*recs_len = size - 2 * sizeof(uint64_t) - tail[0];
	return RT_EOK;
}

enum rt_err rt_trace_part_split(const void *bytes, size_t len, const char *what,
				size_t *recs_len, const void **names, size_t *names_len)
{
	uint64_t tail[2], r = 0, n = 0;
	enum rt_err err = RT_EOK;

	if (len >= sizeof(tail))
		memcpy(tail, (const char *)bytes + len - sizeof(tail), sizeof(tail));
	if (len)
		err = tail_split(tail, len, what, &r, &n);
	*recs_len = err ? 0 : (size_t)r;
	*names_len = err ? 0 : (size_t)n;
	*names = (const char *)bytes + *recs_len;
	return err;
}

/* The string table at the end of the part file `path` into `names`, and
 * the bytes of records before it; a missing or empty file has neither. */
static enum rt_err read_tail(const char *path, struct rt_buf *names, uint64_t *recs_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t tail[2], names_len = 0;
	struct stat st;
	enum rt_err err = RT_EOK;

	*recs_len = 0;
	rt_buf_reset(names);
	if (fd < 0)
		return errno == ENOENT ? RT_EOK
				       : rt_fail(RT_EIO, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &st))
		err = rt_fail(RT_EIO, "cannot read %s: %s", path, strerror(errno));
	else if (st.st_size > 0 &&
		 pread(fd, tail, sizeof(tail), st.st_size - (off_t)sizeof(tail)) != sizeof(tail))
		err = rt_fail(RT_EPROTOCOL, "corrupt trace part %s: no string table at its end",
			      path);
	else if (st.st_size > 0)
		err = tail_split(tail, (uint64_t)st.st_size, path, recs_len, &names_len);
	if (!err && names_len)
		err = rt_buf_reserve(names, names_len);
	if (!err && names_len &&
	    pread(fd, names->data, names_len, (off_t)*recs_len) != (ssize_t)names_len)
		err = rt_fail(RT_EIO, "cannot read %s: %s", path, strerror(errno));
	if (!err && names_len) {
		names->len = names_len;
		names->data[names_len] = '\0';
	}
	close(fd);
	return err;
}

enum rt_err rt_trace_part_read(const char *dir, const char *stem, struct rt_trace_part *p)
{
	char path[MAX_PATH];
	struct rt_buf file;
	const void *names = NULL;
	size_t recs_len = 0, names_len = 0;
	enum rt_err err = RT_EOK;

	rt_buf_init(&file);
	snprintf(path, sizeof(path), "%s/%s.trace", dir, stem);
	if (!access(path, F_OK))
		err = rt_buf_read_file(&file, path);
	if (!err)
		err = rt_trace_part_split(file.data, file.len, path, &recs_len, &names, &names_len);
	if (!err)
		err = rt_trace_part_parse(file.data, recs_len, names, names_len, path, p);
	else
		memset(p, 0, sizeof(*p));
	rt_buf_release(&file);
	return err;
}

enum rt_err rt_trace_part_read_names(const char *dir, const char *stem, struct rt_trace_part *p,
				     uint64_t *bytes)
{
	char path[MAX_PATH];
	struct rt_buf names;
	enum rt_err err;

	memset(p, 0, sizeof(*p));
	for (unsigned t = 0; t < RT_TRACE_TRACKS; t++)
		p->track_name[t] = RT_TRACE_NONE;
	snprintf(path, sizeof(path), "%s/%s.trace", dir, stem);
	rt_buf_init(&names);
	err = read_tail(path, &names, bytes);
	if (!err && *bytes % sizeof(struct rt_trace_rec))
		err = rt_fail(RT_EPROTOCOL, "corrupt trace part %s: %llu bytes of records", path,
			      (unsigned long long)*bytes);
	if (!err && *bytes)
		err = split_names(p, &names, path);
	if (!err)
		err = check_tracks(p, path);
	rt_buf_release(&names);
	return err;
}

enum rt_err rt_trace_names_read(const char *path, struct rt_trace_part *p, uint64_t *recs_len)
{
	struct rt_buf names;
	enum rt_err err;

	memset(p, 0, sizeof(*p));
	for (unsigned t = 0; t < RT_TRACE_TRACKS; t++)
		p->track_name[t] = RT_TRACE_NONE;
	rt_buf_init(&names);
	err = read_tail(path, &names, recs_len);
	if (!err && names.len)
		err = split_names(p, &names, path);
	rt_buf_release(&names);
	return err;
}

void rt_trace_part_release(struct rt_trace_part *p)
{
	free(p->recs);
	free(p->strings);
	free(p->names);
	memset(p, 0, sizeof(*p));
}

const char *rt_trace_part_str(const struct rt_trace_part *p, uint16_t id)
{
	return id == RT_TRACE_NONE ? "" : p->names[id];
}
