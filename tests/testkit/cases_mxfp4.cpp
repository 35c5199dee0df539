// Harness cases for kimi/ops/mxfp4.h (to be written).
#include "testkit/case.h"

namespace kimi::testkit {

void add_mxfp4_cases(CaseList&, Scale) {}

}  // namespace kimi::testkit
