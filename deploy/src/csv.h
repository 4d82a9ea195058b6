/* csv.h — RFC 4180 fields: a field with a comma, quote, CR or LF is quoted
 * and its quotes doubled; lines end with "\n". stats.csv and the sweep's
 * results.csv are written with it, and the sweep reads results back
 * through kb_csv_split. */
#ifndef KB_CSV_H
#define KB_CSV_H

#include <stdbool.h>
#include <stddef.h>

#include "rt/buf.h"

/* Appends `s` as one field, preceded by a comma unless `first`. */
enum rt_err kb_csv_field(struct rt_buf *b, const char *s, bool first);
/* Appends the unsigned integer `v` as one field. */
enum rt_err kb_csv_u64(struct rt_buf *b, unsigned long long v, bool first);

#endif
