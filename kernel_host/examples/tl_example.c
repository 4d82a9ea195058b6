/* tl_example.c — the built-in softmax kernel compiled as a shared object
 * against tl.h: `kernbench run BUILD/plugins/tl_example.so:softmax` must
 * behave exactly like `kernbench run softmax` (tested). The object resolves
 * tl_* from the kernbench executable (linked -rdynamic). */
#include "../kernels/softmax.c"
