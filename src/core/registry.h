// src/core/registry.h: the table of operators and which backends implement them.
//
// One row per public operator. The CPU backend implements all of them (it is the reference);
// `cuda` is true where src/cuda has a kernel. Keep this table in step with include/kimi/ops/.
#pragma once

#include <span>
#include <string_view>

namespace kimi {

struct OpInfo {
  std::string_view name;
  std::string_view family;  // the header under include/kimi/ops/
  bool cuda;
};

std::span<const OpInfo> op_table();

}  // namespace kimi
