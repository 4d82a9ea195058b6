/* test_plugin_decl.c — an ABI 4 plug-in's declared parameters
 * (engines/src/plugin_params.c): what a user gives is checked against the
 * declarations, completed with the defaults in declaration order, and
 * refused in one line naming the parameter, with a did-you-mean. */
#include <criterion/criterion.h>
#include <string.h>

#include "eng.h"

static const struct kb_param_decl decls[] = {
	{ .name = "cycles", .type = KB_PARAM_INT, .unit = "cycles", .min = 1, .max = 1000,
	  .default_value = "10", .description = "per stage" },
	{ .name = "scale", .type = KB_PARAM_REAL, .min = 0.5, .max = 2.0,
	  .default_value = "1.0", .description = "a factor" },
	{ .name = "mode", .type = KB_PARAM_TEXT, .default_value = "fast" },
	{ .name = "lanes", .type = KB_PARAM_INT, .min = 1, .max = 64, .description = "required" },
};

static const struct kb_engine_plugin plugin = {
	.abi = KB_ENGINE_PLUGIN_ABI, .engine = KB_ENGINE_GEMM, .name = "decl_test",
	.params = decls, .n_params = sizeof(decls) / sizeof(decls[0]),
};

static struct kb_plugin_param out[8];
static char store[8][ENG_PARAM_VALUE_MAX];

static enum rt_err bind(const struct kb_engine_plugin *p, const struct kb_plugin_param *given,
			size_t n, size_t *n_out)
{
	memset(out, 0, sizeof(out));
	return eng_plugin_params_bind(ENG_GEMM, "x.so", p, given, n, out, 8, n_out, store);
}

Test(plugin_decl, defaults_fill_in_declaration_order_and_values_are_normalised, .timeout = 10)
{
	const struct kb_plugin_param given[] = { { "lanes", "0008" }, { "scale", "1.5" } };
	size_t n = 0;

	cr_assert_eq(bind(&plugin, given, 2, &n), RT_EOK, "%s", rt_last_error());
	cr_assert_eq(n, 4);
	cr_expect_str_eq(out[0].name, "cycles");
	cr_expect_str_eq(out[0].value, "10");
	cr_expect_str_eq(out[1].value, "1.5");
	cr_expect_str_eq(out[2].value, "fast");
	cr_expect_str_eq(out[3].name, "lanes");
	cr_expect_str_eq(out[3].value, "8");
	cr_expect_eq(kb_param_int(out, n, "lanes"), 8);
	cr_expect_eq(kb_param_int(out, n, "cycles"), 10);
	cr_expect_float_eq(kb_param_real(out, n, "scale"), 1.5, 1e-12);
	cr_expect_null(kb_param_text(out, n, "nope"));
}

/* Each refusal is a usage error whose line names the parameter. */
static void refused(const char *name, const char *value, const char *want)
{
	const struct kb_plugin_param given[] = { { "lanes", "4" }, { name, value } };
	size_t n = 7;

	cr_expect_eq(bind(&plugin, given, 2, &n), RT_EUSAGE, "%s=%s accepted", name, value);
	cr_expect(strstr(rt_last_error(), want), "%s=%s: %s", name, value, rt_last_error());
	cr_expect(!strchr(rt_last_error(), '\n'), "more than one line: %s", rt_last_error());
	cr_expect_eq(n, 0);
}

Test(plugin_decl, bad_values_are_refused_naming_the_parameter, .timeout = 10)
{
	refused("cycels", "5", "did you mean 'cycles'?");
	refused("speed", "5", "unknown parameter 'speed' of plug-in x.so (it takes: cycles, scale, "
			      "mode, lanes)");
	refused("cycles", "0", "cycles='0'");
	refused("cycles", "1001", "from 1 to 1000 (cycles)");
	refused("cycles", "-3", "cycles='-3'");
	refused("cycles", "1e2", "a decimal integer");
	refused("cycles", "", "cycles=''");
	refused("scale", "2.5", "scale='2.5'");
	refused("scale", "nan", "a number from 0.5 to 2");
	refused("scale", "1.0x", "scale='1.0x'");
	refused("lanes", "5", "'lanes' given twice");
}

Test(plugin_decl, a_required_parameter_must_be_given, .timeout = 10)
{
	size_t n = 0;

	cr_expect_eq(bind(&plugin, NULL, 0, &n), RT_EUSAGE);
	cr_expect(strstr(rt_last_error(), "needs 'lanes' (required)"), "%s", rt_last_error());
}

/* A declaration its own range refuses is the plug-in's bug, named as such. */
Test(plugin_decl, a_bad_declaration_is_the_plugins_error, .timeout = 10)
{
	static const struct kb_param_decl bad_default[] = {
		{ .name = "cycles", .type = KB_PARAM_INT, .min = 1, .max = 9, .default_value = "10" },
	};
	static const struct kb_param_decl bad_name[] = {
		{ .name = "cy cles", .type = KB_PARAM_INT, .min = 1, .max = 9 },
	};
	static const struct kb_param_decl twice[] = {
		{ .name = "a", .type = KB_PARAM_TEXT }, { .name = "a", .type = KB_PARAM_TEXT },
	};
	static const struct kb_param_decl inverted[] = {
		{ .name = "a", .type = KB_PARAM_REAL, .min = 2, .max = 1 },
	};
	const struct kb_param_decl *all[] = { bad_default, bad_name, twice, inverted };
	const size_t sizes[] = { 1, 1, 2, 1 };
	size_t n;

	for (size_t i = 0; i < 4; i++) {
		struct kb_engine_plugin p = plugin;

		p.params = all[i];
		p.n_params = sizes[i];
		cr_expect_eq(bind(&p, NULL, 0, &n), RT_ECONFIG, "declaration set %zu accepted", i);
		cr_expect(strstr(rt_last_error(), "is not valid"), "%s", rt_last_error());
	}
}

Test(plugin_decl, described_one_line_per_parameter, .timeout = 10)
{
	struct rt_buf b;

	rt_buf_init(&b);
	eng_plugin_params_describe(&plugin, "# ", &b);
	cr_expect(strstr(b.data, "# cycles  int, cycles, 1..1000, default 10: per stage\n"), "%s",
		  b.data);
	cr_expect(strstr(b.data, "# scale  real, 0.5..2, default 1.0: a factor\n"), "%s", b.data);
	cr_expect(strstr(b.data, "# mode  text, default fast: \n"), "%s", b.data);
	cr_expect(strstr(b.data, "# lanes  int, 1..64, required: required\n"), "%s", b.data);
	rt_buf_release(&b);
}
