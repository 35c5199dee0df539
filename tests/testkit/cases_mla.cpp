// Harness cases for kimi/ops/mla.h (to be written).
#include "testkit/case.h"

namespace kimi::testkit {

void add_mla_cases(CaseList&, Scale) {}

}  // namespace kimi::testkit
