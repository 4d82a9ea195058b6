/* payload.h — the checks of what an NPU component receives: a command's
 * tensors (shape, element count, dtype) and a stage's views, each bound
 * the machine's (at most 8 dimensions of at most 2^24, 2^40 elements).
 * The runtime checks only a payload's frame (a body, its critical path)
 * and hands each payload to its receiver's `ops->check` before `handle`:
 * every component of the NPU names npu_check_payload there. One clear
 * line (RT_EDECODE) for what is wrong; RT_EOK for bodies it does not
 * look into. Fuzzed by tests/fuzz (fuzz_decode.h). */
#ifndef NPU_PAYLOAD_H
#define NPU_PAYLOAD_H

#include "kernbench.pb-c.h"
#include "rt/err.h"

enum rt_err npu_check_payload(const Kb__Payload *p);

#endif
