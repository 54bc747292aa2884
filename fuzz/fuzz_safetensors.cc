// libFuzzer target for the safetensors reader (GPTQ/AWQ checkpoint import).
// Any input must either parse or throw tokenmill::Error; every tensor's data
// must lie inside the input (AddressSanitizer checks the first and last
// byte of each) and match its dtype and shape.
#include <cstddef>
#include <cstdint>
#include <span>

#include "quant/safetensors_reader.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tokenmill::quant::SafetensorsFile;
  try {
    const SafetensorsFile file = SafetensorsFile::parse(std::span<const uint8_t>(data, size), "fuzz.safetensors");
    volatile uint8_t sink = 0;
    for (const auto& t : file.tensors()) {
      if (static_cast<int64_t>(t.data.size()) != t.num_elements() * t.element_bytes) __builtin_trap();
      if (!t.data.empty()) sink = sink ^ t.data.front() ^ t.data.back();
      if (file.find(t.name) == nullptr) __builtin_trap();
      (void)t.shape_string();
    }
  } catch (const tokenmill::Error&) {
  }
  return 0;
}
