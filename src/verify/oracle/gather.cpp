#include "verify/oracle/gather.h"

#include <cstddef>

namespace kimi::oracle {

std::vector<double> gather_rows(const std::vector<double>& src, int64_t d, const std::vector<int64_t>& rows) {
  std::vector<double> out;
  for (int64_t r : rows)
    for (int64_t i = 0; i < d; ++i) out.push_back(src[std::size_t(r * d + i)]);
  return out;
}

}  // namespace kimi::oracle
