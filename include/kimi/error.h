// kimi/error.h: the one error type every public function throws.
//
// Messages name the operator and the argument and give the expected and the actual value, e.g.
//   kda_chunk_fwd: argument 'k': expected shape [1, 17, 4, 64] (like q), got [1, 17, 4, 32]
// Nothing is read or written before validation has passed. An error raised after that (a CUDA failure, a
// backend limit found at launch) leaves the operator's outputs unspecified; pools and caches updated in place
// (KDA state, conv and latent caches) are only ever touched by the launch itself, after every check.
#pragma once

#include <stdexcept>
#include <string>

namespace kimi {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace kimi
