/* job.c — workload argument lookup and option names. */
#include "rt/job.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *rt_job_arg_str(const struct rt_job *job, const char *name, const char *def)
{
	/* the last --arg of a name wins, as on most command lines */
	for (uint32_t i = job->n_args; i-- > 0;)
		if (!strcmp(job->args[i].name, name))
			return job->args[i].value;
	return def;
}

enum rt_err rt_job_arg_u64(const struct rt_job *job, const char *name, uint64_t def,
			   uint64_t *out)
{
	const char *v = rt_job_arg_str(job, name, NULL);
	char *end;
	unsigned long long n;

	*out = def;
	if (!v)
		return RT_EOK;
	errno = 0;
	n = strtoull(v, &end, 0);
	if (errno || end == v || *end || v[0] == '-')
		return rt_fail(RT_EINVAL, "--arg %s=%s: expected an unsigned integer", name, v);
	*out = n;
	return RT_EOK;
}

enum rt_err rt_transport_parse(const char *s, enum rt_transport *out)
{
	static const char *const names[] = { "inproc", "ipc", "tcp" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum rt_transport)i;
			return RT_EOK;
		}
	return rt_fail(RT_EINVAL, "--transport '%s': expected inproc, ipc or tcp", s);
}

const char *rt_transport_name(enum rt_transport t)
{
	static const char *const names[] = { "inproc", "ipc", "tcp" };

	return (unsigned)t < 3 ? names[t] : "?";
}
