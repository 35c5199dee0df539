// Harness cases for kimi/ops/conv.h (to be written).
#include "testkit/case.h"

namespace kimi::testkit {

void add_conv_cases(CaseList&, Scale) {}

}  // namespace kimi::testkit
