// NEON attention building blocks: the scalar kernels' online softmax
// (attention.cc, paged_attention.cc), one key at a time, with the q.k dot
// products and the updates of the output rows in 4-lane vectors. The
// exponentials and the soft-cap stay scalar: one per key and head, against
// head_dim multiply-adds each. Float K/V caches (F32, F16) with head_dim a
// multiple of 4 up to kMaxHeadDim; anything else goes to the scalar kernels.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/dispatch.h"
#include "kernels/neon/neon.h"
#include "kv/kv_dtype.h"

namespace tokenmill::kernels::neon {
namespace {

constexpr int64_t kMaxHeadDim = 512;
// Keys whose row addresses are looked up at once (paged_chunk_rows).
constexpr int64_t kKeyChunk = 16;

bool vector_shape(int64_t head_dim) { return head_dim % 4 == 0 && head_dim <= kMaxHeadDim; }

float dot(const float* a, const float* b, int64_t n) {
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t d = 0; d < n; d += 4) acc = vfmaq_f32(acc, vld1q_f32(a + d), vld1q_f32(b + d));
  return vaddvq_f32(acc);
}

// Online softmax state of one head: running maximum m, sum l, and the
// unnormalised output o [head_dim].
struct Softmax {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;

  // Adds key j with raw score q.k_j and value row v; returns its score
  // (scaled and soft-capped).
  float add(float qk, const float* v, int64_t hd, float scale, float softcap, float* o) {
    float s = qk * scale;
    if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
    if (s > m) {
      const float c = std::exp(m - s);  // 0 on the first key (m = -inf)
      const float32x4_t cv = vdupq_n_f32(c);
      for (int64_t d = 0; d < hd; d += 4) vst1q_f32(o + d, vmulq_f32(vld1q_f32(o + d), cv));
      l *= c;
      m = s;
    }
    const float p = std::exp(s - m);
    l += p;
    const float32x4_t pv = vdupq_n_f32(p);
    for (int64_t d = 0; d < hd; d += 4) vst1q_f32(o + d, vfmaq_f32(vld1q_f32(o + d), pv, vld1q_f32(v + d)));
    return s;
  }

  void finish(int64_t hd, float* o) const {
    const float32x4_t inv = vdupq_n_f32(l > 0.0f ? 1.0f / l : 0.0f);
    for (int64_t d = 0; d < hd; d += 4) vst1q_f32(o + d, vmulq_f32(vld1q_f32(o + d), inv));
  }

  // The n scores add() returned, in place, as final softmax weights.
  void weights(float* w, int64_t n) const {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int64_t i = 0; i < n; ++i) w[i] = std::exp(w[i] - m) * inv;
  }
};

void zero(float* o, int64_t n) {
  for (int64_t d = 0; d < n; d += 4) vst1q_f32(o + d, vdupq_n_f32(0.0f));
}

// n (a multiple of 4) fp16 values at src as floats.
void f16_to_f32(const uint8_t* src, int64_t n, float* dst) {
  const auto* h = reinterpret_cast<const float16_t*>(src);
  for (int64_t d = 0; d < n; d += 4) vst1q_f32(dst + d, vcvt_f32_f16(vld1_f16(h + d)));
}

}  // namespace

void attend_head(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t j_begin, int64_t j_end,
                 int64_t head_dim, float scale, float softcap, float* out) {
  if (!vector_shape(head_dim)) {
    return scalar::attend_head(q, k, v, kv_stride, j_begin, j_end, head_dim, scale, softcap, out);
  }
  Softmax sm;
  zero(out, head_dim);
  for (int64_t j = j_begin; j < j_end; ++j) {
    sm.add(dot(q, k + j * kv_stride, head_dim), v + j * kv_stride, head_dim, scale, softcap, out);
  }
  sm.finish(head_dim, out);
}

void paged_attend_group(const PagedKv& kv, const int32_t* block_table, int64_t kv_head, const float* q,
                        int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale, float softcap,
                        float* out, float* weights) {
  const bool f16 = kv.dtype == kv::KvDtype::F16;
  if (!vector_shape(head_dim) || num_heads > kMaxPagedGroup || (!f16 && kv.dtype != kv::KvDtype::F32)) {
    return scalar::paged_attend_group(kv, block_table, kv_head, q, num_heads, j_begin, j_end, head_dim, scale, softcap,
                                      out, weights);
  }
  const int64_t len = j_end - j_begin;
  const int64_t elem = f16 ? 2 : 4;
  const int64_t row_bytes = kv::kv_row_bytes(kv.dtype, kv.n_kv_dim);
  Softmax sm[kMaxPagedGroup];
  zero(out, num_heads * head_dim);
  alignas(16) float kf[kMaxHeadDim], vf[kMaxHeadDim];
  const uint8_t* k_rows[kKeyChunk];
  const uint8_t* v_rows[kKeyChunk];
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kKeyChunk) {
    const int64_t n = std::min(kKeyChunk, j_end - j0);
    paged_chunk_rows(kv, block_table, j0, n, row_bytes, kv_head * head_dim * elem, k_rows, v_rows);
    for (int64_t i = 0; i < n; ++i) {
      const float* k = reinterpret_cast<const float*>(k_rows[i]);
      const float* v = reinterpret_cast<const float*>(v_rows[i]);
      if (f16) {  // each row converted once for every head of the group
        f16_to_f32(k_rows[i], head_dim, kf);
        f16_to_f32(v_rows[i], head_dim, vf);
        k = kf;
        v = vf;
      }
      for (int64_t g = 0; g < num_heads; ++g) {
        const float s = sm[g].add(dot(q + g * head_dim, k, head_dim), v, head_dim, scale, softcap, out + g * head_dim);
        if (weights != nullptr) weights[g * len + (j0 + i - j_begin)] = s;
      }
    }
  }
  for (int64_t g = 0; g < num_heads; ++g) {
    sm[g].finish(head_dim, out + g * head_dim);
    if (weights != nullptr) sm[g].weights(weights + g * len, len);
  }
}

}  // namespace tokenmill::kernels::neon
