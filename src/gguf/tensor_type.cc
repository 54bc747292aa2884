#include "gguf/tensor_type.h"

#include <array>
#include <cctype>

#include "util/check.h"

namespace tokenmill::gguf {
namespace {

// Block geometry as stored in GGUF files. Sizes follow the block layouts:
// e.g. Q4_0 = fp16 scale + 32 nibbles (2 + 16), Q4_K = fp16 d, fp16 dmin,
// 12 bytes of packed 6-bit scales, 128 bytes of nibbles (2 + 2 + 12 + 128).
// Q8_1 is an intermediate type (fp16 d, fp16 sum, 32 int8) that files
// normally do not hold.
constexpr std::array<TensorTypeInfo, 15> kTypes = {{
    {TensorType::F32, "F32", 1, 4},
    {TensorType::F16, "F16", 1, 2},
    {TensorType::Q4_0, "Q4_0", 32, 18},
    {TensorType::Q4_1, "Q4_1", 32, 20},
    {TensorType::Q5_0, "Q5_0", 32, 22},
    {TensorType::Q5_1, "Q5_1", 32, 24},
    {TensorType::Q8_0, "Q8_0", 32, 34},
    {TensorType::Q8_1, "Q8_1", 32, 36},
    {TensorType::Q2_K, "Q2_K", 256, 84},
    {TensorType::Q3_K, "Q3_K", 256, 110},
    {TensorType::Q4_K, "Q4_K", 256, 144},
    {TensorType::Q5_K, "Q5_K", 256, 176},
    {TensorType::Q6_K, "Q6_K", 256, 210},
    {TensorType::Q8_K, "Q8_K", 256, 292},
    {TensorType::BF16, "BF16", 1, 2},
}};

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<TensorTypeInfo> tensor_type_info(uint32_t id) {
  for (const TensorTypeInfo& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == id) return info;
  }
  return std::nullopt;
}

const TensorTypeInfo& tensor_type_info(TensorType type) {
  for (const TensorTypeInfo& info : kTypes) {
    if (info.type == type) return info;
  }
  check_failed("known TensorType", "value outside the enum");
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (const TensorTypeInfo& info : kTypes) {
    if (equal_ignoring_case(info.name, name)) return info.type;
  }
  return std::nullopt;
}

std::string_view tensor_type_name(TensorType type) { return tensor_type_info(type).name; }

int64_t row_bytes(TensorType type, int64_t n) {
  const TensorTypeInfo& info = tensor_type_info(type);
  TM_CHECK(n >= 0 && n % info.block_size == 0);
  return n / info.block_size * info.bytes_per_block;
}

}  // namespace tokenmill::gguf
