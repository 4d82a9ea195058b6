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

void rt_path_segment(const struct rt_path *p, uint64_t end_ps, struct rt_path_seg *out)
{
	uint64_t most = 0;

	out->pred = p->tail;
	out->start_ps = p->tail_ps;
	out->end_ps = end_ps;
	out->cls = RT_PATH_DISPATCH;
	out->pad = 0;
	for (int c = 0; c < RT_PATH_CLASSES; c++)
	{
		uint64_t grew = p->ps[c] > p->tail_vec[c] ? p->ps[c] - p->tail_vec[c] : 0;

		if (grew > most) { /* a tie keeps the first */
			most = grew;
			out->cls = (uint32_t)c;
		}
	}
}

enum rt_err rt_path_walk(rt_path_read_fn read, rt_path_visit_fn visit, void *ctx,
			 uint32_t n_components, uint32_t comp, uint64_t seg,
			 uint64_t max_steps)
{
	uint64_t from = 0; /* where the segment after this one begins */

	for (uint64_t step = 0;; step++) {
		struct rt_path_seg s;
		enum rt_err err;

		if (step == max_steps)
			return rt_fail(RT_EDECODE, "critical path: more than %llu segments (a cycle)",
				       (unsigned long long)max_steps);
		if (comp >= n_components)
			return rt_fail(RT_EDECODE, "critical path: a segment names component %u of %u",
				       comp, n_components);
		err = read(ctx, comp, seg, &s);
		if (err)
			return err;
		/* a segment ends where the one after it begins */
		if ((step && s.end_ps != from) || s.start_ps > s.end_ps ||
		    s.cls >= RT_PATH_CLASSES)
			return rt_fail(RT_EDECODE,
				       "critical path: segment %llu of component %u [%llu, %llu] ps "
				       "(class %u) does not end where the next one begins (%llu ps)",
				       (unsigned long long)seg, comp, (unsigned long long)s.start_ps,
				       (unsigned long long)s.end_ps, s.cls, (unsigned long long)from);
		err = visit(ctx, comp, &s);
		if (err || !s.pred)
			return err;
		from = s.start_ps;
		comp = RT_PATH_TAIL_SRC(s.pred);
		seg = RT_PATH_TAIL_SEG(s.pred);
	}
}
