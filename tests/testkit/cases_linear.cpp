// Harness cases for kimi/ops/linear.h (to be written).
#include "testkit/case.h"

namespace kimi::testkit {

void add_linear_cases(CaseList&, Scale) {}

}  // namespace kimi::testkit
