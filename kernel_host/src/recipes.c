/* recipes.c — the recipe table (the RECIPE_DESCRIPTORS analog of flat-composite design
 * D5). A recipe is a named prologue op that the host expands into MATH
 * micro-ops with every address filled in; the scheduler never sees it.
 *
 * softmax_merge folds a score tile `s` into the running online-softmax
 * state (m, l, O) and emits the probabilities P for the head GEMM P·V:
 *   m_loc = rowmax(s)             m_new = max(m, m_loc)
 *   corr  = exp(m - m_new)        P     = exp(s - m_new)
 *   l_loc = rowsum(P)             l     = l * corr + l_loc
 *   O     = O * corr              m     = m_new
 * Its internal scratch (m_loc, m_new, corr, P, l_loc) is allocated in the
 * current scratch scope; P has the shape and dtype of s. */
#include "tl_private.h"

#include <string.h>

static const struct tl_recipe recipes[] = {
	{
		.name = "softmax_merge",
		.operands = {
			{ "s", false, NULL, NULL },
			{ "m", true, "s", NULL },
			{ "l", true, "s", NULL },
			{ "O", true, NULL, "s" },
		},
		.slots = {
			{ "m_loc", "s", true, false },
			{ "m_new", "s", true, false },
			{ "corr", "s", true, false },
			{ "P", "s", false, true },
			{ "l_loc", "s", true, false },
		},
		.primary_out = "P",
		.steps = {
			{ "rmax", { "s" }, "m_loc", true, -1 },
			{ "max_elem", { "m", "m_loc" }, "m_new", false, 0 },
			{ "exp_diff", { "m", "m_new" }, "corr", false, 0 },
			{ "exp_diff", { "s", "m_new" }, "P", false, 0 },
			{ "rsum", { "P" }, "l_loc", true, -1 },
			{ "fma", { "l", "corr", "l_loc" }, "l", false, 0 },
			{ "mul_bcast", { "O", "corr" }, "O", false, 0 },
			{ "copy", { "m_new" }, "m", false, 0 },
		},
	},
};

const struct tl_recipe *tl_recipe_find(const char *name)
{
	size_t i;

	if (!name)
		return NULL;
	for (i = 0; i < sizeof(recipes) / sizeof(recipes[0]); i++)
		if (strcmp(recipes[i].name, name) == 0)
			return &recipes[i];
	return NULL;
}
