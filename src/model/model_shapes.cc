#include "model/model_shapes.h"

#include <array>
#include <cctype>

#include "kernels/quant.h"
#include "util/check.h"

namespace tokenmill::model {
namespace {

using gguf::TensorType;

struct FormatRow {
  TensorType type;
  uint32_t file_type;  // LLAMA_FTYPE
};

// The types a user may ask for, in the order help texts list them. Q8_1 and
// Q8_K are intermediate (activation) types that model files do not hold.
// The pure K types map to the "_S" file types, the closest llama.cpp names.
constexpr std::array<FormatRow, 13> kFormats = {{
    {TensorType::F32, 0},
    {TensorType::F16, 1},
    {TensorType::BF16, 32},
    {TensorType::Q8_0, 7},
    {TensorType::Q4_0, 2},
    {TensorType::Q4_1, 3},
    {TensorType::Q5_0, 8},
    {TensorType::Q5_1, 9},
    {TensorType::Q2_K, 10},
    {TensorType::Q3_K, 11},
    {TensorType::Q4_K, 14},
    {TensorType::Q5_K, 16},
    {TensorType::Q6_K, 18},
}};
constexpr uint32_t kFileTypeQ4_K_M = 15;
constexpr std::string_view kQ4_K_MName = "Q4_K_M";

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<WeightFormat> parse_weight_format(std::string_view name) {
  if (upper(name) == kQ4_K_MName) return WeightFormat{TensorType::Q4_K, true};
  const std::optional<TensorType> type = gguf::tensor_type_from_name(name);
  if (!type) return std::nullopt;
  for (const FormatRow& row : kFormats) {
    if (row.type == *type) return WeightFormat{*type, false};
  }
  return std::nullopt;
}

std::string weight_format_name(const WeightFormat& format) {
  if (format.q4_k_m) return std::string(kQ4_K_MName);
  return std::string(gguf::tensor_type_name(format.base));
}

std::string weight_format_choices() {
  std::string out;
  for (const FormatRow& row : kFormats) {
    out += gguf::tensor_type_name(row.type);
    out += '|';
  }
  return out + std::string(kQ4_K_MName);
}

uint32_t llama_file_type(const WeightFormat& format) {
  if (format.q4_k_m) return kFileTypeQ4_K_M;
  for (const FormatRow& row : kFormats) {
    if (row.type == format.base) return row.file_type;
  }
  check_failed("format from parse_weight_format", "unlisted tensor type");
}

TensorType fitting_type(TensorType wanted, int64_t row_length, TensorType last_resort) {
  TM_CHECK(last_resort == TensorType::F32 || last_resort == TensorType::F16);
  const int64_t block = gguf::tensor_type_info(wanted).block_size;
  if (row_length % block == 0) return wanted;
  if (block > gguf::tensor_type_info(TensorType::Q8_0).block_size &&
      row_length % gguf::tensor_type_info(TensorType::Q8_0).block_size == 0) {
    return TensorType::Q8_0;
  }
  return last_resort;
}

std::vector<uint8_t> encode_rows(TensorType type, int64_t num_rows, int64_t row_length, const RowSource& source,
                                 ThreadPool& pool) {
  TM_CHECK(kernels::can_quantize(type));
  const int64_t bytes_per_row = gguf::row_bytes(type, row_length);
  std::vector<uint8_t> out(static_cast<size_t>(bytes_per_row * num_rows));
  pool.parallel_for(num_rows, [&](int, int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(row_length));
    for (int64_t r = begin; r < end; ++r) {
      source(r, row);
      kernels::quantize_row_ref(type, row.data(), out.data() + r * bytes_per_row, row_length);
    }
  });
  return out;
}

}  // namespace tokenmill::model
