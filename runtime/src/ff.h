/* ff.h — private: the daemon's fast-forward controller (ff.c, ADR 0059).
 * daemon.c calls it around each event; ctx.c asks it for the time skipped. */
#ifndef RT_FF_PRIVATE_H
#define RT_FF_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/err.h"
#include "rt/event.h"
#include "rt/ff.h"
#include "rt/path.h"

struct rt_daemon;
struct rt_ff;

/* Decides whether this daemon may fast-forward (d->ff stays NULL when the
 * mode is off; otherwise it is set, active or with the reason why not). */
enum rt_err rt_ff_open(struct rt_daemon *d);
void rt_ff_close(struct rt_daemon *d);
/* An event is about to run (folded into the period's pattern). */
void rt_ff_note_event(struct rt_ff *ff, const struct rt_event *ev);
/* After the event: samples the run if a reference loop ticked, and skips
 * periods when it may. */
enum rt_err rt_ff_after_event(struct rt_daemon *d);
bool rt_ff_due(const struct rt_ff *ff);
/* rt_ff_offset and rt_ff_offset_path: ctx.h (a component's context reads
 * them, and the ff module needs the context's internals, not the reverse). */
/* Whether a time `t` (an event time) lies after the first skip. */
bool rt_ff_after_skip(const struct rt_ff *ff, uint64_t t);
/* Writes .parts/ff (what summary.json's fast_forward says). */
enum rt_err rt_ff_write_part(struct rt_daemon *d);

#endif
