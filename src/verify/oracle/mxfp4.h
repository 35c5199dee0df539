// src/verify/oracle/mxfp4.h: MXFP4 (SPEC 10) decode and a reference quantizer, written plainly in fp64.
// Codes are handled one per element (0..15, bit 3 = sign); packing is a separate step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kimi::oracle {

// The value of one E2M1 code (bit 3 sign, bits 0-2 index {0, .5, 1, 1.5, 2, 3, 4, 6}).
double e2m1_value(int code);
// The E8M0 scale 2^(e - 127); e = 255 is NaN.
double e8m0_value(int e);

// Codes [o, i] from packed bytes [o, i/2] (low nibble = even column).
std::vector<int> unpack_codes(const std::vector<uint8_t>& packed, int64_t o, int64_t i);
std::vector<uint8_t> pack_codes(const std::vector<int>& codes, int64_t o, int64_t i);

// w[o, i] = e2m1_value(code[o, i]) * e8m0_value(scale[o, i / 32]).
std::vector<double> mxfp4_decode(const std::vector<int>& codes, const std::vector<int>& scales, int64_t o, int64_t i);

// Reference quantizer (kimi/ops/mxfp4.h): per block of 32, e = clamp(floor(log2(amax)) - 2 + 127, 0, 254)
// (0 for an all-zero block, 255 when the block holds NaN or Inf, then codes 0); each value / 2^(e-127)
// goes to the nearest magnitude (ties to the even code), sign bit = the value's sign bit.
void mxfp4_encode(const std::vector<double>& w, int64_t o, int64_t i, std::vector<int>& codes,
                  std::vector<int>& scales);

}  // namespace kimi::oracle
