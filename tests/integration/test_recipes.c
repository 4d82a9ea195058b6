/* test_recipes.c — issue 11 items 1-2: the deployment recipes in deploy/
 * are read as a cluster would read them and then run on this machine.
 *
 * Kubernetes (deploy/k8s/kernbench.yaml, parsed with libyaml): the agents'
 * Job is Indexed with completions = parallelism = the hosts in the
 * ConfigMap's hosts file, the headless Service selects the coordinator pod
 * (and no agent) on the hosts file's port, and the agents connect to the
 * Service's name. Then the pods' own command lines run in network
 * namespaces (the coordinator pod's namespace plays the Service's
 * address), each agent with JOB_COMPLETION_INDEX set and no --index.
 * Slurm (deploy/slurm/kernbench.sbatch) runs under bash with
 * tests/srun_stub.sh as srun (each task gets SLURM_PROCID / SLURM_NTASKS).
 * OpenMPI (deploy/mpi/run.sh) runs under the real mpirun (agents indexed
 * by OMPI_COMM_WORLD_RANK). Each run must give the one-host bytes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "harness.h"
#include "multihost.h"

/* ---------------------------------------------------------------- YAML */

/* A YAML node: a mapping (kids: key, value, key, value ...), a sequence
 * or a scalar. Anchors and aliases are not needed by the recipes. */
struct ynode {
	yaml_node_type_t kind;
	char *value;
	struct ynode **kids;
	int n;
};

static struct ynode *ynew(yaml_node_type_t kind, const char *value)
{
	struct ynode *y = calloc(1, sizeof(*y));

	cr_assert_not_null(y);
	y->kind = kind;
	y->value = value ? strdup(value) : NULL;
	return y;
}

static void yadd(struct ynode *parent, struct ynode *kid)
{
	parent->kids = realloc(parent->kids, sizeof(*parent->kids) * (size_t)(parent->n + 1));
	cr_assert_not_null(parent->kids);
	parent->kids[parent->n++] = kid;
}

/* The node whose first event is `ev` (consumed); the parser is past it. */
static struct ynode *yparse(yaml_parser_t *p, yaml_event_t *ev, const char *where)
{
	struct ynode *y;

	if (ev->type == YAML_SCALAR_EVENT) {
		y = ynew(YAML_SCALAR_NODE, (const char *)ev->data.scalar.value);
		yaml_event_delete(ev);
		return y;
	}
	cr_assert(ev->type == YAML_MAPPING_START_EVENT || ev->type == YAML_SEQUENCE_START_EVENT,
		  "%s line %zu: unexpected YAML event %d (aliases are not used in recipes)", where,
		  ev->start_mark.line + 1, ev->type);
	y = ynew(ev->type == YAML_MAPPING_START_EVENT ? YAML_MAPPING_NODE : YAML_SEQUENCE_NODE,
		 NULL);
	yaml_event_delete(ev);
	for (;;) {
		yaml_event_t kid;

		cr_assert(yaml_parser_parse(p, &kid), "%s: not YAML: %s (line %zu)", where,
			  p->problem, p->problem_mark.line + 1);
		if (kid.type == YAML_MAPPING_END_EVENT || kid.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&kid);
			return y;
		}
		yadd(y, yparse(p, &kid, where));
	}
}

/* Every document of a YAML text (at most `cap`). */
static int yload(const char *text, const char *where, struct ynode **docs, int cap)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int n = 0;

	cr_assert(text, "cannot read %s", where);
	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
	for (;;) {
		cr_assert(yaml_parser_parse(&p, &ev), "%s: not YAML: %s (line %zu)", where, p.problem,
			  p.problem_mark.line + 1);
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (ev.type != YAML_DOCUMENT_START_EVENT) {
			yaml_event_delete(&ev);
			continue;
		}
		yaml_event_delete(&ev);
		cr_assert(yaml_parser_parse(&p, &ev), "%s: not YAML", where);
		cr_assert_lt(n, cap, "%s has more than %d documents", where, cap);
		docs[n++] = yparse(&p, &ev, where);
	}
	yaml_parser_delete(&p);
	return n;
}

/* Member `key` of mapping `y`, or NULL. */
static struct ynode *ykey(const struct ynode *y, const char *key)
{
	if (!y || y->kind != YAML_MAPPING_NODE)
		return NULL;
	for (int i = 0; i + 1 < y->n; i += 2)
		if (y->kids[i]->value && !strcmp(y->kids[i]->value, key))
			return y->kids[i + 1];
	return NULL;
}

/* "a.b.c" through nested mappings; "containers.0" indexes a sequence. */
static struct ynode *yget(const struct ynode *y, const char *path)
{
	char buf[256], *save = NULL;
	const struct ynode *at = y;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *part = strtok_r(buf, ".", &save); part && at; part = strtok_r(NULL, ".", &save)) {
		if (at->kind == YAML_SEQUENCE_NODE && part[0] >= '0' && part[0] <= '9') {
			int i = atoi(part);

			at = i < at->n ? at->kids[i] : NULL;
		} else {
			at = ykey(at, part);
		}
	}
	return (struct ynode *)at;
}

static const char *ystr(const struct ynode *y, const char *path)
{
	const struct ynode *at = yget(y, path);

	return at && at->kind == YAML_SCALAR_NODE ? at->value : NULL;
}

static void yfree(struct ynode *y)
{
	if (!y)
		return;
	for (int i = 0; i < y->n; i++)
		yfree(y->kids[i]);
	free(y->kids);
	free(y->value);
	free(y);
}

/* ---------------------------------------------------------------- recipes */

static char *recipe_text(const char *rel)
{
	char path[1024];
	const char *root = getenv("KB_ROOT");
	char *text;

	snprintf(path, sizeof(path), "%s/%s", root ? root : ".", rel);
	text = kb_slurp(path, NULL);
	cr_assert_not_null(text, "cannot read %s", path);
	return text;
}

/* $KB_ROOT/rel in a static buffer: copy it before the next call. */
static const char *recipe_path(const char *rel)
{
	static char path[1024];
	const char *root = getenv("KB_ROOT");

	snprintf(path, sizeof(path), "%s/%s", root ? root : ".", rel);
	return path;
}

/* What the hosts file text says: its hosts, ranks and coordinator port. */
struct hosts_info {
	int n_hosts;
	int n_ranks;
	int port;
	char coordinator[128];
};

static void hosts_info(const char *text, const char *where, struct hosts_info *h)
{
	struct ynode *doc[1];
	struct ynode *hosts;
	const char *coord, *colon;

	cr_assert_eq(yload(text, where, doc, 1), 1, "%s: not one YAML document", where);
	coord = ystr(doc[0], "coordinator");
	hosts = yget(doc[0], "hosts");
	cr_assert(coord && hosts && hosts->kind == YAML_SEQUENCE_NODE,
		  "%s: no coordinator: or hosts: list", where);
	snprintf(h->coordinator, sizeof(h->coordinator), "%s", coord);
	colon = strrchr(coord, ':');
	cr_assert(colon, "%s: coordinator %s has no port", where, coord);
	h->port = atoi(colon + 1);
	h->n_hosts = hosts->n;
	h->n_ranks = 0;
	for (int i = 0; i < hosts->n; i++) {
		struct ynode *ranks = yget(hosts->kids[i], "ranks");

		cr_assert(ranks && ranks->kind == YAML_SEQUENCE_NODE, "%s: host %d has no ranks list",
			  where, i);
		h->n_ranks += ranks->n;
	}
	yfree(doc[0]);
}

/* A container's command (+ args) as a NULL-terminated list of strings. */
static int container_argv(const struct ynode *c, char **argv, int cap)
{
	const char *lists[] = { "command", "args" };
	int n = 0;

	for (int l = 0; l < 2; l++) {
		const struct ynode *seq = yget(c, lists[l]);

		for (int i = 0; seq && i < seq->n && n < cap - 1; i++) {
			cr_assert_eq(seq->kids[i]->kind, YAML_SCALAR_NODE, "%s[%d] is not a string",
				     lists[l], i);
			argv[n++] = seq->kids[i]->value;
		}
	}
	argv[n] = NULL;
	return n;
}

/* The value after `opt` in argv, or NULL. */
static const char *opt_value(char *const *argv, const char *opt)
{
	for (int i = 0; argv[i]; i++)
		if (!strcmp(argv[i], opt))
			return argv[i + 1];
	return NULL;
}

static bool has_arg(char *const *argv, const char *arg)
{
	for (int i = 0; argv[i]; i++)
		if (!strcmp(argv[i], arg))
			return true;
	return false;
}

/* The parsed Kubernetes manifest. */
struct k8s {
	struct ynode *docs[16];
	int n_docs;
	struct ynode *config_map, *service, *coord_job, *agent_job;
	struct hosts_info hosts;
};

static struct ynode *find_kind(struct k8s *k, const char *kind, const char *name)
{
	for (int i = 0; i < k->n_docs; i++) {
		const char *dk = ystr(k->docs[i], "kind"), *dn = ystr(k->docs[i], "metadata.name");

		if (dk && dn && !strcmp(dk, kind) && !strcmp(dn, name))
			return k->docs[i];
	}
	cr_assert_fail("deploy/k8s/kernbench.yaml has no %s named %s", kind, name);
	return NULL;
}

static void k8s_load(struct k8s *k)
{
	char *text = recipe_text("deploy/k8s/kernbench.yaml");
	const char *hosts_text;

	memset(k, 0, sizeof(*k));
	k->n_docs = yload(text, "deploy/k8s/kernbench.yaml", k->docs, 16);
	free(text);
	k->config_map = find_kind(k, "ConfigMap", "kernbench-hosts");
	k->service = find_kind(k, "Service", "kernbench-coordinator");
	k->coord_job = find_kind(k, "Job", "kernbench-coordinator");
	k->agent_job = find_kind(k, "Job", "kernbench-agents");
	/* the key "hosts.yaml" holds a dot: looked up by itself */
	hosts_text = ystr(ykey(yget(k->config_map, "data"), "hosts.yaml"), "");
	cr_assert(hosts_text, "the ConfigMap has no data hosts.yaml");
	hosts_info(hosts_text, "the ConfigMap's hosts.yaml", &k->hosts);
}

static void k8s_free(struct k8s *k)
{
	for (int i = 0; i < k->n_docs; i++)
		yfree(k->docs[i]);
}

static unsigned long number(const char *text, const char *what)
{
	char *end;
	unsigned long v;

	cr_assert(text && *text, "%s is missing", what);
	v = strtoul(text, &end, 10);
	cr_assert(*end == '\0', "%s is \"%s\", not a number", what, text);
	return v;
}

Test(recipes, k8s_indexed_job_and_headless_service_fit_the_hosts_file, .timeout = 30)
{
	struct k8s k;
	char *coord[64], *agent[64], want[160];
	const struct ynode *sel, *labels, *agent_labels;
	int matched = 0;

	k8s_load(&k);
	/* agents: one Indexed completion per host, all at once */
	cr_expect_str_eq(ystr(k.agent_job, "spec.completionMode"), "Indexed");
	cr_expect_eq(number(ystr(k.agent_job, "spec.completions"), "completions"),
		     (unsigned long)k.hosts.n_hosts, "completions != hosts in the hosts file");
	cr_expect_eq(number(ystr(k.agent_job, "spec.parallelism"), "parallelism"),
		     (unsigned long)k.hosts.n_hosts, "parallelism != hosts in the hosts file");
	cr_expect_str_eq(ystr(k.coord_job, "spec.completions") ?
			 ystr(k.coord_job, "spec.completions") : "1", "1");

	/* headless Service on the coordinator's port, selecting its pod only */
	cr_expect_str_eq(ystr(k.service, "spec.clusterIP"), "None");
	cr_expect_eq(number(ystr(k.service, "spec.ports.0.port"), "Service port"),
		     (unsigned long)k.hosts.port, "Service port != the hosts file's port");
	sel = yget(k.service, "spec.selector");
	labels = yget(k.coord_job, "spec.template.metadata.labels");
	agent_labels = yget(k.agent_job, "spec.template.metadata.labels");
	cr_assert(sel && sel->n >= 2, "the Service has no selector");
	for (int i = 0; i + 1 < sel->n; i += 2) {
		const char *have = ystr(labels, sel->kids[i]->value);
		const char *agent_has = ystr(agent_labels, sel->kids[i]->value);

		cr_expect(have && !strcmp(have, sel->kids[i + 1]->value),
			  "the coordinator pod lacks the Service's label %s=%s",
			  sel->kids[i]->value, sel->kids[i + 1]->value);
		matched += agent_has && !strcmp(agent_has, sel->kids[i + 1]->value);
	}
	cr_expect_lt(matched, sel->n / 2, "the Service would also select the agent pods");

	/* the command lines */
	container_argv(yget(k.coord_job, "spec.template.spec.containers.0"), coord, 64);
	container_argv(yget(k.agent_job, "spec.template.spec.containers.0"), agent, 64);
	cr_assert(coord[0] && coord[1] && !strcmp(coord[1], "run"), "the coordinator runs `run`");
	cr_expect(opt_value(coord, "--hosts") && opt_value(coord, "--keys"),
		  "the coordinator needs --hosts and --keys");
	cr_expect_eq(number(opt_value(coord, "--ranks"), "--ranks"), (unsigned long)k.hosts.n_ranks,
		     "--ranks != the ranks listed in the hosts file");
	cr_assert(agent[0] && agent[1] && !strcmp(agent[1], "agent"), "the agents run `agent`");
	snprintf(want, sizeof(want), "tcp://%s:%d", ystr(k.service, "metadata.name"), k.hosts.port);
	cr_expect_str_eq(opt_value(agent, "--coordinator"), want,
			 "agents must connect to the Service by name on the hosts file's port");
	cr_expect(!has_arg(agent, "--index"), "an agent's index comes from JOB_COMPLETION_INDEX");
	cr_expect_str_eq(opt_value(agent, "--keys"), opt_value(coord, "--keys"),
			 "both sides read the same key path");
	k8s_free(&k);
}

/* A pod's path -> this machine's: the files a volume would hold are made
 * under `base` (ConfigMap data written out, the Secret's run.keys from
 * keygen, an empty folder for a claim). */
struct mounts {
	char from[8][256];
	char to[8][600];
	int n;
};

static void mount_volumes(const struct k8s *k, const struct ynode *pod, const char *base,
			  const char *keys, struct mounts *m)
{
	const struct ynode *mounts = yget(pod, "containers.0.volumeMounts");
	const struct ynode *vols = yget(pod, "volumes");

	for (int i = 0; mounts && i < mounts->n && m->n < 8; i++) {
		const char *name = ystr(mounts->kids[i], "name");
		const char *at = ystr(mounts->kids[i], "mountPath");
		const char *sub = ystr(mounts->kids[i], "subPath");
		const struct ynode *vol = NULL;
		char *to = m->to[m->n];

		for (int v = 0; vols && v < vols->n; v++)
			if (!strcmp(ystr(vols->kids[v], "name"), name))
				vol = vols->kids[v];
		cr_assert(vol && at, "volume mount %s has no volume", name ? name : "?");
		snprintf(m->from[m->n], sizeof(m->from[0]), "%s", at);
		if (yget(vol, "secret")) {
			cr_assert(sub && !strcmp(sub, "run.keys"),
				  "the keys are mounted as one file (subPath run.keys)");
			snprintf(to, sizeof(m->to[0]), "%s", keys);
		} else if (yget(vol, "configMap")) {
			const struct ynode *data = yget(k->config_map, "data");

			snprintf(to, sizeof(m->to[0]), "%s/cm-%d", base, i);
			mkdir(to, 0700);
			for (int d = 0; data && d + 1 < data->n; d += 2) {
				char file[800];
				FILE *f;

				snprintf(file, sizeof(file), "%s/%s", to, data->kids[d]->value);
				f = fopen(file, "w");
				cr_assert_not_null(f);
				fputs(data->kids[d + 1]->value, f);
				fclose(f);
			}
		} else {
			snprintf(to, sizeof(m->to[0]), "%s/pvc-%d", base, i);
			mkdir(to, 0700);
		}
		m->n++;
	}
}

/* argv with pod paths mapped, `kernbench` -> the binary under test, and
 * the Service's name -> the coordinator pod's address. */
static void localise(char **argv, const struct mounts *m, const char *service, char store[][700])
{
	argv[0] = (char *)kb_bin();
	for (int i = 1; argv[i]; i++) {
		char *host;

		for (int k = 0; k < m->n; k++) {
			size_t len = strlen(m->from[k]);

			if (!strncmp(argv[i], m->from[k], len) &&
			    (argv[i][len] == '\0' || argv[i][len] == '/')) {
				snprintf(store[i], 700, "%s%s", m->to[k], argv[i] + len);
				argv[i] = store[i];
			}
		}
		if (!strncmp(argv[i], "tcp://", 6) && (host = strstr(argv[i], service)) &&
		    host == argv[i] + 6) {
			snprintf(store[i], 700, "tcp://10.77.0.1%s", host + strlen(service));
			argv[i] = store[i];
		}
	}
}

static struct mh_net net;

static void teardown(void)
{
	mh_net_down(&net);
}

Test(recipes, k8s_pods_run_in_namespaces_and_match_one_host, .timeout = 150, .fini = teardown)
{
	struct k8s k;
	struct mounts cm = { 0 }, am = { 0 };
	char base[256], keys[300], why[512], one[300], err[MH_MAX_HOSTS + 1][300];
	static char cstore[64][700], astore[64][700];
	char *coord[64], *agent[64], *ref[64], env[MH_MAX_HOSTS][48];
	const char *out;
	pid_t pid[MH_MAX_HOSTS + 1];
	struct kb_result res;
	int n = 0;

	k8s_load(&k);
	cr_assert_leq(k.hosts.n_hosts, MH_MAX_HOSTS - 1);
	if (!mh_net_up(&net, k.hosts.n_hosts + 1, why, sizeof(why)))
		cr_skip_test("network namespaces unavailable here: %s", why);
	kb_tmpdir(base, sizeof(base), "k8s");
	mh_keygen(base, keys, sizeof(keys));
	mount_volumes(&k, yget(k.coord_job, "spec.template.spec"), base, keys, &cm);
	mount_volumes(&k, yget(k.agent_job, "spec.template.spec"), base, keys, &am);
	container_argv(yget(k.coord_job, "spec.template.spec.containers.0"), coord, 64);
	container_argv(yget(k.agent_job, "spec.template.spec.containers.0"), agent, 64);
	localise(coord, &cm, ystr(k.service, "metadata.name"), cstore);
	localise(agent, &am, ystr(k.service, "metadata.name"), astore);

	/* the one-host run: the coordinator's job without --hosts and --keys */
	snprintf(one, sizeof(one), "%s/one", base);
	for (int i = 0; coord[i]; i++) {
		bool drop = !strcmp(coord[i], "--hosts") || !strcmp(coord[i], "--keys");

		ref[n++] = coord[i];
		if (!strcmp(coord[i], "--out"))
			ref[n++] = one;
		if (drop || !strcmp(coord[i], "--out"))
			i++;
		if (drop)
			n--;
	}
	ref[n++] = (char *)"--quiet";
	ref[n] = NULL;
	kb_runv(&res, ref);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);

	snprintf(err[0], sizeof(err[0]), "%s/coordinator.err", base);
	pid[0] = mh_spawn(&net, 0, coord, NULL, err[0]);
	for (int h = 0; h < k.hosts.n_hosts; h++) {
		char *e[] = { env[h], NULL };

		snprintf(env[h], sizeof(env[h]), "JOB_COMPLETION_INDEX=%d", h);
		snprintf(err[h + 1], sizeof(err[0]), "%s/agent%d.err", base, h);
		pid[h + 1] = mh_spawn(&net, h + 1, agent, e, err[h + 1]);
	}
	cr_assert_eq(mh_wait(pid[0], 90), 0, "coordinator pod: %s", kb_slurp_stderr(err[0]));
	for (int h = 0; h < k.hosts.n_hosts; h++)
		cr_assert_eq(mh_wait(pid[h + 1], 30), 0, "agent pod %d: %s", h,
			     kb_slurp_stderr(err[h + 1]));
	out = opt_value(coord, "--out");
	cr_assert(out);
	kb_expect_same_run(one, out, true);
	k8s_free(&k);
}

/* The workload the Slurm and MPI recipe runs are given (--ranks 4). */
#define SMALL_JOB (char *)"ring_attention", (char *)"--pes", (char *)"2", (char *)"--mode", \
	(char *)"data", (char *)"--colocate", (char *)"pe", (char *)"--arg", (char *)"pass=q", \
	(char *)"--arg", (char *)"seq_kv=256"

static void one_host_reference(const char *out)
{
	struct kb_result r;

	kb_run(&r, "run", SMALL_JOB, "--ranks", "4", "--quiet", "--out", out, NULL);
	cr_assert_eq(r.status, 0, "one host: %s", r.err);
}

Test(recipes, slurm_batch_script_starts_one_agent_per_node_without_index, .timeout = 30)
{
	char *text = recipe_text("deploy/slurm/kernbench.sbatch");
	char cmd[1200];
	const char *srun;

	cr_expect(strstr(text, "#SBATCH --ntasks-per-node=1"), "one task (agent) per node");
	srun = strstr(text, "\nsrun ");
	cr_assert(srun, "the batch script starts the agents with srun");
	cr_expect(strstr(srun, "agent --coordinator"), "srun starts `kernbench agent`");
	cr_expect(!strstr(srun, "--index"), "an agent's index comes from SLURM_PROCID");
	cr_expect(strstr(srun, "--ntasks=\"$nodes\""), "one agent per node of the allocation");
	snprintf(cmd, sizeof(cmd), "bash -n '%s'", recipe_path("deploy/slurm/kernbench.sbatch"));
	cr_expect_eq(system(cmd), 0, "%s", cmd);
	free(text);
}

Test(recipes, slurm_batch_script_runs_with_srun_tasks_and_matches_one_host, .timeout = 120)
{
	char base[256], keys[300], one[300], many[300], stub[300], link[400], errpath[300];
	char e_path[4200], e_out[400], e_keys[400], e_port[64];
	char *env[] = { e_path, e_out, e_keys, e_port, (char *)"SLURM_NNODES=2",
			(char *)"SLURM_JOB_ID=7", (char *)"KB_RANKS_PER_HOST=2",
			(char *)"KB_COORDINATOR_ADDR=127.0.0.1", NULL, NULL };
	char e_bin[600], script[1024];
	char *argv[] = { (char *)"bash", script, SMALL_JOB, NULL };
	int rc;

	snprintf(script, sizeof(script), "%s", recipe_path("deploy/slurm/kernbench.sbatch"));
	kb_tmpdir(base, sizeof(base), "slurm");
	snprintf(one, sizeof(one), "%s/one", base);
	snprintf(many, sizeof(many), "%s/many", base);
	snprintf(errpath, sizeof(errpath), "%s/sbatch.err", base);
	mh_keygen(base, keys, sizeof(keys));
	one_host_reference(one);

	snprintf(stub, sizeof(stub), "%s/bin", base);
	mkdir(stub, 0700);
	snprintf(link, sizeof(link), "%s/srun", stub);
	cr_assert_eq(symlink(recipe_path("tests/srun_stub.sh"), link), 0);
	snprintf(e_path, sizeof(e_path), "PATH=%s:%s", stub, getenv("PATH"));
	snprintf(e_out, sizeof(e_out), "KB_OUT=%s", many);
	snprintf(e_keys, sizeof(e_keys), "KB_KEYS=%s", keys);
	snprintf(e_port, sizeof(e_port), "KB_PORT=%d", mh_free_port());
	snprintf(e_bin, sizeof(e_bin), "KERNBENCH=%s", kb_bin());
	env[8] = e_bin;
	rc = mh_wait(mh_spawn(NULL, 0, argv, env, errpath), 90);
	cr_assert_eq(rc, 0, "the batch script exited %d: %s", rc, kb_slurp_stderr(errpath));
	kb_expect_same_run(one, many, true);
}

Test(recipes, mpi_examples_agree_and_run_sh_matches_one_host, .timeout = 120)
{
	char base[256], keys[300], one[300], many[300], hosts[300], hostfile[300], errpath[300];
	char coord[64], e_bin[600], script[1024];
	char *env[] = { e_bin, (char *)"MPIRUN_ARGS=--allow-run-as-root --oversubscribe", NULL };
	char *argv[] = { (char *)"sh", script, hostfile, hosts,
			 keys, SMALL_JOB, (char *)"--ranks", (char *)"4", (char *)"--out", many,
			 (char *)"--quiet", NULL };
	struct hosts_info ex;
	char *text = recipe_text("deploy/mpi/hosts.yaml.example");
	char *hf = recipe_text("deploy/mpi/hostfile.example");
	int nodes = 0, rc;
	FILE *f;

	snprintf(script, sizeof(script), "%s", recipe_path("deploy/mpi/run.sh"));
	/* the examples: one machine per agent plus the coordinator's */
	hosts_info(text, "deploy/mpi/hosts.yaml.example", &ex);
	for (char *line = strtok(hf, "\n"); line; line = strtok(NULL, "\n"))
		nodes += line[0] != '#' && strstr(line, "slots=") != NULL;
	cr_expect_eq(nodes, ex.n_hosts + 1, "hostfile.example has %d machines for %d hosts + the "
		     "coordinator", nodes, ex.n_hosts);
	free(text);
	free(hf);

	cr_assert_eq(system("command -v mpirun >/dev/null 2>&1"), 0,
		     "mpirun is not on PATH: run `make deps` (installs openmpi-bin)");
	kb_tmpdir(base, sizeof(base), "mpi-recipe");
	snprintf(one, sizeof(one), "%s/one", base);
	snprintf(many, sizeof(many), "%s/many", base);
	snprintf(hosts, sizeof(hosts), "%s/hosts.yaml", base);
	snprintf(hostfile, sizeof(hostfile), "%s/hostfile", base);
	snprintf(errpath, sizeof(errpath), "%s/run.err", base);
	snprintf(coord, sizeof(coord), "tcp://127.0.0.1:%d", mh_free_port());
	snprintf(e_bin, sizeof(e_bin), "KERNBENCH=%s", kb_bin());
	mh_keygen(base, keys, sizeof(keys));
	mh_write_hosts(hosts, coord, "  - ranks: [0, 1]\n  - ranks: [2, 3]\n");
	f = fopen(hostfile, "w");
	cr_assert_not_null(f);
	fputs("localhost slots=3\n", f);
	fclose(f);
	one_host_reference(one);
	rc = mh_wait(mh_spawn(NULL, 0, argv, env, errpath), 90);
	cr_assert_eq(rc, 0, "deploy/mpi/run.sh exited %d: %s", rc, kb_slurp_stderr(errpath));
	kb_expect_same_run(one, many, true);
}

/* The index paths themselves, without a launcher: agents given only
 * OMPI_COMM_WORLD_RANK (+ size, the coordinator being process 0),
 * PMIX_RANK, SLURM_PROCID (+ SLURM_NTASKS) or JOB_COMPLETION_INDEX. */
Test(recipes, agents_indexed_by_each_launcher_variable_match_one_host, .timeout = 150)
{
	static const char *const ways[][3] = {
		{ "OMPI_COMM_WORLD_RANK=%d", "OMPI_COMM_WORLD_SIZE=3", "1" },
		{ "PMIX_RANK=%d", "OMPI_COMM_WORLD_SIZE=3", "1" },
		{ "SLURM_PROCID=%d", "SLURM_NTASKS=2", "0" },
		{ "JOB_COMPLETION_INDEX=%d", NULL, "0" },
	};
	char base[256], keys[300], one[300], hosts[300];

	kb_tmpdir(base, sizeof(base), "agent-env");
	snprintf(one, sizeof(one), "%s/one", base);
	mh_keygen(base, keys, sizeof(keys));
	one_host_reference(one);
	for (size_t w = 0; w < sizeof(ways) / sizeof(ways[0]); w++) {
		char coord[64], many[300], errs[3][300], envs[2][2][64];
		char *run[] = { (char *)kb_bin(), (char *)"run", SMALL_JOB, (char *)"--ranks",
				(char *)"4", (char *)"--quiet", (char *)"--out", many,
				(char *)"--hosts", hosts, (char *)"--keys", keys, NULL };
		char *agent[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator", coord,
				  (char *)"--keys", keys, NULL };
		pid_t pid[3];

		snprintf(coord, sizeof(coord), "tcp://127.0.0.1:%d", mh_free_port());
		snprintf(hosts, sizeof(hosts), "%s/hosts%zu.yaml", base, w);
		snprintf(many, sizeof(many), "%s/many%zu", base, w);
		/* two agents that took the same index, or an index off by one
		 * (the coordinator as MPI process 0), are refused: the run fails */
		mh_write_hosts(hosts, coord, "  - ranks: [2, 3]\n  - ranks: [0, 1]\n");
		for (int i = 0; i < 3; i++)
			snprintf(errs[i], sizeof(errs[i]), "%s/w%zu-%d.err", base, w, i);
		pid[0] = mh_spawn(NULL, 0, run, NULL, errs[0]);
		for (int h = 0; h < 2; h++) {
			char *e[] = { envs[h][0], ways[w][1] ? envs[h][1] : NULL, NULL };

			snprintf(envs[h][0], sizeof(envs[h][0]), ways[w][0], h + atoi(ways[w][2]));
			if (ways[w][1])
				snprintf(envs[h][1], sizeof(envs[h][1]), "%s", ways[w][1]);
			pid[h + 1] = mh_spawn(NULL, 0, agent, e, errs[h + 1]);
		}
		for (int i = 0; i < 3; i++)
			cr_assert_eq(mh_wait(pid[i], 60), 0, "%s: %s %d: %s", ways[w][0],
				     i ? "agent" : "coordinator", i - 1, kb_slurp_stderr(errs[i]));
		kb_expect_same_run(one, many, true);
	}
}

/* ---------------------------------------------------------------- image */

/* The words of `VAR := ...` in the Makefile (continuation lines joined),
 * space-separated and sorted, into `out`. */
static void make_list(const char *makefile, const char *var, char *out, size_t cap);

/* Sorts the space-separated words of `in` into `out`. */
static void sorted_words(const char *in, char *out, size_t cap)
{
	char copy[4096], *words[256], *save = NULL;
	int n = 0;

	snprintf(copy, sizeof(copy), "%s", in);
	for (char *w = strtok_r(copy, " \t\n", &save); w && n < 256; w = strtok_r(NULL, " \t\n", &save))
		words[n++] = w;
	for (int i = 1; i < n; i++)
		for (int k = i; k > 0 && strcmp(words[k - 1], words[k]) > 0; k--) {
			char *t = words[k];

			words[k] = words[k - 1];
			words[k - 1] = t;
		}
	out[0] = '\0';
	for (int i = 0; i < n; i++)
		snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? " " : "", words[i]);
}

static void make_list(const char *makefile, const char *var, char *out, size_t cap)
{
	char head[64], joined[4096] = "";
	const char *at;

	snprintf(head, sizeof(head), "\n%s := ", var);
	at = strstr(makefile, head);
	cr_assert(at, "the Makefile has no %s", var);
	at += strlen(head);
	for (size_t n = 0; *at && *at != '\n' && n + 1 < sizeof(joined); at++) {
		if (*at == '\\' && at[1] == '\n') {
			at++;
			joined[n++] = ' ';
		} else {
			joined[n++] = *at;
		}
		joined[n] = '\0';
	}
	sorted_words(joined, out, cap);
}

/* The packages of every `apt-get install` in stage `stage` (0-based, by
 * FROM) of a Dockerfile, sorted; its FROM image into `from`. */
static void docker_stage_pkgs(const char *text, int stage, char *from, size_t from_cap,
			      char *out, size_t cap)
{
	char joined[16384] = "", pkgs[4096] = "", *line, *save = NULL;
	int at = -1;
	size_t n = 0;

	/* join continuation lines */
	for (const char *p = text; *p && n + 1 < sizeof(joined); p++) {
		if (*p == '\\' && p[1] == '\n')
			p++, joined[n++] = ' ';
		else
			joined[n++] = *p;
	}
	joined[n] = '\0';
	from[0] = '\0';
	for (line = strtok_r(joined, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *inst, *word, *wsave = NULL;

		if (!strncmp(line, "FROM ", 5)) {
			if (++at == stage)
				sscanf(line + 5, "%127s", from);
			continue;
		}
		if (at != stage || strncmp(line, "RUN ", 4) || !(inst = strstr(line, "apt-get install")))
			continue;
		inst += strlen("apt-get install");
		for (word = strtok_r(inst, " \t", &wsave); word && strcmp(word, "&&");
		     word = strtok_r(NULL, " \t", &wsave))
			if (word[0] != '-')
				snprintf(pkgs + strlen(pkgs), sizeof(pkgs) - strlen(pkgs), " %s", word);
	}
	cr_assert(from[0], "the Dockerfile has no stage %d", stage);
	sorted_words(pkgs, out, cap);
}

/* deploy/k8s/Dockerfile builds with the Makefile's RUN_DEB_PKGS on Debian
 * 12 and runs on IMAGE_DEB_PKGS, which hold every library the binary
 * needs (NEEDED entries, owned by those packages or libc6). */
Test(recipes, dockerfile_installs_the_makefiles_packages, .timeout = 30)
{
	char *docker = recipe_text("deploy/k8s/Dockerfile");
	char *makefile = recipe_text("Makefile");
	char want[4096], got[4096], from[128], cmd[1200], lib[256], list[4200];
	FILE *p;

	docker_stage_pkgs(docker, 0, from, sizeof(from), got, sizeof(got));
	make_list(makefile, "RUN_DEB_PKGS", want, sizeof(want));
	cr_expect_str_eq(got, want, "the build stage installs \"%s\", the Makefile's RUN_DEB_PKGS "
			 "are \"%s\"", got, want);
	cr_expect(!strncmp(from, "debian:12", 9), "the build stage is FROM %s", from);
	docker_stage_pkgs(docker, 1, from, sizeof(from), got, sizeof(got));
	make_list(makefile, "IMAGE_DEB_PKGS", want, sizeof(want));
	cr_expect_str_eq(got, want, "the image installs \"%s\", the Makefile's IMAGE_DEB_PKGS "
			 "are \"%s\"", got, want);
	cr_expect(!strncmp(from, "debian:12", 9), "the image is FROM %s", from);
	cr_expect(strstr(docker, "make install"), "the Dockerfile does not install the binary");

	snprintf(cmd, sizeof(cmd), "objdump -p '%s' | awk '/NEEDED/{print $2}'",
		 getenv("KB_RELEASE_BIN") ? getenv("KB_RELEASE_BIN") : kb_bin());
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(lib, sizeof(lib), p)) {
		char owner[512] = "", q[600];
		FILE *d;

		lib[strcspn(lib, "\n")] = '\0';
		snprintf(q, sizeof(q), "dpkg -S '*/%s' 2>/dev/null | grep -v i386 | head -1 | "
			 "cut -d: -f1", lib);
		d = popen(q, "r");
		if (d && fgets(owner, sizeof(owner), d))
			owner[strcspn(owner, "\n")] = '\0';
		if (d)
			pclose(d);
		if (!owner[0])
			continue; /* not from a Debian package here: nothing to compare */
		snprintf(list, sizeof(list), " %s ", want);
		snprintf(q, sizeof(q), " %s ", owner);
		cr_expect(!strcmp(owner, "libc6") || strstr(list, q),
			  "kernbench needs %s from %s, which IMAGE_DEB_PKGS (%s) lacks", lib, owner,
			  want);
	}
	pclose(p);
	free(docker);
	free(makefile);
}
