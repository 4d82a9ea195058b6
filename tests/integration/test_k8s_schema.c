/* test_k8s_schema.c — issue 20 item 5: deploy/k8s/kernbench.yaml checked
 * against the Kubernetes API schemas of the npm package kubernetes-models
 * (offline: tests/k8s/package-lock.json pins it, `npm ci` into
 * build/node-k8s) by tests/k8s/check_manifest.mjs: the package's
 * validator (types, enums, required fields) and unknown fields, which the
 * API server rejects and the package's schemas allow. Its self-test puts
 * misspelt fields, a wrong enum and a wrong type into the manifest and
 * each must be rejected; and a misspelt copy written here fails naming
 * the field. Skips only without node. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Runs the checker on `file` (`args` before it); its output into out. */
static int check(const char *args, const char *file, char *out, size_t cap)
{
	const char *mods = getenv("KB_K8S_MODULES"), *root = getenv("KB_ROOT");
	char cmd[2048];
	size_t used = 0;
	FILE *p;

	if (system("command -v node >/dev/null 2>&1"))
		cr_skip_test("no node on PATH (make deps-test installs nodejs)");
	cr_assert(mods && root, "KB_K8S_MODULES/KB_ROOT unset: run through `make integration`");
	snprintf(cmd, sizeof(cmd), "node '%s/tests/k8s/check_manifest.mjs' %s '%s' 2>&1", root, args,
		 file);
	p = popen(cmd, "r");
	cr_assert(p);
	out[0] = '\0';
	while (used < cap - 1 && fgets(out + used, (int)(cap - used), p))
		used = strlen(out);
	return pclose(p);
}

static void manifest(char *path, size_t cap)
{
	snprintf(path, cap, "%s/deploy/k8s/kernbench.yaml", getenv("KB_ROOT"));
}

Test(k8s_schema, the_manifest_matches_the_kubernetes_api, .timeout = 60)
{
	char path[600], out[16384];
	int rc;

	manifest(path, sizeof(path));
	rc = check("", path, out, sizeof(out));
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "documents match the Kubernetes API schemas"), "%s", out);
}

Test(k8s_schema, misspelt_fields_wrong_enums_and_types_are_rejected, .timeout = 60)
{
	char path[600], out[16384];
	int rc;

	manifest(path, sizeof(path));
	rc = check("--self-test", path, out, sizeof(out));
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "a misspelt Job field rejected"), "%s", out);
}

/* A copy with `completionMode` misspelt: one line naming it, exit 1. */
Test(k8s_schema, a_misspelt_copy_fails_naming_the_field, .timeout = 60)
{
	char path[600], base[256], copy[400], out[16384];
	size_t len = 0;
	char *text, *at;
	FILE *f;
	int rc;

	manifest(path, sizeof(path));
	text = kb_slurp(path, &len);
	cr_assert(text);
	at = strstr(text, "completionMode: Indexed");
	cr_assert(at, "the manifest has no `completionMode: Indexed`");
	memcpy(at, "completionMoad:", 15);
	kb_tmpdir(base, sizeof(base), "k8s");
	snprintf(copy, sizeof(copy), "%s/bad.yaml", base);
	f = fopen(copy, "w");
	cr_assert(f);
	fwrite(text, 1, len, f);
	fclose(f);
	free(text);
	rc = check("", copy, out, sizeof(out));
	cr_expect_neq(rc, 0, "a misspelt field passed: %s", out);
	cr_expect(strstr(out, ".spec.completionMoad: unknown field"), "%s", out);
}
