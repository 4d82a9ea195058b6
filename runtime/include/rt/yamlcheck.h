/* yamlcheck.h — a bound on how deeply a YAML text nests, checked before
 * libyaml sees it. libyaml's scanner does work proportional to the depth
 * for every token, so `[`x N `]`x N costs N^2 (140 s at N = 100 000, a
 * 200 KB file); no kernbench file needs more than a few levels. */
#ifndef RT_YAMLCHECK_H
#define RT_YAMLCHECK_H

#include <stddef.h>

#include "rt/err.h"

#define RT_YAML_MAX_DEPTH 64

/* RT_ECONFIG with one line ("WHAT line L: nested deeper than 64 levels")
 * if flow collections ([ {), block indentation and block sequence entries
 * (- - -) together nest deeper than `max` anywhere in the text. Quoted
 * scalars and comments do not count. */
enum rt_err rt_yaml_check_depth(const char *text, size_t len, unsigned max, const char *what);

#endif
