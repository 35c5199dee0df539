// Harness cases for kimi/ops/moe.h (to be written).
#include "testkit/case.h"

namespace kimi::testkit {

void add_moe_cases(CaseList&, Scale) {}

}  // namespace kimi::testkit
