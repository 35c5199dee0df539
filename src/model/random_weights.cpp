// Implementation of kimi/model/random_weights.h.
#include "kimi/model/random_weights.h"

#include <algorithm>
#include <cmath>

namespace kimi::model {

namespace {
bool ends_with(const std::string& n, const char* suffix) {
  const std::string s(suffix);
  return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
}
}  // namespace

double RandomInit::min() const { return dtype == DType::u8 ? lo : double(offset) - double(scale) * bound; }
double RandomInit::max() const { return dtype == DType::u8 ? hi : double(offset) + double(scale) * bound; }

RandomInit random_init(const TensorSpec& s, const Config& c) {
  RandomInit r;
  r.count = 1;
  for (int64_t d : s.shape) r.count *= d;
  const std::string& n = s.name;
  switch (s.role) {
    case TensorRole::mxfp4_packed:
      r.dtype = DType::u8, r.lo = 0, r.hi = 255;
      break;
    case TensorRole::mxfp4_scale: {
      const int64_t in = s.shape[1] * 32;
      const int e0 = 127 + int(std::floor(std::log2(0.5 / std::sqrt(double(in)))));
      r.dtype = DType::u8, r.lo = e0 - 1, r.hi = e0;
      break;
    }
    case TensorRole::fp32_param:
      r.dtype = DType::f32, r.bound = 1.f;
      if (ends_with(n, "A_log")) {
        r.count = std::min<int64_t>(c.kda_num_heads, r.count), r.scale = 0.5f, r.offset = -0.5f;
      } else if (ends_with(n, "dt_bias")) {
        r.scale = 1.f;
      } else if (ends_with(n, "conv1d.weight")) {
        r.scale = 0.5f;
      } else if (ends_with(n, "o_norm.weight")) {
        r.scale = 0.1f, r.offset = 1.f;
      } else {  // the router correction bias
        r.scale = 0.05f;
      }
      break;
    case TensorRole::weight: {
      const bool norm = ends_with(n, "norm.weight");  // also layernorm.weight
      r.dtype = DType::bf16;
      r.bound = norm ? 0.1f : float(std::sqrt(3.0 / double(s.shape.back())));
      r.offset = norm ? 1.f : 0.f;
      break;
    }
  }
  return r;
}

uint64_t tensor_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h ^ (seed * 0x9E3779B97F4A7C15ull);
}

}  // namespace kimi::model
