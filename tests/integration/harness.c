/* harness.c — see harness.h. */
#include "harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *kb_bin(void)
{
	const char *bin = getenv("KB_BIN");

	return bin ? bin : "build/bin/kernbench";
}

/* Output directories of this test process, removed when it exits (set
 * KB_KEEP_OUTPUTS=1 to keep them for a look). */
static char **made_dirs; /* every directory a test made, removed at exit */
static int n_made_dirs, cap_made_dirs;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void remove_made_dirs(void)
{
	if (getenv("KB_KEEP_OUTPUTS"))
		return;
	for (int i = 0; i < n_made_dirs; i++)
		nftw(made_dirs[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void kb_track_dir(const char *dir)
{
	char *copy = strdup(dir);

	if (n_made_dirs == 0)
		atexit(remove_made_dirs);
	if (n_made_dirs == cap_made_dirs) {
		int cap = cap_made_dirs ? 2 * cap_made_dirs : 64;
		char **grown = realloc(made_dirs, (size_t)cap * sizeof(*grown));

		if (!grown) {
			free(copy);
			return;
		}
		made_dirs = grown;
		cap_made_dirs = cap;
	}
	if (copy)
		made_dirs[n_made_dirs++] = copy;
}

void kb_tmpdir(char *path, size_t cap, const char *tag)
{
	snprintf(path, cap, "/tmp/kbtest-%s-XXXXXX", tag);
	if (!mkdtemp(path)) {
		path[0] = '\0';
		return;
	}
	kb_track_dir(path);
}

static void read_fd(int fd, char *buf, size_t cap)
{
	size_t used = 0;
	ssize_t n;

	while (used + 1 < cap && (n = read(fd, buf + used, cap - 1 - used)) > 0)
		used += (size_t)n;
	buf[used] = '\0';
	/* drain the rest so the child never blocks on a full pipe */
	while (read(fd, (char[256]){ 0 }, 256) > 0)
		;
}

/* Sanitizer builds print a one-time notice per process that uses
 * swapcontext (the kernel host's coroutines, annotated for ASan); it is not
 * kernbench's output, so error-line assertions do not see it. */
static void drop_sanitizer_notices(char *text)
{
	static const char notice[] = "ASan doesn't fully support makecontext/swapcontext";
	char *line = text, *out = text;

	while (*line) {
		char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) + 1 : strlen(line);

		if (!memmem(line, len, notice, sizeof(notice) - 1)) {
			memmove(out, line, len);
			out += len;
		}
		line += len;
	}
	*out = '\0';
}

void kb_runv(struct kb_result *res, char *const argv[])
{
	char errpath[] = "/tmp/kbtest-stderr-XXXXXX";
	int out[2], errfd = mkstemp(errpath);
	pid_t pid;

	memset(res, 0, sizeof(*res));
	if (pipe(out) || errfd < 0) {
		res->status = -1;
		return;
	}
	pid = fork();
	res->pid = pid;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* a timed-out test takes its run down */
		dup2(out[1], 1);
		dup2(errfd, 2);
		close(out[0]);
		execv(kb_bin(), argv);
		_exit(127);
	}
	close(out[1]);
	read_fd(out[0], res->out, sizeof(res->out));
	close(out[0]);
	res->status = kb_wait(pid);
	lseek(errfd, 0, SEEK_SET);
	read_fd(errfd, res->err, sizeof(res->err));
	drop_sanitizer_notices(res->err);
	close(errfd);
	unlink(errpath);
}

void kb_run_ok(const char *dir, const char *const extra[])
{
	char *argv[64];
	struct kb_result r;
	int n = 0;

	argv[n++] = (char *)"kernbench";
	argv[n++] = (char *)"run";
	for (int i = 0; extra[i] && n < 58; i++)
		argv[n++] = (char *)extra[i];
	argv[n++] = (char *)"--quiet";
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)dir;
	argv[n] = NULL;
	kb_runv(&r, argv);
	cr_assert_eq(r.status, 0, "kernbench %s: %s", extra[0], r.err);
}

void kb_run(struct kb_result *res, const char *arg0, ...)
{
	char *argv[128];
	int n = 0;
	va_list ap;

	argv[n++] = (char *)"kernbench";
	va_start(ap, arg0);
	for (const char *a = arg0; a && n < 127; a = va_arg(ap, const char *))
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	kb_runv(res, argv);
}

pid_t kb_spawn(char *const argv[], const char *stderr_path)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		int fd = open(stderr_path ? stderr_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int null = open("/dev/null", O_WRONLY);

		dup2(fd, 2);
		dup2(null, 1);
		execv(kb_bin(), argv);
		_exit(127);
	}
	return pid;
}

int kb_wait(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

char *kb_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = '\0';
		if (len)
			*len = (size_t)n;
	}
	return buf;
}

char *kb_slurp_stderr(const char *path)
{
	char *text = kb_slurp(path, NULL);

	if (text)
		drop_sanitizer_notices(text);
	return text;
}

/* Skips a JSON string starting at *p == '"'; returns the char after it. */
static const char *skip_string(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : p;
}

/* Skips one JSON value (any kind); returns the char after it. */
static const char *skip_value(const char *p)
{
	int depth = 0;

	while (*p == ' ' || *p == '\n')
		p++;
	do {
		if (*p == '"')
			p = skip_string(p);
		else if (*p == '{' || *p == '[')
			depth++, p++;
		else if (*p == '}' || *p == ']')
			depth--, p++;
		else if (depth == 0)
			while (*p && !strchr(",}]\n ", *p))
				p++;
		else
			p++;
	} while (*p && depth > 0);
	return p;
}

/* Value of member `name` (len bytes) of the object at `obj`, or NULL. */
static const char *member(const char *obj, const char *name, size_t len)
{
	const char *p = obj;

	while (*p == ' ' || *p == '\n')
		p++;
	if (*p++ != '{')
		return NULL;
	for (;;) {
		const char *key, *end;

		while (*p == ' ' || *p == '\n' || *p == ',')
			p++;
		if (*p != '"')
			return NULL;
		key = p + 1;
		end = skip_string(p);
		p = end;
		while (*p == ' ' || *p == '\n' || *p == ':')
			p++;
		if ((size_t)(end - 1 - key) == len && !memcmp(key, name, len))
			return p;
		p = skip_value(p);
	}
}

bool kb_json_field(const char *json, const char *path, char *out, size_t cap)
{
	const char *v = json, *end;
	size_t n;

	if (!json || !cap)
		return false;
	/* "a.b.c": member c of member b of member a of the top-level object */
	for (const char *part = path; v;) {
		const char *dot = strchr(part, '.');
		size_t len = dot ? (size_t)(dot - part) : strlen(part);

		v = member(v, part, len);
		if (!dot)
			break;
		part = dot + 1;
	}
	if (!v)
		return false;
	end = skip_value(v);
	n = (size_t)(end - v) < cap - 1 ? (size_t)(end - v) : cap - 1;
	memcpy(out, v, n);
	out[n] = '\0';
	return true;
}

/* The text as an unsigned integer; the calling test fails otherwise. */
static uint64_t as_u64(const char *text, const char *what)
{
	char *end;
	unsigned long long v;

	cr_assert(text[0] >= '0' && text[0] <= '9', "%s is \"%s\", not an unsigned integer", what,
		  text);
	v = strtoull(text, &end, 10);
	cr_assert(*end == '\0', "%s is \"%s\", not an unsigned integer", what, text);
	return v;
}

uint64_t kb_json_u64(const char *json, const char *key)
{
	char v[64];

	cr_assert(kb_json_field(json, key, v, sizeof(v)), "summary has no \"%s\"", key);
	return as_u64(v, key);
}

char *kb_summary_field(const char *dir, const char *key)
{
	char path[1024], v[128], *json;

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	json = kb_slurp(path, NULL);
	cr_assert_not_null(json, "no %s", path);
	cr_assert(kb_json_field(json, key, v, sizeof(v)), "%s has no \"%s\"", path, key);
	free(json);
	return strdup(v);
}

uint64_t kb_summary_u64(const char *dir, const char *key)
{
	char *v = kb_summary_field(dir, key);
	uint64_t n = as_u64(v, key);

	free(v);
	return n;
}

void kb_expect_same_run(const char *one, const char *many, bool tensors)
{
	static const char *const files[] = { "o.npy", "op_log.jsonl", "trace.json",
					     "critical_path.jsonl" };
	static const char *const keys[] = { "delivery_digest", "latency_ps", "messages" };
	char a[1100], b[1100];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(a, sizeof(a), "%s/%s", one, files[i]);
		snprintf(b, sizeof(b), "%s/%s", many, files[i]);
		if (i == 0 && !tensors) { /* timing mode writes no tensors */
			cr_expect(access(a, F_OK) && access(b, F_OK), "timing run wrote %s", files[i]);
			continue;
		}
		cr_expect(kb_same_file(a, b), "%s differs between %s and %s", files[i], one, many);
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char *x = kb_summary_field(one, keys[i]), *y = kb_summary_field(many, keys[i]);

		cr_expect_str_eq(x, y, "summary.json %s differs: %s in %s, %s in %s", keys[i], x,
				 one, y, many);
		free(x);
		free(y);
	}
}

bool kb_same_file(const char *a, const char *b)
{
	size_t la, lb;
	char *x = kb_slurp(a, &la), *y = kb_slurp(b, &lb);
	bool same = x && y && la == lb && !memcmp(x, y, la);

	free(x);
	free(y);
	return same;
}

static bool read_comm(const char *pid, char *comm, size_t cap)
{
	char path[300];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%s/comm", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	ok = fgets(comm, (int)cap, f) != NULL;
	fclose(f);
	return ok;
}

int kb_children(pid_t pid, pid_t *out, int cap)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)) && n < cap) {
		char path[300], line[512];
		FILE *f;
		int ppid = 0;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f)) {
			char *close_paren = strrchr(line, ')');

			if (close_paren)
				sscanf(close_paren + 2, "%*c %d", &ppid);
		}
		fclose(f);
		if (ppid == pid)
			out[n++] = (pid_t)atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

void kb_adopt_orphans(void)
{
	prctl(PR_SET_CHILD_SUBREAPER, 1);
}

static char proc_state(pid_t pid)
{
	char path[64], line[512], *p;
	FILE *f;
	char state = '?';

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return state;
	if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')')))
		state = p[2];
	fclose(f);
	return state;
}

int kb_leftover_daemons(void)
{
	pid_t kids[256];
	int n, live = 0;

	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	n = kb_children(getpid(), kids, 256);
	for (int i = 0; i < n; i++) {
		char pid[16], comm[64];

		snprintf(pid, sizeof(pid), "%d", (int)kids[i]);
		if (read_comm(pid, comm, sizeof(comm)) && !strncmp(comm, "kb-", 3) &&
		    proc_state(kids[i]) != 'Z')
			live++;
	}
	return live;
}

int kb_leftover_socket_dirs(pid_t pid)
{
	DIR *d = opendir("/tmp");
	struct dirent *e;
	char prefix[32];
	int n = 0;

	snprintf(prefix, sizeof(prefix), "kb-%d-", (int)pid);
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix)))
			n++;
	if (d)
		closedir(d);
	return n;
}

void kb_build_kernel(const char *dir, const char *name, const char *source, char *so,
		     size_t cap)
{
	const char *root = getenv("KB_ROOT");
	char src[600], cmd[2400];
	FILE *f;

	cr_assert(root, "KB_ROOT is set by `make integration`");
	snprintf(src, sizeof(src), "%s/%s.c", dir, name);
	snprintf(so, cap, "%s/%s.so", dir, name);
	f = fopen(src, "w");
	cr_assert_not_null(f, "cannot write %s", src);
	fputs(source, f);
	fclose(f);
	/* what a kernel author does: the public headers, nothing else */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && cc -std=c17 -O1 -Wall -Wextra -Werror -fPIC -shared "
		 "-I%s/kernel_host/include -o %s %s.c",
		 dir, root, so, name);
	cr_assert_eq(system(cmd), 0, "could not compile the kernel: %s", cmd);
}

int kb_count_lines(const char *text)
{
	int n = 0;

	for (const char *p = text; *p; p++)
		n += *p == '\n' || (!p[1]);
	return n;
}

/* ---------------------------------------------------------------- JSON check */

/* A small recursive-descent JSON checker, independent of the writer it
 * checks (runtime/src/json.c). */
struct jcheck {
	const char *p;
	int depth;
};

static bool jvalue(struct jcheck *j);

static void jspace(struct jcheck *j)
{
	while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')
		j->p++;
}

static bool jstring(struct jcheck *j)
{
	if (*j->p++ != '"')
		return false;
	while (*j->p != '"') {
		unsigned char c = (unsigned char)*j->p;

		if (c < 0x20)
			return false; /* includes the terminating NUL */
		if (c == '\\') {
			j->p++;
			if (*j->p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", j->p[i]) || !j->p[i])
						return false;
				j->p += 4;
			} else if (!*j->p || !strchr("\"\\/bfnrt", *j->p)) {
				return false;
			}
		}
		j->p++;
	}
	j->p++;
	return true;
}

static bool jnumber(struct jcheck *j)
{
	const char *start = j->p;

	if (*j->p == '-')
		j->p++;
	if (*j->p == '0')
		j->p++;
	else if (*j->p >= '1' && *j->p <= '9')
		while (*j->p >= '0' && *j->p <= '9')
			j->p++;
	else
		return false;
	if (*j->p == '.') {
		j->p++;
		if (*j->p < '0' || *j->p > '9')
			return false;
		while (*j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (*j->p == 'e' || *j->p == 'E') {
		j->p++;
		if (*j->p == '+' || *j->p == '-')
			j->p++;
		if (*j->p < '0' || *j->p > '9')
			return false;
		while (*j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	return j->p > start;
}

static bool jcontainer(struct jcheck *j, char close, bool object)
{
	j->p++;
	jspace(j);
	if (*j->p == close) {
		j->p++;
		return true;
	}
	for (;;) {
		jspace(j);
		if (object) {
			if (!jstring(j))
				return false;
			jspace(j);
			if (*j->p++ != ':')
				return false;
		}
		if (!jvalue(j))
			return false;
		jspace(j);
		if (*j->p == close) {
			j->p++;
			return true;
		}
		if (*j->p++ != ',')
			return false;
	}
}

static bool jvalue(struct jcheck *j)
{
	bool ok;

	jspace(j);
	if (++j->depth > 64)
		return false;
	switch (*j->p) {
	case '{': ok = jcontainer(j, '}', true); break;
	case '[': ok = jcontainer(j, ']', false); break;
	case '"': ok = jstring(j); break;
	case 't': ok = !strncmp(j->p, "true", 4) && (j->p += 4); break;
	case 'f': ok = !strncmp(j->p, "false", 5) && (j->p += 5); break;
	case 'n': ok = !strncmp(j->p, "null", 4) && (j->p += 4); break;
	default: ok = jnumber(j); break;
	}
	j->depth--;
	return ok;
}

bool kb_json_valid(const char *text, size_t *bad_at)
{
	struct jcheck j = { .p = text };
	bool ok = text && jvalue(&j);

	if (ok) {
		jspace(&j);
		ok = *j.p == '\0';
	}
	if (!ok && bad_at)
		*bad_at = text ? (size_t)(j.p - text) : 0;
	return ok;
}
