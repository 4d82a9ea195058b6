/* csv.c — RFC 4180 fields (csv.h). */
#include "csv.h"

#include <string.h>

enum rt_err kb_csv_field(struct rt_buf *b, const char *s, bool first)
{
	enum rt_err err = first ? RT_EOK : rt_buf_append(b, ",", 1);

	s = s ? s : "";
	if (err || !s[strcspn(s, ",\"\r\n")])
		return err ? err : rt_buf_append(b, s, strlen(s));
	err = rt_buf_append(b, "\"", 1);
	for (const char *p = s; !err && *p; p++)
		err = *p == '"' ? rt_buf_append(b, "\"\"", 2) : rt_buf_append(b, p, 1);
	return err ? err : rt_buf_append(b, "\"", 1);
}

enum rt_err kb_csv_u64(struct rt_buf *b, unsigned long long v, bool first)
{
	return rt_buf_printf(b, "%s%llu", first ? "" : ",", v);
}
