// Runs every harness case (src/verify/cases) on every available device against the fp64 oracle.
#include <gtest/gtest.h>

#include "kimi/device.h"
#include "verify/cases/case.h"

namespace kimi::verify {
namespace {

struct Param {
  size_t index;
  Device dev;
};

const CaseList& cases() {
  static const CaseList list = all_cases(Scale::test);
  return list;
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (Device d : available_devices())
    for (size_t i = 0; i < cases().size(); ++i)
      if (op_supported(cases()[i].op, d)) p.push_back({i, d});
  return p;
}

class BackendOps : public ::testing::TestWithParam<Param> {};

TEST_P(BackendOps, MatchesOracle) {
  const Case& c = cases()[GetParam().index];
  const Result r = c.run(GetParam().dev);
  SCOPED_TRACE(c.op + " " + c.shape + " " + dtype_str(c.dtype) + " " + r.detail);
  EXPECT_TRUE(r.finite);
  EXPECT_TRUE(r.guards_ok) << "an output was written outside its view";
  EXPECT_LE(r.err, c.tol);
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const Case& c = cases()[info.param.index];
  std::string n = c.op + "_" + dtype_str(c.dtype) + "_" + (info.param.dev.type == DeviceType::cpu ? "cpu" : "cuda") +
                  "_" + std::to_string(info.param.index);
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(All, BackendOps, ::testing::ValuesIn(params()), name);

TEST(Registry, EveryOperatorHasAHarnessCase) {
  for (const std::string& op : all_ops()) {
    bool found = false;
    for (const Case& c : cases()) found = found || c.op == op;
    EXPECT_TRUE(found) << op << " has no case in src/verify/cases";
  }
}

}  // namespace
}  // namespace kimi::verify
