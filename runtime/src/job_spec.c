/* job_spec.c — the job as a schema: struct rt_job to and from the wire's
 * JobSpec (proto/kernbench.proto, ADR 0075).
 *
 * Encoding picks what a role may see; decoding refuses, with one line,
 * anything the launcher could not have written: an unknown version, a
 * string longer than its field, a configuration key that is not one (or
 * is given twice, or is missing), a list longer than its array. The
 * decoded job then goes through rt_job_check like any other. */
#include "rt/job.h"

#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "kernbench.pb-c.h"
#include "rt/buf.h"


/* ---------------------------------------------------------------- encode */

/* What a JobSpec points into while it is packed. */
struct spec_parts {
	Kb__JobArg args[RT_MAX_ARGS];
	Kb__JobArg *arg_ptrs[RT_MAX_ARGS];
	Kb__ConfigValue values[RT_CONFIG_FIELDS_MAX];
	Kb__ConfigValue *value_ptrs[RT_CONFIG_FIELDS_MAX];
	Kb__TraceOptions trace;
	Kb__ClientKeys keys;
	Kb__HostFiles files;
	int32_t memory_fds[RT_MAX_MEMORIES];
};

static void encode_config(const struct rt_config *cfg, Kb__JobSpec *s, struct spec_parts *p)
{
	for (size_t i = 0; i < rt_config_field_count; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		Kb__ConfigValue *v = &p->values[i];

		kb__config_value__init(v);
		v->key = (char *)f->key;
		if (f->type == RT_CFG_STR) {
			v->value_case = KB__CONFIG_VALUE__VALUE_TEXT;
			v->text = (char *)cfg + f->offset;
		} else {
			v->value_case = KB__CONFIG_VALUE__VALUE_NUMBER;
			v->number = rt_config_field_u64(cfg, f);
		}
		p->value_ptrs[i] = v;
	}
	s->n_config = rt_config_field_count;
	s->config = p->value_ptrs;
}

/* The keys a daemon needs: the client side only (the schema has no field
 * for the server secret). */
static void encode_keys(const struct rt_keys *k, Kb__JobSpec *s, struct spec_parts *p)
{
	kb__client_keys__init(&p->keys);
	p->keys.on = k->on;
	p->keys.server_public = (char *)k->server_public;
	p->keys.client_public = (char *)k->client_public;
	p->keys.client_secret = (char *)k->client_secret;
	s->keys = &p->keys;
}

/* `n` descriptors into `out`, without the trailing -1s (decoding fills
 * them in); how many are kept. */
static size_t trim_fds(const int *fds, size_t n, int32_t *out)
{
	while (n && fds[n - 1] == -1)
		n--;
	for (size_t i = 0; i < n; i++)
		out[i] = fds[i];
	return n;
}

static void encode_files(const struct rt_job *job, Kb__JobSpec *s, struct spec_parts *p)
{
	kb__host_files__init(&p->files);
	p->files.n_memory_fds = trim_fds(job->memory_fds, RT_MAX_MEMORIES, p->memory_fds);
	p->files.memory_fds = p->memory_fds;
	s->files = &p->files;
}

static void encode_trace(const struct rt_trace_opts *t, Kb__JobSpec *s, struct spec_parts *p)
{
	kb__trace_options__init(&p->trace);
	p->trace.no_flows = t->no_flows;
	p->trace.format = (uint32_t)t->format;
	p->trace.from_ps = t->from_ps;
	p->trace.to_ps = t->to_ps;
	p->trace.ranks = t->ranks;
	s->trace = &p->trace;
}

static void encode_spec(const struct rt_job *job, enum rt_job_role role, Kb__JobSpec *s,
			struct spec_parts *p)
{
	kb__job_spec__init(s);
	s->version = KB__JOB_SPEC__VERSION__JOB_VERSION;
	s->workload = (char *)job->workload;
	s->out_dir = (char *)job->out_dir;
	s->result_dir = (char *)job->result_dir;
	s->inputs_dir = (char *)job->inputs_dir;
	s->transport = (uint32_t)job->transport;
	s->colocate = (uint32_t)job->colocate;
	s->mode = (uint32_t)job->mode;
	s->seed = job->seed;
	for (uint32_t i = 0; i < job->n_args && i < RT_MAX_ARGS; i++) {
		kb__job_arg__init(&p->args[i]);
		p->args[i].name = (char *)job->args[i].name;
		p->args[i].value = (char *)job->args[i].value;
		p->arg_ptrs[i] = &p->args[i];
	}
	s->n_args = job->n_args < RT_MAX_ARGS ? job->n_args : RT_MAX_ARGS;
	s->args = p->arg_ptrs;
	s->program = (char *)job->program;
	encode_config(&job->config, s, p);
	s->trace_windows = job->trace_windows;
	s->trace_off = job->trace_off;
	s->oplog_off = job->oplog_off;
	s->ff_mode = (uint32_t)job->ff_mode;
	encode_trace(&job->trace, s, p);
	s->quiet = job->quiet;
	s->progress = (uint32_t)job->progress;
	s->host_of_rank.data = (uint8_t *)job->host_of_rank;
	s->host_of_rank.len = sizeof(job->host_of_rank);
	s->max_frame = job->max_frame;
	if (role == RT_JOB_FOR_DAEMON) {
		encode_keys(&job->keys, s, p);
		encode_files(job, s, p);
	}
}

enum rt_err rt_job_encode(const struct rt_job *job, enum rt_job_role role, struct rt_buf *out)
{
	struct spec_parts *p = calloc(1, sizeof(*p)); /* large: not on the stack */
	Kb__JobSpec spec;
	enum rt_err err;
	size_t len;

	if (!p)
		return rt_fail(RT_ENOMEM, "cannot allocate the job for the daemons");
	encode_spec(job, role, &spec, p);
	len = kb__job_spec__get_packed_size(&spec);
	err = rt_buf_reserve(out, len);
	if (!err)
		out->len += kb__job_spec__pack(&spec, (uint8_t *)out->data + out->len);
	free(p);
	return err;
}

/* ---------------------------------------------------------------- decode */

/* `text` into the `cap`-byte field `dst`; false if it does not fit. */
static bool take_str(char *dst, size_t cap, const char *text)
{
	size_t len = text ? strlen(text) : 0;

	if (len >= cap)
		return false;
	memset(dst, 0, cap);
	memcpy(dst, text ? text : "", len);
	return true;
}

static enum rt_err decode_value(struct rt_config *cfg, const Kb__ConfigValue *v, bool *seen)
{
	size_t i = v->key ? rt_config_field_index(v->key) : SIZE_MAX;
	const struct rt_config_field *f = i == SIZE_MAX ? NULL : &rt_config_fields[i];
	uint8_t *dst;

	if (!f)
		return rt_fail(RT_EDECODE, "job: configuration key '%.60s' is not one of this build",
			       v->key ? v->key : "");
	if (seen[i])
		return rt_fail(RT_EDECODE, "job: configuration key %s given twice", f->key);
	seen[i] = true;
	dst = (uint8_t *)cfg + f->offset;
	if (f->type == RT_CFG_STR) {
		if (v->value_case != KB__CONFIG_VALUE__VALUE_TEXT ||
		    !take_str((char *)dst, f->size, v->text))
			return rt_fail(RT_EDECODE, "job: %s is not a string of at most %zu bytes",
				       f->key, f->size - 1);
		return RT_EOK;
	}
	if (v->value_case != KB__CONFIG_VALUE__VALUE_NUMBER ||
	    (f->type == RT_CFG_U32 && v->number > UINT32_MAX))
		return rt_fail(RT_EDECODE, "job: %s is not a %s number", f->key,
			       f->type == RT_CFG_U32 ? "32-bit" : "64-bit");
	if (f->type == RT_CFG_U32) {
		uint32_t v32 = (uint32_t)v->number;

		memcpy(dst, &v32, sizeof(v32));
	} else {
		memcpy(dst, &v->number, sizeof(v->number));
	}
	return RT_EOK;
}

static enum rt_err decode_config(struct rt_config *cfg, const Kb__JobSpec *s)
{
	bool seen[RT_CONFIG_FIELDS_MAX] = { false };
	enum rt_err err = RT_EOK;

	for (size_t i = 0; !err && i < s->n_config; i++)
		err = decode_value(cfg, s->config[i], seen);
	for (size_t i = 0; !err && i < rt_config_field_count; i++)
		if (!seen[i])
			err = rt_fail(RT_EDECODE, "job: configuration key %s is missing",
				      rt_config_fields[i].key);
	return err;
}

static enum rt_err decode_keys(struct rt_keys *k, const Kb__ClientKeys *c)
{
	if (!c)
		return RT_EOK;
	k->on = c->on;
	if (!take_str(k->server_public, sizeof(k->server_public), c->server_public) ||
	    !take_str(k->client_public, sizeof(k->client_public), c->client_public) ||
	    !take_str(k->client_secret, sizeof(k->client_secret), c->client_secret))
		return rt_fail(RT_EDECODE, "job: a CURVE key is longer than %d characters",
			       RT_KEY_Z85 - 1);
	return RT_EOK;
}

static enum rt_err decode_files(struct rt_job *job, const Kb__HostFiles *f)
{
	for (size_t i = 0; i < RT_MAX_MEMORIES; i++)
		job->memory_fds[i] = -1;
	if (!f)
		return RT_EOK;
	if (f->n_memory_fds > RT_MAX_MEMORIES)
		return rt_fail(RT_EDECODE, "job: %zu memory descriptors (at most %d)",
			       f->n_memory_fds, RT_MAX_MEMORIES);
	for (size_t i = 0; i < f->n_memory_fds; i++)
		job->memory_fds[i] = f->memory_fds[i];
	return RT_EOK;
}

static void decode_trace(struct rt_trace_opts *t, const Kb__TraceOptions *o)
{
	if (!o)
		return;
	t->no_flows = o->no_flows;
	t->format = (enum rt_trace_format)o->format;
	t->from_ps = o->from_ps;
	t->to_ps = o->to_ps;
	t->ranks = o->ranks;
}

static enum rt_err decode_strings(struct rt_job *job, const Kb__JobSpec *s)
{
	if (!take_str(job->workload, sizeof(job->workload), s->workload) ||
	    !take_str(job->out_dir, sizeof(job->out_dir), s->out_dir) ||
	    !take_str(job->result_dir, sizeof(job->result_dir), s->result_dir) ||
	    !take_str(job->inputs_dir, sizeof(job->inputs_dir), s->inputs_dir) ||
	    !take_str(job->program, sizeof(job->program), s->program))
		return rt_fail(RT_EDECODE, "job: a path, the workload or the program is longer than "
			       "its field");
	if (s->n_args > RT_MAX_ARGS)
		return rt_fail(RT_EDECODE, "job: %zu arguments (at most %d)", s->n_args, RT_MAX_ARGS);
	for (size_t i = 0; i < s->n_args; i++)
		if (!take_str(job->args[i].name, sizeof(job->args[i].name), s->args[i]->name) ||
		    !take_str(job->args[i].value, sizeof(job->args[i].value), s->args[i]->value))
			return rt_fail(RT_EDECODE, "job: argument %zu is longer than its field", i);
	job->n_args = (uint32_t)s->n_args;
	if (s->host_of_rank.len > sizeof(job->host_of_rank))
		return rt_fail(RT_EDECODE, "job: hosts of %zu ranks (at most %d)",
			       s->host_of_rank.len, RT_MAX_RANKS);
	if (s->host_of_rank.len)
		memcpy(job->host_of_rank, s->host_of_rank.data, s->host_of_rank.len);
	return RT_EOK;
}

static enum rt_err decode_spec(struct rt_job *job, const Kb__JobSpec *s)
{
	enum rt_err err;

	if (s->version != KB__JOB_SPEC__VERSION__JOB_VERSION)
		return rt_fail(RT_ESCHEMA, "job has version %u, this build reads version %u",
			       s->version, (unsigned)KB__JOB_SPEC__VERSION__JOB_VERSION);
	memset(job, 0, sizeof(*job));
	err = decode_strings(job, s);
	if (!err)
		err = decode_config(&job->config, s);
	if (!err)
		err = decode_keys(&job->keys, s->keys);
	if (!err)
		err = decode_files(job, s->files);
	if (err)
		return err;
	job->transport = (enum rt_transport)s->transport;
	job->colocate = (enum rt_colocate)s->colocate;
	job->mode = (enum rt_mode)s->mode;
	job->seed = s->seed;
	job->trace_windows = s->trace_windows;
	job->trace_off = s->trace_off;
	job->oplog_off = s->oplog_off;
	job->ff_mode = (enum rt_ff_mode)s->ff_mode;
	decode_trace(&job->trace, s->trace);
	job->quiet = s->quiet;
	job->progress = (enum rt_progress)s->progress;
	job->max_frame = s->max_frame;
	return rt_job_check(job);
}

enum rt_err rt_job_decode(const uint8_t *bytes, size_t len, struct rt_job *job)
{
	Kb__JobSpec *s = kb__job_spec__unpack(NULL, len, bytes);
	enum rt_err err;

	if (!s)
		return rt_fail(RT_EDECODE, "job: cannot decode %zu bytes as a JobSpec", len);
	err = decode_spec(job, s);
	kb__job_spec__free_unpacked(s, NULL);
	return err;
}
