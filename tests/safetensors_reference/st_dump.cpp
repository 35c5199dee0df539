// tests/safetensors_reference/st_dump.cpp: opens one .safetensors file with kimi's loader and prints what it
// read, as one JSON object on stdout, for compare.py:
//   {"tensors": {"<name>": {"dtype": "F32", "shape": [..], "hex": "<data bytes>", "aligned": true}, ...},
//    "metadata": {..}, "copied_bytes": N}
// or {"error": "<the kimi::Error message>"}. Exit status 0 either way (2 on a wrong command line), so that
// the script, not the tool, decides whether refusing the file was right.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "kimi/error.h"
#include "kimi/model/safetensors.h"

namespace {
const char* tag(kimi::DType t) {
  switch (t) {
    case kimi::DType::f32:
      return "F32";
    case kimi::DType::bf16:
      return "BF16";
    case kimi::DType::f16:
      return "F16";
    case kimi::DType::u8:
      return "U8";
    case kimi::DType::i32:
      return "I32";
    case kimi::DType::i64:
      return "I64";
  }
  return "?";
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE.safetensors\n", argv[0]);
    return 2;
  }
  nlohmann::json out;
  try {
    const kimi::model::SafetensorsFile f(argv[1]);
    out["metadata"] = f.header().metadata;
    out["tensors"] = nlohmann::json::object();
    out["copied_bytes"] = f.copied_bytes();
    for (const kimi::model::TensorInfo& t : f.header().tensors) {
      const kimi::TensorView v = f.view(t);
      static const char* digits = "0123456789abcdef";
      std::string hex;
      const auto* p = static_cast<const uint8_t*>(v.data);
      for (uint64_t i = 0; i < t.nbytes; ++i) {
        hex += digits[p[i] >> 4];
        hex += digits[p[i] & 15];
      }
      const bool aligned =
          t.nbytes == 0 || reinterpret_cast<uintptr_t>(v.data) % uintptr_t(v.element_size()) == 0;
      out["tensors"][t.name] = {
          {"dtype", tag(t.dtype)}, {"shape", t.shape}, {"hex", hex}, {"aligned", aligned}};
    }
  } catch (const kimi::Error& e) {
    out = {{"error", e.what()}};
  }
  std::cout << out.dump() << "\n";
  return 0;
}
