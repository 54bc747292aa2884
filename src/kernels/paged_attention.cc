// Paged attention driver (checks, GQA head grouping, threading), the scalar
// per-group kernel (the reference path of the paged layout) and the K/V
// row writer.
#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/fp8.h"
#include "kernels/rope.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tokenmill::kernels {
namespace {

// Checks the block table (logical blocks [first_block, ...)) once here so
// that the kernels can index it freely.
void check_table(const PagedKv& kv, std::span<const int32_t> table, int64_t first_block, int64_t n_positions) {
  TM_CHECK(kv.k != nullptr && kv.v != nullptr && kv.block_size > 0 && kv.n_kv_dim > 0);
  TM_CHECK(kv.dtype == kv::KvDtype::F32 || kv.dtype == kv::KvDtype::F16 || kv::kv_dtype_quantized(kv.dtype));
  TM_CHECK(first_block >= 0);
  const int64_t needed = std::max<int64_t>(0, (n_positions + kv.block_size - 1) / kv.block_size - first_block);
  TM_CHECK_MSG(static_cast<int64_t>(table.size()) >= needed, "paged kv: block table too short");
  for (int64_t b = 0; b < needed; ++b) {
    TM_CHECK_MSG(table[b] >= 0 && table[b] < kv.num_blocks, "paged kv: block id outside the pool");
  }
}

// Row of position p (into the [num_blocks * block_size, n_kv_dim] arrays).
int64_t row_of(const PagedKv& kv, const int32_t* table, int64_t p) {
  return static_cast<int64_t>(table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
}

// The value of code `c` of a quantized row, before its group's scale.
float decode_code(kv::KvDtype dtype, uint8_t c) {
  return dtype == kv::KvDtype::FP8_E4M3 ? fp8_e4m3_to_fp32(c) : static_cast<float>(static_cast<int8_t>(c));
}

// Element `in` of a Q4_0 group of g (layout in kv/kv_dtype.h), before the
// scale: low nibbles hold the first half of the group, high nibbles the rest.
float q4_code(const uint8_t* codes, int64_t g, int64_t in) {
  const int64_t half = g / 2;
  const uint8_t b = codes[in % half];
  return static_cast<float>((in < half ? b & 0x0F : b >> 4) - 8);
}

// dst[0..n) = elements [first, first + n) of a stored row, as floats.
void load_elems(const PagedKv& kv, const uint8_t* row, int64_t first, int64_t n, float* dst) {
  if (kv.dtype == kv::KvDtype::F32) {
    std::memcpy(dst, row + 4 * first, static_cast<size_t>(n) * sizeof(float));
  } else if (kv.dtype == kv::KvDtype::F16) {
    const auto* h = reinterpret_cast<const uint16_t*>(row) + first;
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
  } else {
    const int64_t g = kv::kv_quant_group(kv.n_kv_dim);
    const int64_t group_bytes = kv::kv_group_bytes(kv.dtype, g);
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* gp = row + (first + i) / g * group_bytes;
      uint16_t d;
      std::memcpy(&d, gp, 2);
      const int64_t in = (first + i) % g;
      const float code = kv.dtype == kv::KvDtype::Q4_0 ? q4_code(gp + 2, g, in) : decode_code(kv.dtype, gp[2 + in]);
      dst[i] = fp16_to_fp32(d) * code;
    }
  }
}

// Quantizes one group: fp16 scale d = max|x| / qmax, then the codes of x / d
// (computed with the fp16-rounded d, so that decoding inverts it).
void store_group(kv::KvDtype dtype, const float* x, int64_t g, uint8_t* dst) {
  float amax = 0.0f;
  for (int64_t i = 0; i < g; ++i) amax = std::max(amax, std::fabs(x[i]));
  const bool fp8 = dtype == kv::KvDtype::FP8_E4M3;
  const uint16_t d16 = fp32_to_fp16(amax / (fp8 ? kFp8E4M3Max : 127.0f));
  std::memcpy(dst, &d16, 2);
  const float d = fp16_to_fp32(d16);
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  for (int64_t i = 0; i < g; ++i) {
    const float y = x[i] * inv;
    dst[2 + i] = fp8 ? fp32_to_fp8_e4m3(y)
                     : static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::nearbyint(y), -127.0f, 127.0f)));
  }
}

// Quantizes one Q4_0 group: d = m / -8 for the element m of largest
// magnitude (it is stored exactly, as -8), codes round(x / d) + 8 clamped
// to [0, 15] (x = -m: 16 -> 15).
void store_group_q4(const float* x, int64_t g, uint8_t* dst) {
  float m = 0.0f;
  for (int64_t i = 0; i < g; ++i)
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  const uint16_t d16 = fp32_to_fp16(m / -8.0f);
  std::memcpy(dst, &d16, 2);
  const float d = fp16_to_fp32(d16);
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  const int64_t half = g / 2;
  auto code = [&](float v) { return static_cast<uint8_t>(std::clamp(std::nearbyint(v * inv) + 8.0f, 0.0f, 15.0f)); };
  for (int64_t i = 0; i < half; ++i) dst[2 + i] = static_cast<uint8_t>(code(x[i]) | (code(x[half + i]) << 4));
}

void store_row(const PagedKv& kv, const float* src, uint8_t* dst) {
  const int64_t n = kv.n_kv_dim;
  if (kv.dtype == kv::KvDtype::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else if (kv.dtype == kv::KvDtype::F16) {
    auto* h = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
  } else {
    const int64_t g = kv::kv_quant_group(n);
    const int64_t group_bytes = kv::kv_group_bytes(kv.dtype, g);
    for (int64_t b = 0; b < n / g; ++b) {
      if (kv.dtype == kv::KvDtype::Q4_0)
        store_group_q4(src + b * g, g, dst + b * group_bytes);
      else
        store_group(kv.dtype, src + b * g, g, dst + b * group_bytes);
    }
  }
}

// How many parts each group of query heads is split into: the fewest that
// keep a part within kMaxPagedGroup heads and give every thread work (more
// parts mean each K/V row is loaded once per part instead of once per group).
int64_t parts_per_group(int64_t group, int64_t num_pairs, int64_t num_threads) {
  int64_t fallback = group;
  for (int64_t parts = 1; parts <= group; ++parts) {
    if (group % parts != 0 || group / parts > kMaxPagedGroup) continue;
    if (num_pairs * parts >= num_threads) return parts;
    fallback = parts;
  }
  return fallback;
}

}  // namespace

void paged_chunk_rows(const PagedKv& kv, const int32_t* block_table, int64_t j0, int64_t n, int64_t row_bytes,
                      int64_t offset, const uint8_t** k_rows, const uint8_t** v_rows) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = row_of(kv, block_table, j0 + i);
    k_rows[i] = kv.k + row * row_bytes + offset;
    v_rows[i] = kv.v + row * row_bytes + offset;
  }
}

// Keys one at a time, as scalar::attend_head, but each K and V row is
// converted once and used by every head of the group. With `weights`, each
// score is kept there and turned into its softmax weight at the end, when
// the final maximum and sum are known.
void scalar::paged_attend_group(const PagedKv& kv, const int32_t* block_table, int64_t kv_head, const float* q,
                                int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale,
                                float softcap, float* out, float* weights) {
  const int64_t len = j_end - j_begin;
  const int64_t row_bytes = kv::kv_row_bytes(kv.dtype, kv.n_kv_dim);
  const int64_t first = kv_head * head_dim;
  std::vector<float> k(static_cast<size_t>(head_dim)), v(static_cast<size_t>(head_dim));
  std::vector<float> m(static_cast<size_t>(num_heads), -std::numeric_limits<float>::infinity());
  std::vector<float> l(static_cast<size_t>(num_heads), 0.0f);
  std::fill(out, out + num_heads * head_dim, 0.0f);
  for (int64_t j = j_begin; j < j_end; ++j) {
    const int64_t row = row_of(kv, block_table, j);
    load_elems(kv, kv.k + row * row_bytes, first, head_dim, k.data());
    load_elems(kv, kv.v + row * row_bytes, first, head_dim, v.data());
    for (int64_t g = 0; g < num_heads; ++g) {
      const float* qg = q + g * head_dim;
      float* og = out + g * head_dim;
      float s = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) s += qg[d] * k[static_cast<size_t>(d)];
      s *= scale;
      if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
      if (weights != nullptr) weights[g * len + (j - j_begin)] = s;
      if (s > m[g]) {
        const float c = std::exp(m[g] - s);  // 0 on the first key (m = -inf)
        for (int64_t d = 0; d < head_dim; ++d) og[d] *= c;
        l[g] *= c;
        m[g] = s;
      }
      const float p = std::exp(s - m[g]);
      l[g] += p;
      for (int64_t d = 0; d < head_dim; ++d) og[d] += p * v[static_cast<size_t>(d)];
    }
  }
  for (int64_t g = 0; g < num_heads; ++g) {
    const float inv = l[g] > 0.0f ? 1.0f / l[g] : 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) out[g * head_dim + d] *= inv;
    if (weights == nullptr) continue;
    for (int64_t i = 0; i < len; ++i) weights[g * len + i] = std::exp(weights[g * len + i] - m[g]) * inv;
  }
}

// Work items are (token, KV head, part of the group). As in attention_with,
// each thread takes every num_threads-th item so that the long rows of late
// tokens are spread over the threads. With key_mass, each thread sums its
// items' weights into a private array, and the arrays are added in thread
// order afterwards (the result does not depend on scheduling).
void paged_attention_with(const KernelTable& kt, const AttentionShape& shape, const float* q, const int64_t* q_pos,
                          int64_t num_tokens, const PagedKv& kv, std::span<const int32_t> block_table, int64_t n_ctx,
                          float* out, ThreadPool& pool, int64_t first_block, float* key_mass) {
  TM_CHECK(shape.n_head > 0 && shape.n_kv_head > 0 && shape.head_dim > 0 && shape.window >= 0);
  TM_CHECK_MSG(shape.n_head % shape.n_kv_head == 0, "attention: n_head must be a multiple of n_kv_head");
  TM_CHECK_MSG(kv.n_kv_dim == shape.n_kv_head * shape.head_dim, "paged attention: n_kv_dim mismatch");
  // Positions are rebased by the table's first held position: the kernels
  // index table[j / block_size], and (j - base) / block_size == j / block_size - first_block.
  const int64_t base = first_block * kv.block_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    TM_CHECK_MSG(q_pos[t] >= 0 && q_pos[t] < n_ctx, "attention: query position outside the cache");
    TM_CHECK_MSG(shape.first_visible(q_pos[t]) >= base, "paged attention: the window starts before the table");
  }
  check_table(kv, block_table, first_block, n_ctx);
  // The AVX2 kernel dequantizes into fixed stack buffers of this many floats.
  TM_CHECK_MSG(!kv::kv_dtype_quantized(kv.dtype) || shape.head_dim <= 8192, "paged attention: head_dim too large");
  if (num_tokens <= 0) return;
  const int64_t hd = shape.head_dim;
  const int64_t group = shape.n_head / shape.n_kv_head;
  const int64_t num_threads = pool.num_threads();
  const int64_t parts = parts_per_group(group, num_tokens * shape.n_kv_head, num_threads);
  const int64_t heads_per_part = group / parts;
  const int64_t items_per_token = shape.n_kv_head * parts;
  const int64_t num_items = num_tokens * items_per_token;
  const int64_t lanes = std::min(num_threads, num_items);
  const int64_t span = n_ctx - base;  // key_mass entries a lane may touch
  std::vector<std::vector<float>> lane_mass(key_mass != nullptr ? static_cast<size_t>(lanes) : 0);
  pool.parallel_for(lanes, [&](int, int64_t first, int64_t last) {
    std::vector<float> weights;
    for (int64_t lane = first; lane < last; ++lane) {
      float* mass = nullptr;
      if (key_mass != nullptr) {
        lane_mass[static_cast<size_t>(lane)].assign(static_cast<size_t>(span), 0.0f);
        mass = lane_mass[static_cast<size_t>(lane)].data();
        weights.resize(static_cast<size_t>(heads_per_part * span));
      }
      for (int64_t i = lane; i < num_items; i += num_threads) {
        const int64_t t = i / items_per_token;
        const int64_t kv_head = (i % items_per_token) / parts;
        const int64_t head = kv_head * group + (i % parts) * heads_per_part;
        const int64_t offset = (t * shape.n_head + head) * hd;
        const int64_t j_begin = shape.first_visible(q_pos[t]) - base;
        const int64_t j_end = q_pos[t] + 1 - base;
        kt.paged_attend_group(kv, block_table.data(), kv_head, q + offset, heads_per_part, j_begin, j_end, hd,
                              shape.scale, shape.softcap, out + offset, mass != nullptr ? weights.data() : nullptr);
        if (mass == nullptr) continue;
        const int64_t len = j_end - j_begin;
        for (int64_t g = 0; g < heads_per_part; ++g)
          for (int64_t j = 0; j < len; ++j) mass[j_begin + j] += weights[static_cast<size_t>(g * len + j)];
      }
    }
  });
  for (const std::vector<float>& m : lane_mass)
    for (int64_t j = 0; j < span; ++j) key_mass[base + j] += m[static_cast<size_t>(j)];
}

void paged_attention(const AttentionShape& shape, const float* q, const int64_t* q_pos, int64_t num_tokens,
                     const PagedKv& kv, std::span<const int32_t> block_table, int64_t n_ctx, float* out,
                     ThreadPool& pool, int64_t first_block, float* key_mass) {
  paged_attention_with(active_kernels(), shape, q, q_pos, num_tokens, kv, block_table, n_ctx, out, pool, first_block,
                       key_mass);
}

void paged_kv_write(const PagedKv& kv, std::span<const int32_t> block_table, int64_t start_pos, int64_t num_tokens,
                    const float* k, const float* v, int64_t first_block) {
  TM_CHECK(start_pos >= 0 && num_tokens >= 0);
  TM_CHECK_MSG(num_tokens == 0 || start_pos >= first_block * kv.block_size, "paged kv: write before the table");
  check_table(kv, block_table, first_block, start_pos + num_tokens);
  const int64_t row_bytes = kv::kv_row_bytes(kv.dtype, kv.n_kv_dim);
  const int64_t base = first_block * kv.block_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t row = row_of(kv, block_table.data(), start_pos + t - base);
    store_row(kv, k + t * kv.n_kv_dim, kv.k + row * row_bytes);
    store_row(kv, v + t * kv.n_kv_dim, kv.v + row * row_bytes);
  }
}

void paged_key_rotate(const PagedKv& kv, int32_t block, int64_t head_dim, int64_t rope_dims, const double* cos,
                      const double* sin, bool neox) {
  TM_CHECK(block >= 0 && block < kv.num_blocks && head_dim > 0 && kv.n_kv_dim % head_dim == 0);
  const int64_t row_bytes = kv::kv_row_bytes(kv.dtype, kv.n_kv_dim);
  std::vector<float> row(static_cast<size_t>(kv.n_kv_dim));
  for (int64_t r = 0; r < kv.block_size; ++r) {
    uint8_t* stored = kv.k + (static_cast<int64_t>(block) * kv.block_size + r) * row_bytes;
    load_elems(kv, stored, 0, kv.n_kv_dim, row.data());
    for (int64_t h = 0; h < kv.n_kv_dim / head_dim; ++h)
      rope_apply(row.data() + h * head_dim, rope_dims, cos, sin, neox);
    store_row(kv, row.data(), stored);
  }
}

}  // namespace tokenmill::kernels
