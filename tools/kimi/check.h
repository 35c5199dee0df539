// tools/kimi/check.h: `kimi check`, every operator on every available backend against the fp64
// oracle at Kimi K3 / Kimi-Linear shapes (scaled to fit the machine), printed as one table.
#pragma once

#include <string>

namespace kimi::cli {

struct CheckOptions {
  std::string filter;    // run only operators whose name contains this (kimi::Error if none does)
  bool small = false;    // the ctest sizes instead of model shapes
};

// Returns the number of failing cases.
int run_check(const CheckOptions& opt);

}  // namespace kimi::cli
