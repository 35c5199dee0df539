// Harness cases for kimi/ops/attn_res.h (to be written).
#include "testkit/case.h"

namespace kimi::testkit {

void add_attn_res_cases(CaseList&, Scale) {}

}  // namespace kimi::testkit
