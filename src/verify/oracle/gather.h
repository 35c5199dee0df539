// src/verify/oracle/gather.h: the row gather, plainly: out[n] = src[rows[n]] (row-major, d values per row).
#pragma once

#include <cstdint>
#include <vector>

namespace kimi::oracle {

std::vector<double> gather_rows(const std::vector<double>& src, int64_t d, const std::vector<int64_t>& rows);

}  // namespace kimi::oracle
