#include "quant/int4_gguf_encode.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "kernels/legacy_codes.h"
#include "kernels/quant.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;
constexpr int kInt4Block = 32;

// Codes of one block, or false when `type` cannot hold it exactly (or
// nearly, for Q4_1) with d = s; then the caller re-rounds it.
bool int4_block_codes(TensorType type, const Int4Matrix& m, int64_t r, int64_t c0, uint16_t& d, uint16_t& off,
                      int* codes) {
  const int32_t g = m.group[c0];
  for (int j = 1; j < kInt4Block; ++j) {
    if (m.group[c0 + j] != g) return false;
  }
  const int z = m.zeros[g * m.rows + r];
  d = m.scales[g * m.rows + r];
  off = 0;
  const uint8_t* q = &m.codes[r * m.cols + c0];
  switch (type) {
    case TensorType::Q8_0:
      for (int j = 0; j < kInt4Block; ++j) codes[j] = q[j] - z;
      return true;
    case TensorType::Q5_0:
      for (int j = 0; j < kInt4Block; ++j) codes[j] = q[j] - z + 16;
      return true;
    case TensorType::Q4_0:
      if (z != 8) return false;
      for (int j = 0; j < kInt4Block; ++j) codes[j] = q[j];
      return true;
    case TensorType::Q4_1:
      off = fp32_to_fp16(-fp16_to_fp32(d) * static_cast<float>(z));
      for (int j = 0; j < kInt4Block; ++j) codes[j] = q[j];
      return true;
    default: return false;
  }
}

struct Int4RowsResult {
  int64_t requantized = 0;
  double max_abs_error = 0.0;
};

Int4RowsResult encode_int4_rows(const Int4Matrix& m, TensorType type, int64_t row_begin, int64_t row_end,
                                uint8_t* out) {
  const int64_t block_bytes = gguf::tensor_type_info(type).bytes_per_block;
  Int4RowsResult res;
  float want[kInt4Block], got[kInt4Block];
  int codes[kInt4Block];
  for (int64_t r = row_begin; r < row_end; ++r) {
    uint8_t* dst = out + r * (m.cols / kInt4Block) * block_bytes;
    for (int64_t c0 = 0; c0 < m.cols; c0 += kInt4Block, dst += block_bytes) {
      for (int j = 0; j < kInt4Block; ++j) want[j] = m.value(r, c0 + j);
      uint16_t d = 0, off = 0;
      if (int4_block_codes(type, m, r, c0, d, off, codes)) {
        kernels::pack_legacy_block(type, d, off, codes, dst);
      } else {
        kernels::quantize_row_ref(type, want, dst, kInt4Block);
        ++res.requantized;
      }
      kernels::dequantize_row_ref(type, dst, got, kInt4Block);
      for (int j = 0; j < kInt4Block; ++j) {
        res.max_abs_error = std::max(res.max_abs_error, static_cast<double>(std::fabs(got[j] - want[j])));
      }
    }
  }
  return res;
}

}  // namespace

bool groups_align_to_blocks(const Int4Matrix& m) {
  if (m.cols % kInt4Block != 0) return false;
  for (int64_t c0 = 0; c0 < m.cols; c0 += kInt4Block) {
    for (int j = 1; j < kInt4Block; ++j) {
      if (m.group[c0 + j] != m.group[c0]) return false;
    }
  }
  return true;
}

bool all_zeros_are_eight(const Int4Matrix& m) {
  return std::all_of(m.zeros.begin(), m.zeros.end(), [](uint8_t z) { return z == 8; });
}

std::vector<uint8_t> encode_int4_matrix(const Int4Matrix& m, TensorType type, ThreadPool& pool,
                                        Int4EncodeStats& stats) {
  TM_CHECK(type == TensorType::Q4_0 || type == TensorType::Q4_1 || type == TensorType::Q5_0 ||
           type == TensorType::Q8_0);
  TM_CHECK(m.cols % kInt4Block == 0);
  std::vector<uint8_t> out(static_cast<size_t>(gguf::row_bytes(type, m.cols) * m.rows));
  std::mutex mu;
  Int4RowsResult total;
  pool.parallel_for(m.rows, [&](int, int64_t begin, int64_t end) {
    const Int4RowsResult part = encode_int4_rows(m, type, begin, end, out.data());
    std::lock_guard<std::mutex> lock(mu);
    total.requantized += part.requantized;
    total.max_abs_error = std::max(total.max_abs_error, part.max_abs_error);
  });
  stats.num_blocks = m.rows * (m.cols / kInt4Block);
  stats.requantized_blocks = total.requantized;
  stats.max_abs_error = total.max_abs_error;
  return out;
}

}  // namespace tokenmill::quant
