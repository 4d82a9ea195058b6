/* ff_mode.h — the --fast-forward switch (off, exact, auto; ADR 0059), apart
 * from the fast-forward interface (rt/ff.h) so that the job can carry it
 * without depending on the daemon's fast-forward (ff.c, which reads the
 * job). */
#ifndef RT_FF_MODE_H
#define RT_FF_MODE_H

#include <stdbool.h>

enum rt_ff_mode { RT_FF_OFF, RT_FF_EXACT, RT_FF_AUTO };

const char *rt_ff_mode_name(enum rt_ff_mode m);
/* "off|exact|auto"; false for anything else. */
bool rt_ff_mode_parse(const char *s, enum rt_ff_mode *out);

#endif
