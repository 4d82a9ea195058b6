/* yamlcheck.c — see yamlcheck.h. One pass over the bytes, no allocation:
 * the block levels are a stack of indentation columns (at most `max` deep,
 * or the check fails), the flow levels a counter. */
#include "rt/yamlcheck.h"

#include <stdbool.h>
#include <stdint.h>

struct depth_scan {
	const char *p, *end;
	unsigned line;
	unsigned flow;                        /* open [ and { */
	size_t cols[RT_YAML_MAX_DEPTH + 2];   /* block indentation stack */
	unsigned n_cols;
	char quote;                           /* inside '...' or "..." */
};

/* A new line's indentation (and its "- " entries) as block levels; true
 * if the block and flow levels still fit in `max`. */
static bool block_line(struct depth_scan *s, unsigned max)
{
	const char *q = s->p;
	size_t col = 0;
	unsigned entries = 0;

	while (q < s->end && *q == ' ') {
		q++;
		col++;
	}
	if (q == s->end || *q == '\n' || *q == '\r' || *q == '#')
		return true; /* blank or comment: no level */
	while (s->n_cols && s->cols[s->n_cols - 1] >= col)
		s->n_cols--;
	if (s->n_cols > max)
		return false;
	s->cols[s->n_cols++] = col;
	/* "- - - x": each entry opens one more level on the same line */
	while (q + 1 < s->end && *q == '-' && (q[1] == ' ' || q[1] == '\n')) {
		entries++;
		q += 2;
		while (q < s->end && *q == ' ')
			q++;
		if (s->n_cols + entries > max)
			return false;
	}
	return s->n_cols + entries + s->flow <= max;
}

enum rt_err rt_yaml_check_depth(const char *text, size_t len, unsigned max, const char *what)
{
	struct depth_scan s = { .p = text, .end = text + len, .line = 1 };
	bool line_start = true;

	if (max > RT_YAML_MAX_DEPTH)
		max = RT_YAML_MAX_DEPTH;
	for (; s.p < s.end; s.p++) {
		char c = *s.p;

		if (line_start && !s.quote && !s.flow && !block_line(&s, max))
			goto too_deep;
		line_start = c == '\n';
		if (c == '\n') {
			s.line++;
			continue;
		}
		if (s.quote) {
			if (s.quote == '"' && c == '\\' && s.p + 1 < s.end && s.p[1] != '\n')
				s.p++; /* an escaped character */
			else if (c == s.quote && s.quote == '\'' && s.p + 1 < s.end && s.p[1] == '\'')
				s.p++; /* '' inside '...' */
			else if (c == s.quote)
				s.quote = 0;
			continue;
		}
		if (c == '#' && (s.p == text || s.p[-1] == ' ' || s.p[-1] == '\t' || s.p[-1] == '\n')) {
			while (s.p + 1 < s.end && s.p[1] != '\n')
				s.p++; /* a comment, to the end of its line */
			continue;
		}
		if ((c == '"' || c == '\'') &&
		    (s.p == text || s.p[-1] == ' ' || s.p[-1] == '[' || s.p[-1] == '{' ||
		     s.p[-1] == ',' || s.p[-1] == ':' || s.p[-1] == '\n' || s.p[-1] == '-'))
			s.quote = c;
		else if (c == '[' || c == '{') {
			if (++s.flow + s.n_cols > max)
				goto too_deep;
		} else if ((c == ']' || c == '}') && s.flow)
			s.flow--;
	}
	return RT_EOK;
too_deep:
	return rt_fail(RT_ECONFIG, "%s line %u: nested deeper than %u levels (a kernbench file "
		       "needs a few)", what, s.line, max);
}
