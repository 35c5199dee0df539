// Harness cases for kimi/ops/kda.h (to be written).
#include "testkit/case.h"

namespace kimi::testkit {

void add_kda_cases(CaseList&, Scale) {}

}  // namespace kimi::testkit
