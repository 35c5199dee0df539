// libFuzzer target for the checkpoint parsers: arbitrary bytes as a safetensors file (header parser)
// and as model.safetensors.index.json / config.json text. Any input must either parse or throw
// kimi::Error; a crash, a sanitizer report or another exception type is a bug.
#include <cstdint>
#include <span>
#include <string_view>

#include "kimi/error.h"
#include "kimi/model/config.h"
#include "kimi/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    kimi::model::parse_safetensors_header(bytes, size, "fuzz.safetensors");
  } catch (const kimi::Error&) {
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    kimi::model::parse_safetensors_index(text, "fuzz.index.json");
  } catch (const kimi::Error&) {
  }
  try {
    kimi::model::parse_config(text, "fuzz.config.json");
  } catch (const kimi::Error&) {
  }
  return 0;
}
