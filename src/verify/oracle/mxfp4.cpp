#include "verify/oracle/mxfp4.h"

#include <cmath>
#include <limits>

namespace kimi::oracle {

namespace {
const double kMag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
}

double e2m1_value(int code) {
  const double m = kMag[code & 7];
  return (code & 8) ? -m : m;
}

double e8m0_value(int e) {
  if (e == 255) return std::numeric_limits<double>::quiet_NaN();
  return std::pow(2.0, e - 127);
}

std::vector<int> unpack_codes(const std::vector<uint8_t>& packed, int64_t o, int64_t i) {
  std::vector<int> c(static_cast<size_t>(o * i));
  for (int64_t r = 0; r < o; ++r)
    for (int64_t col = 0; col < i; ++col) {
      const uint8_t byte = packed[size_t(r * (i / 2) + col / 2)];
      c[size_t(r * i + col)] = col % 2 == 0 ? (byte % 16) : (byte / 16);
    }
  return c;
}

std::vector<uint8_t> pack_codes(const std::vector<int>& codes, int64_t o, int64_t i) {
  std::vector<uint8_t> p(static_cast<size_t>(o * i / 2));
  for (int64_t r = 0; r < o; ++r)
    for (int64_t col = 0; col < i; col += 2)
      p[size_t(r * (i / 2) + col / 2)] =
          uint8_t(codes[size_t(r * i + col)] + 16 * codes[size_t(r * i + col + 1)]);
  return p;
}

std::vector<double> mxfp4_decode(const std::vector<int>& codes, const std::vector<int>& scales, int64_t o, int64_t i) {
  std::vector<double> w(static_cast<size_t>(o * i));
  for (int64_t r = 0; r < o; ++r)
    for (int64_t col = 0; col < i; ++col)
      w[size_t(r * i + col)] = e2m1_value(codes[size_t(r * i + col)]) * e8m0_value(scales[size_t(r * (i / 32) + col / 32)]);
  return w;
}

void mxfp4_encode(const std::vector<double>& w, int64_t o, int64_t i, std::vector<int>& codes,
                  std::vector<int>& scales) {
  codes.assign(static_cast<size_t>(o * i), 0);
  scales.assign(static_cast<size_t>(o * i / 32), 0);
  for (int64_t r = 0; r < o; ++r)
    for (int64_t b = 0; b < i / 32; ++b) {
      double amax = 0;
      bool finite = true;
      for (int64_t j = 0; j < 32; ++j) {
        const double v = w[size_t(r * i + b * 32 + j)];
        if (!std::isfinite(v)) finite = false;
        else if (std::fabs(v) > amax) amax = std::fabs(v);
      }
      int e = 0;
      if (!finite) {
        e = 255;
      } else if (amax > 0) {
        e = int(std::floor(std::log2(amax))) - 2 + 127;
        if (e < 0) e = 0;
        if (e > 254) e = 254;
      }
      scales[size_t(r * (i / 32) + b)] = e;
      if (!finite) continue;
      const double s = std::pow(2.0, e - 127);
      for (int64_t j = 0; j < 32; ++j) {
        const double v = w[size_t(r * i + b * 32 + j)];
        const double q = std::fabs(v) / s;
        int best = 0;  // nearest magnitude; on a tie the even index wins
        for (int c = 1; c < 8; ++c) {
          const double dc = std::fabs(q - kMag[c]), db = std::fabs(q - kMag[best]);
          if (dc < db || (dc == db && c % 2 == 0)) best = c;
        }
        codes[size_t(r * i + b * 32 + j)] = (std::signbit(v) ? 8 : 0) + best;
      }
    }
}

}  // namespace kimi::oracle
