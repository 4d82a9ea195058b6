/* program_text.c — a program's canonical text (tl_host.h): what the
 * launcher makes of a program YAML file, parsed back into a tl_program by
 * every host, and the kernel that runs it. */
#include "tl_private.h"

#include <stdlib.h>
#include <string.h>

#include "rt/job.h"

#define NAME_MAX_LEN 63

static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > NAME_MAX_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

static enum rt_err dtype_of(const char *s, enum tl_dtype *d)
{
	static const char *const names[] = { "f16", "bf16", "f32" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*d = (enum tl_dtype)i;
			return RT_EOK;
		}
	return RT_EINVAL;
}

static enum rt_err init_of(const char *s, enum tl_init *init)
{
	static const char *const names[] = { "none", "zeros", "random" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*init = (enum tl_init)i;
			return RT_EOK;
		}
	return RT_EINVAL;
}

/* Splits `line` at blanks into at most `max` words; returns how many. */
static int words(char *line, char **w, int max)
{
	char *save = NULL;
	int n = 0;

	/* strtok_r: every host of an in-process run parses at once */
	for (char *p = strtok_r(line, " \t", &save); p; p = strtok_r(NULL, " \t", &save))
		if (n < max + 1)
			w[n++] = p;
	return n;
}

/* A number of the YAML's scalar (decimal digits, or a float for scale). */
static bool parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;

	if (rt_parse_u64(s, 1, UINT32_MAX, &v) != RT_PARSE_OK)
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool parse_u32_or_0(const char *s, uint32_t *out)
{
	return !strcmp(s, "0") ? (*out = 0, true) : parse_u32(s, out);
}

static bool parse_double(const char *s, double *out)
{
	char *end;

	*out = strtod(s, &end);
	return *s && !*end;
}

static enum rt_err tensor_line(struct tl_program_text *p, char **w, int n, uint32_t line)
{
	struct tl_prog_tensor *t = &p->tensors[p->prog.n_tensors];

	if (n != 10 || !name_ok(w[1]) || !parse_u32(w[2], &t->rows) ||
	    !parse_u32(w[3], &t->cols) || dtype_of(w[4], &t->dtype) || init_of(w[5], &t->init) ||
	    !parse_double(w[6], &t->scale) || !parse_double(w[7], &t->offset) ||
	    !parse_u32_or_0(w[8], &t->rank_div) || !parse_u32_or_0(w[9], &t->rank_mod))
		return rt_fail(RT_EINVAL,
			       "program line %u: expected 'tensor NAME ROWS COLS f16|bf16|f32 "
			       "none|zeros|random SCALE OFFSET RANK_DIV RANK_MOD'", line);
	t->name = w[1];
	p->prog.n_tensors++;
	return RT_EOK;
}

static enum rt_err step_line(struct tl_program_text *p, char **w, int n, uint32_t line)
{
	struct tl_prog_step *s = &p->steps[p->prog.n_steps];

	if (n != 3 || !name_ok(w[1]) || !w[2][0])
		return rt_fail(RT_EINVAL, "program line %u: expected 'step NAME KERNEL'", line);
	memset(s, 0, sizeof(*s));
	s->name = w[1];
	s->kernel_name = w[2];
	p->prog.n_steps++;
	return RT_EOK;
}

/* `arg` and `bind` lines: a pair for the step above. */
static enum rt_err pair_line(struct tl_program_text *p, char **w, int n, uint32_t line,
			     bool bind)
{
	struct tl_prog_step *s;
	const char *(*pairs)[2];
	uint32_t max = bind ? TL_PROG_MAX_BINDS : TL_PROG_MAX_ARGS, k = 0;

	if (!p->prog.n_steps || n != 3 || !name_ok(w[1]) || (bind && !name_ok(w[2])))
		return rt_fail(RT_EINVAL, "program line %u: expected '%s NAME %s' after a step", line,
			       bind ? "bind" : "arg", bind ? "TENSOR" : "VALUE");
	s = &p->steps[p->prog.n_steps - 1];
	pairs = bind ? s->binds : s->args;
	while (k < max && pairs[k][0])
		k++;
	if (k + 1 >= max)
		return rt_fail(RT_EINVAL, "program step '%s': more than %u %s", s->name, max - 1,
			       bind ? "tensor bindings" : "arguments");
	pairs[k][0] = w[1];
	pairs[k][1] = w[2];
	return RT_EOK;
}

enum rt_err tl_program_parse(const char *text, struct tl_program_text *p)
{
	uint32_t lines = 1, line = 0;
	enum rt_err err = RT_EOK;
	char *save = NULL, *cur;

	memset(p, 0, sizeof(*p));
	for (const char *c = text; *c; c++)
		lines += *c == '\n';
	p->text = strdup(text);
	p->tensors = calloc(lines, sizeof(*p->tensors));
	p->steps = calloc(lines, sizeof(*p->steps));
	if (!p->text || !p->tensors || !p->steps) {
		tl_program_text_release(p);
		return rt_fail(RT_ENOMEM, "program: out of memory");
	}
	for (cur = strtok_r(p->text, "\n", &save); !err && cur; cur = strtok_r(NULL, "\n", &save)) {
		char *w[11];
		int n;

		line++;
		n = words(cur, w, 10);
		if (!n)
			continue;
		if (!strcmp(w[0], "tensor"))
			err = tensor_line(p, w, n, line);
		else if (!strcmp(w[0], "step"))
			err = step_line(p, w, n, line);
		else if (!strcmp(w[0], "arg") || !strcmp(w[0], "bind"))
			err = pair_line(p, w, n, line, w[0][0] == 'b');
		else
			err = rt_fail(RT_EINVAL, "program line %u: unknown item '%.20s'", line, w[0]);
	}
	if (!err && !p->prog.n_steps)
		err = rt_fail(RT_EINVAL, "program: no steps");
	p->prog.tensors = p->tensors;
	p->prog.steps = p->steps;
	if (err)
		tl_program_text_release(p);
	return err;
}

void tl_program_text_release(struct tl_program_text *p)
{
	free(p->text);
	free(p->tensors);
	free(p->steps);
	memset(p, 0, sizeof(*p));
}

int tl_program_text_kernel(struct tl *tl, const struct tl_args *args)
{
	struct tl_program_text *p = calloc(1, sizeof(*p));
	int rc;

	(void)args;
	if (!p)
		tl_abort(tl, (struct tl_site){ NULL, 0 }, RT_ENOMEM, "program: out of memory");
	tl->prog_text = p; /* tl_program_release frees it if a step fails */
	if (!tl->s.program_text || tl_program_parse(tl->s.program_text, p) != RT_EOK)
		tl_abort(tl, (struct tl_site){ NULL, 0 }, RT_EINVAL, "%s",
			 tl->s.program_text ? rt_last_error() : "no program");
	rc = tl_program_run_at(tl, (struct tl_site){ "(program)", 0 }, &p->prog);
	tl_program_text_release(p);
	free(p);
	tl->prog_text = NULL;
	return rc;
}
