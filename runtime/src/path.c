/* path.c — names of the critical-path classes and their sum (rt/path.h). */
#include "rt/path.h"

static const char *const names[RT_PATH_CLASSES] = {
#define RT_PATH_NAME(id, name, doc) name,
	RT_PATH_CLASS_MAP(RT_PATH_NAME)
#undef RT_PATH_NAME
};

static const char *const docs[RT_PATH_CLASSES] = {
#define RT_PATH_DOC(id, name, doc) doc,
	RT_PATH_CLASS_MAP(RT_PATH_DOC)
#undef RT_PATH_DOC
};

const char *rt_path_class_name(enum rt_path_class c)
{
	return (unsigned)c < RT_PATH_CLASSES ? names[c] : "?";
}

const char *rt_path_class_doc(enum rt_path_class c)
{
	return (unsigned)c < RT_PATH_CLASSES ? docs[c] : "?";
}

uint64_t rt_path_total(const struct rt_path *p)
{
	uint64_t sum = 0;

	for (int c = 0; c < RT_PATH_CLASSES; c++) {
		if (p->ps[c] > UINT64_MAX - sum)
			return UINT64_MAX;
		sum += p->ps[c];
	}
	return sum;
}
