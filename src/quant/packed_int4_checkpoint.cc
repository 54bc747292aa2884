#include "quant/packed_int4_checkpoint.h"

#include <array>
#include <cstring>

#include "util/check.h"
#include "util/error.h"

namespace tokenmill::quant {
namespace {

// AutoAWQ's GEMM packing order: nibble k of a word holds output column
// kAwqNibbleColumn[k] of its 8-column group.
constexpr std::array<int, 8> kAwqNibbleColumn = {0, 2, 4, 6, 1, 3, 5, 7};

void expect_packed_tensor(const PackedLinear& p, const SafetensorsTensor* t, const char* what, const char* dtype,
                          std::vector<int64_t> shape, const std::string& shape_rule) {
  if (t == nullptr) fail("missing tensor {}.{}", p.prefix, what);
  if (t->dtype != dtype) fail("{}: dtype {} (expected {})", t->name, t->dtype, dtype);
  if (t->shape != shape) {
    SafetensorsTensor want;
    want.shape = std::move(shape);
    fail("{}: shape {} does not match the base model: expected {} ({})", t->name, t->shape_string(),
         want.shape_string(), shape_rule);
  }
}

// Word i of an int32 tensor (data may be unaligned in the file).
uint32_t packed_word(const SafetensorsTensor& t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, t.data.data() + 4 * i, 4);
  return w;
}

uint16_t packed_half(const SafetensorsTensor& t, int64_t i) {
  uint16_t h;
  std::memcpy(&h, t.data.data() + 2 * i, 2);
  return h;
}

int64_t packed_group_size(const PackedLinear& p, const CheckpointConfig& c, int64_t cols) {
  const int64_t g = c.group_size == -1 ? cols : c.group_size;
  if (cols % g != 0) {
    fail("{}: unsupported group size {}: it does not divide the input dimension {}", p.prefix, c.group_size, cols);
  }
  return g;
}

// Zeros [G, out/8] packed along the output dim; `awq` selects the interleave.
void unpack_packed_zeros(const SafetensorsTensor& qzeros, bool awq, int add, Int4Matrix& m) {
  const int64_t words = m.rows / 8;
  for (int64_t g = 0; g < m.num_groups; ++g) {
    for (int64_t c = 0; c < words; ++c) {
      const uint32_t w = packed_word(qzeros, g * words + c);
      for (int k = 0; k < 8; ++k) {
        const int64_t o = 8 * c + (awq ? kAwqNibbleColumn[k] : k);
        m.zeros[g * m.rows + o] = static_cast<uint8_t>(((w >> (4 * k)) & 15u) + add);
      }
    }
  }
}

void unpack_gptq_codes(const SafetensorsTensor& qweight, Int4Matrix& m) {
  for (int64_t r = 0; r < m.cols / 8; ++r) {
    for (int64_t o = 0; o < m.rows; ++o) {
      const uint32_t w = packed_word(qweight, r * m.rows + o);
      uint8_t* dst = &m.codes[o * m.cols + 8 * r];
      for (int k = 0; k < 8; ++k) dst[k] = static_cast<uint8_t>((w >> (4 * k)) & 15u);
    }
  }
}

void unpack_awq_codes(const SafetensorsTensor& qweight, Int4Matrix& m) {
  const int64_t words = m.rows / 8;
  for (int64_t i = 0; i < m.cols; ++i) {
    for (int64_t c = 0; c < words; ++c) {
      const uint32_t w = packed_word(qweight, i * words + c);
      for (int k = 0; k < 8; ++k) {
        m.codes[(8 * c + kAwqNibbleColumn[k]) * m.cols + i] = static_cast<uint8_t>((w >> (4 * k)) & 15u);
      }
    }
  }
}

void read_packed_groups(const PackedLinear& p, int64_t group_size, Int4Matrix& m) {
  m.group.resize(static_cast<size_t>(m.cols));
  for (int64_t i = 0; i < m.cols; ++i) {
    m.group[i] = static_cast<int32_t>(i / group_size);
    if (p.g_idx == nullptr) continue;
    const auto g = static_cast<int32_t>(packed_word(*p.g_idx, i));
    if (g < 0 || g >= m.num_groups) {
      fail("{}: g_idx[{}] = {} is outside the {} groups", p.g_idx->name, i, g, m.num_groups);
    }
    m.group[i] = g;
  }
}

}  // namespace

Int4Matrix unpack_linear(const PackedLinear& p, const CheckpointConfig& c, int64_t rows, int64_t cols) {
  const bool awq = c.method == CheckpointMethod::kAwq;
  if (rows % 8 != 0 || cols % 8 != 0) {
    fail("{}: a {} x {} matrix cannot hold 4-bit codes packed 8 to a word", p.prefix, rows, cols);
  }
  const int64_t group_size = packed_group_size(p, c, cols);
  Int4Matrix m;
  m.rows = rows, m.cols = cols, m.num_groups = cols / group_size;
  if (awq) {
    expect_packed_tensor(p, p.qweight, "qweight", "I32", {cols, rows / 8}, "[in, out / 8]");
  } else {
    expect_packed_tensor(p, p.qweight, "qweight", "I32", {cols / 8, rows}, "[in / 8, out]");
  }
  expect_packed_tensor(p, p.qzeros, "qzeros", "I32", {m.num_groups, rows / 8}, "[in / group, out / 8]");
  expect_packed_tensor(p, p.scales, "scales", "F16", {m.num_groups, rows}, "[in / group, out]");
  if (awq && p.g_idx != nullptr) fail("{}: AWQ checkpoints have no g_idx", p.g_idx->name);
  if (!awq && c.desc_act && p.g_idx == nullptr) fail("missing tensor {}.g_idx (desc_act is set)", p.prefix);
  if (p.g_idx != nullptr) expect_packed_tensor(p, p.g_idx, "g_idx", "I32", {cols}, "[in]");
  m.codes.resize(static_cast<size_t>(rows * cols));
  m.zeros.resize(static_cast<size_t>(m.num_groups * rows));
  m.scales.resize(m.zeros.size());
  for (size_t i = 0; i < m.scales.size(); ++i) m.scales[i] = packed_half(*p.scales, static_cast<int64_t>(i));
  unpack_packed_zeros(*p.qzeros, awq, c.zero_stored_minus_one ? 1 : 0, m);
  if (awq) {
    unpack_awq_codes(*p.qweight, m);
  } else {
    unpack_gptq_codes(*p.qweight, m);
  }
  read_packed_groups(p, group_size, m);
  return m;
}

std::vector<int64_t> rope_row_order(int64_t rows, int64_t n_head) {
  if (n_head <= 0 || rows % n_head != 0 || (rows / n_head) % 2 != 0) {
    fail("cannot reorder {} rows for rotary embedding over {} heads (need an even head size)", rows, n_head);
  }
  const int64_t head_dim = rows / n_head, half_dim = head_dim / 2;
  std::vector<int64_t> order(static_cast<size_t>(rows));
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t j = 0; j < half_dim; ++j) {
      for (int64_t k = 0; k < 2; ++k) order[h * head_dim + 2 * j + k] = h * head_dim + k * half_dim + j;
    }
  }
  return order;
}

void reorder_rows(Int4Matrix& m, std::span<const int64_t> order) {
  TM_CHECK(static_cast<int64_t>(order.size()) == m.rows);
  std::vector<bool> seen(static_cast<size_t>(m.rows), false);
  for (int64_t src : order) {
    TM_CHECK(src >= 0 && src < m.rows && !seen[src]);
    seen[src] = true;
  }
  std::vector<uint8_t> codes(m.codes.size());
  for (int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(&codes[r * m.cols], &m.codes[order[r] * m.cols], static_cast<size_t>(m.cols));
  }
  m.codes = std::move(codes);
  std::vector<uint8_t> zeros(m.zeros.size());
  std::vector<uint16_t> scales(m.scales.size());
  for (int64_t g = 0; g < m.num_groups; ++g) {
    for (int64_t r = 0; r < m.rows; ++r) {
      zeros[g * m.rows + r] = m.zeros[g * m.rows + order[r]];
      scales[g * m.rows + r] = m.scales[g * m.rows + order[r]];
    }
  }
  m.zeros = std::move(zeros);
  m.scales = std::move(scales);
}

}  // namespace tokenmill::quant
