// The integer decode path on NEON: one weight row times the int16
// activations of up to 4 tokens (type_kernels.h: the integer path's numerics; layouts in
// quant_blocks.h).
//
// Each decoder turns one 32-column sub-block into 32 int8 values (every
// supported type's integers fit: Q8_0's are signed bytes, the 4- and 5-bit
// ones are stored unsigned with their offset or minimum moved into the
// activation sums, Q6_K's are q - 32). The row kernel widens them to int16
// once and multiplies them with each token's int16 activations by
// SMULL/SMLAL: exact int32 sums per half of the sub-block. Four sub-blocks
// (or, for Q6_K's scale per 16 columns, four halves) are reduced together
// by pairwise adds into one vector of totals, converted once and scaled by
// a vector of (weight scale x activation scale) products.
//
// No int32 overflow: a lane sums 4 products |w| * |q| <= 128 * 32767.
#include <arm_neon.h>
#include <string.h>

#include <algorithm>
#include <cmath>

#include "kernels/decoder_for.h"
#include "kernels/gemm.h"
#include "kernels/neon/neon.h"
#include "kernels/q16_row_walk.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tokenmill::kernels::neon {
namespace {

using gguf::TensorType;

inline float fp16_at(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

// Elements 0..15 (lo) and 16..31 (hi) of a sub-block as int8.
struct Sub32 {
  int8x16_t lo, hi;
};

inline int8x16_t as_s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// 16 bytes of packed nibbles: low nibbles are elements 0..15, high 16..31.
inline Sub32 nibbles(const uint8_t* qs) {
  const uint8x16_t v = vld1q_u8(qs);
  return {as_s8(vandq_u8(v, vdupq_n_u8(15))), as_s8(vshrq_n_u8(v, 4))};
}

// The low (high == false) or high nibbles of the 32 bytes at p, as bytes
// 0..15 (v0) and 16..31 (v1).
inline void nibble_half(const uint8_t* p, bool high, uint8x16_t& v0, uint8x16_t& v1) {
  v0 = vld1q_u8(p);
  v1 = vld1q_u8(p + 16);
  if (high) {
    v0 = vshrq_n_u8(v0, 4);
    v1 = vshrq_n_u8(v1, 4);
  } else {
    v0 = vandq_u8(v0, vdupq_n_u8(15));
    v1 = vandq_u8(v1, vdupq_n_u8(15));
  }
}

// Bit j of the 16 bits (b0 | b1 << 8) as 16 in byte j, else 0.
inline uint8x16_t fifth_bits(uint8_t b0, uint8_t b1) {
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bytes = vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1));
  return vandq_u8(vtstq_u8(bytes, vld1q_u8(kBit)), vdupq_n_u8(16));
}

// Q5_0 / Q5_1: nibbles plus the fifth bits (bit j of qh is element j's).
inline Sub32 five_bits(const uint8_t* qh, const uint8_t* qs) {
  const Sub32 n = nibbles(qs);
  return {vorrq_s8(n.lo, as_s8(fifth_bits(qh[0], qh[1]))), vorrq_s8(n.hi, as_s8(fifth_bits(qh[2], qh[3])))};
}

// Legacy 32-element blocks (first 2 bytes: the fp16 scale d). kBias == 32:
// the block's additive term per activation sum, bias(b, d).
struct Q8_0 {
  static constexpr TensorType kType = TensorType::Q8_0;
  static constexpr int64_t kBlock = 32, kBytes = 34;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 0;
  static Sub32 decode(const uint8_t* b) {
    return {vld1q_s8(reinterpret_cast<const int8_t*>(b + 2)), vld1q_s8(reinterpret_cast<const int8_t*>(b + 18))};
  }
  static float bias(const uint8_t*, float) { return 0.0f; }
};

struct Q4_0 {  // x = d * (q - 8)
  static constexpr TensorType kType = TensorType::Q4_0;
  static constexpr int64_t kBlock = 32, kBytes = 18;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  static Sub32 decode(const uint8_t* b) { return nibbles(b + 2); }
  static float bias(const uint8_t*, float d) { return -8.0f * d; }
};

struct Q4_1 {  // x = d * q + m
  static constexpr TensorType kType = TensorType::Q4_1;
  static constexpr int64_t kBlock = 32, kBytes = 20;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  static Sub32 decode(const uint8_t* b) { return nibbles(b + 4); }
  static float bias(const uint8_t* b, float) { return fp16_at(b + 2); }
};

struct Q5_0 {  // x = d * (q - 16)
  static constexpr TensorType kType = TensorType::Q5_0;
  static constexpr int64_t kBlock = 32, kBytes = 22;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  static Sub32 decode(const uint8_t* b) { return five_bits(b + 2, b + 6); }
  static float bias(const uint8_t*, float d) { return -16.0f * d; }
};

struct Q5_1 {  // x = d * q + m
  static constexpr TensorType kType = TensorType::Q5_1;
  static constexpr int64_t kBlock = 32, kBytes = 24;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  static Sub32 decode(const uint8_t* b) { return five_bits(b + 4, b + 8); }
  static float bias(const uint8_t* b, float) { return fp16_at(b + 2); }
};

// The 6-bit scale and minimum of sub-block k of a Q4_K / Q5_K super-block.
inline void k_scale_min(const uint8_t* s, int k, int& sc, int& m) {
  if (k < 4) {
    sc = s[k] & 63;
    m = s[k + 4] & 63;
  } else {
    sc = (s[k + 4] & 15) | (s[k - 4] >> 6) << 4;
    m = (s[k + 4] >> 4) | (s[k] >> 6) << 4;
  }
}

// K-quant super-blocks of 256: prepare(g, scale, bias) gives the float scale
// per sub-block (per half with kHalves) and the additive term per sub-block;
// decode(g, s) sub-block s of 8.
struct Q4_K {  // x = d * sc * q - dmin * m
  static constexpr TensorType kType = TensorType::Q4_K;
  static constexpr int64_t kBlock = 256, kBytes = 144;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  static void prepare(const uint8_t* g, float* scale, float* bias) {
    const float d = fp16_at(g), dmin = fp16_at(g + 2);
    for (int k = 0; k < 8; ++k) {
      int sc = 0, m = 0;
      k_scale_min(g + 4, k, sc, m);
      scale[k] = d * static_cast<float>(sc);
      bias[k] = -dmin * static_cast<float>(m);
    }
  }
  // Sub-blocks 2j and 2j + 1 share the 32 bytes at qs + 32 j: low and high nibbles.
  static Sub32 decode(const uint8_t* g, int s) {
    uint8x16_t v0, v1;
    nibble_half(g + 16 + 32 * (s / 2), s & 1, v0, v1);
    return {as_s8(v0), as_s8(v1)};
  }
};

struct Q5_K {  // as Q4_K with a fifth bit: qh[i] bit s for element 32 s + i
  static constexpr TensorType kType = TensorType::Q5_K;
  static constexpr int64_t kBlock = 256, kBytes = 176;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  static void prepare(const uint8_t* g, float* scale, float* bias) { Q4_K::prepare(g, scale, bias); }
  static Sub32 decode(const uint8_t* g, int s) {
    uint8x16_t v0, v1;
    nibble_half(g + 48 + 32 * (s / 2), s & 1, v0, v1);
    const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1u << s)), sixteen = vdupq_n_u8(16);
    v0 = vorrq_u8(v0, vandq_u8(vtstq_u8(vld1q_u8(g + 16), bit), sixteen));
    v1 = vorrq_u8(v1, vandq_u8(vtstq_u8(vld1q_u8(g + 32), bit), sixteen));
    return {as_s8(v0), as_s8(v1)};
  }
};

struct Q6_K {  // x = d * scales[e / 16] * (q - 32)
  static constexpr TensorType kType = TensorType::Q6_K;
  static constexpr int64_t kBlock = 256, kBytes = 210;
  static constexpr bool kHalves = true;
  static constexpr int kBias = 0;
  static void prepare(const uint8_t* g, float* scale, float*) {
    const float d = fp16_at(g + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(g + 192);
    for (int k = 0; k < 16; ++k) scale[k] = d * static_cast<float>(sc[k]);
  }
  // Sub-block s: half h = s / 4, quarter t = s % 4 (quant_blocks.h).
  static Sub32 decode(const uint8_t* g, int s) {
    const int h = s / 4, t = s % 4;
    const uint8_t* ql = g + 64 * h + 32 * (t & 1);
    const uint8_t* qh = g + 128 + 32 * h;
    uint8x16_t l0, l1;
    nibble_half(ql, t >= 2, l0, l1);
    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * t));  // a right shift by 2t
    const uint8x16_t three = vdupq_n_u8(3);
    const uint8x16_t h0 = vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(qh), shift), three), 4);
    const uint8x16_t h1 = vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(qh + 16), shift), three), 4);
    const int8x16_t off = vdupq_n_s8(32);
    return {vsubq_s8(as_s8(vorrq_u8(l0, h0)), off), vsubq_s8(as_s8(vorrq_u8(l1, h1)), off)};
  }
};

// Per group of up to 8 sub-blocks (256 columns): the weight scales (per
// sub-block, or per half with kHalves) and additive terms, and sub-block s.
// Legacy types: 8 consecutive blocks (fewer at the end of a row); K-quants:
// one super-block.
template <class D>
struct Group {
  alignas(16) float scale[16] = {};
  alignas(16) float bias[8] = {};
  const uint8_t* base;

  Group(const uint8_t* g, int n) : base(g) {
    if constexpr (D::kBlock == 32) {
      for (int i = 0; i < n; ++i) {
        scale[i] = fp16_at(g + i * D::kBytes);
        bias[i] = D::bias(g + i * D::kBytes, scale[i]);
      }
    } else {
      D::prepare(g, scale, bias);
    }
  }
  Sub32 decode(int s) const {
    if constexpr (D::kBlock == 32) {
      return D::decode(base + s * D::kBytes);
    } else {
      return D::decode(base, s);
    }
  }
};

// The 32 weights of a sub-block as int16 vectors of 8.
struct Wide32 {
  int16x8_t w[4];
  explicit Wide32(const Sub32& v)
      : w{vmovl_s8(vget_low_s8(v.lo)), vmovl_high_s8(v.lo), vmovl_s8(vget_low_s8(v.hi)), vmovl_high_s8(v.hi)} {}
};

// Exact int32 partial sums (4 lanes each) of the two halves of a sub-block
// times the activations q[0..31].
inline void dot_halves(const Wide32& w, const int16_t* q, int32x4_t& h0, int32x4_t& h1) {
  const int16x8_t q0 = vld1q_s16(q), q1 = vld1q_s16(q + 8), q2 = vld1q_s16(q + 16), q3 = vld1q_s16(q + 24);
  h0 = vmull_s16(vget_low_s16(w.w[0]), vget_low_s16(q0));
  h1 = vmull_s16(vget_low_s16(w.w[2]), vget_low_s16(q2));
  h0 = vmlal_high_s16(h0, w.w[0], q0);
  h1 = vmlal_high_s16(h1, w.w[2], q2);
  h0 = vmlal_s16(h0, vget_low_s16(w.w[1]), vget_low_s16(q1));
  h1 = vmlal_s16(h1, vget_low_s16(w.w[3]), vget_low_s16(q3));
  h0 = vmlal_high_s16(h0, w.w[1], q1);
  h1 = vmlal_high_s16(h1, w.w[3], q3);
}

// The lane totals of four int32x4 vectors, in order, in one vector.
inline int32x4_t totals4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

// The two steps of q16_row below are forced inline: they are its loop
// bodies, apart only to be read, and must compile to the code of one
// function (the compiler's inlining limits could otherwise keep one out).

// acc[t] += sub-blocks q .. q + kPerQuad - 1 of group g (its first
// sub-block is s0) times token t's activations (nb blocks a token),
// scaled: one vector of sub-block (kHalves: half-block) totals per token.
template <class D, int T, int kPerQuad>
[[gnu::always_inline]] inline void quad_step(const Group<D>& g, int q, int64_t s0, const QuantizedActs& a, int64_t nb,
                                             float32x4_t (&acc)[T]) {
  int32x4_t part[T][4];
#pragma GCC unroll 4
  for (int i = 0; i < kPerQuad; ++i) {
    const Wide32 w(g.decode(q + i));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      int32x4_t h0, h1;
      dot_halves(w, a.qs + t * a.cols + 32 * (s0 + q + i), h0, h1);
      if constexpr (D::kHalves) {
        part[t][2 * i] = h0;
        part[t][2 * i + 1] = h1;
      } else {
        part[t][i] = vaddq_s32(h0, h1);
      }
    }
  }
  const float32x4_t ws = vld1q_f32(g.scale + (D::kHalves ? 2 * q : q));
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const float* d = a.d + t * nb + s0 + q;
    float32x4_t da;
    if constexpr (D::kHalves) {
      const float32x2_t d2 = vld1_f32(d);  // halves 2k, 2k + 1 use activation block k
      da = vcombine_f32(vdup_lane_f32(d2, 0), vdup_lane_f32(d2, 1));
    } else {
      da = vld1q_f32(d);
    }
    const int32x4_t tot = totals4(part[t][0], part[t][1], part[t][2], part[t][3]);
    acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(tot), vmulq_f32(ws, da));
    if constexpr (D::kBias == 32) acc[t] = vfmaq_f32(acc[t], vld1q_f32(g.bias + q), vld1q_f32(a.s32 + t * nb + s0 + q));
  }
}

// tail[t] += sub-block q of group g (first sub-block s0) times token t's
// activations (nb blocks a token): legacy rows whose block count is not a multiple of 4 end
// with one to three of these.
template <class D, int T>
[[gnu::always_inline]] inline void single_step(const Group<D>& g, int q, int64_t s0, const QuantizedActs& a, int64_t nb,
                                               float (&tail)[T]) {
  const Wide32 w(g.decode(q));
  for (int t = 0; t < T; ++t) {
    int32x4_t h0, h1;
    dot_halves(w, a.qs + t * a.cols + 32 * (s0 + q), h0, h1);
    const float total = static_cast<float>(vaddvq_s32(vaddq_s32(h0, h1)));
    tail[t] = std::fma(total, g.scale[q] * a.d[t * nb + s0 + q], tail[t]);
    if constexpr (D::kBias == 32) tail[t] = std::fma(g.bias[q], a.s32[t * nb + s0 + q], tail[t]);
  }
}

// y[t * ys] = row . dequant(a[t]) for T tokens; the row has `cols` weights.
template <class D, int T>
void q16_row(const uint8_t* row, int64_t cols, const QuantizedActs& a, float* y, int64_t ys) {
  static_assert(D::kBias == 0 || D::kBias == 32, "per-16 additive terms are not implemented for NEON");
  constexpr int kPerQuad = D::kHalves ? 2 : 4;  // sub-blocks whose totals fill one vector
  const int64_t nb = a.cols / 32;
  const int64_t num_sub = cols / 32;
  float32x4_t acc[T];
  float tail[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = vdupq_n_f32(0.0f);
    tail[t] = 0.0f;
  }
  for (int64_t s0 = 0; s0 < num_sub; s0 += 8) {
    const int n = static_cast<int>(std::min<int64_t>(8, num_sub - s0));
    const Group<D> g(row + s0 / (D::kBlock / 32) * D::kBytes, n);
    int q = 0;
    for (; q + kPerQuad <= n; q += kPerQuad) quad_step<D, T, kPerQuad>(g, q, s0, a, nb, acc);
    for (; q < n; ++q) single_step<D, T>(g, q, s0, a, nb, tail);
  }
  for (int t = 0; t < T; ++t) y[t * ys] = vaddvq_f32(acc[t]) + tail[t];
}

// TypeKernels::q16_rows for type D::kType.
template <class D>
void rows_of(const WeightView& w, int64_t r0, int64_t r1, const QuantizedActs& a, int64_t num_tokens, float* y) {
  static_assert(Q16Layout{D::kHalves, D::kBias} == q16_layout(D::kType), "decoder disagrees with q16_layout");
  walk_q16_rows(static_cast<const uint8_t*>(w.data), w.cols / D::kBlock * D::kBytes, w.rows, w.cols, r0, r1, a,
                num_tokens, y, []<int T>(const uint8_t* r, int64_t c, const QuantizedActs& at, float* yt, int64_t ys) {
                  q16_row<D, T>(r, c, at, yt, ys);
                });
}

}  // namespace

template <TensorType T>
constinit const TypeKernels::Q16Rows Q16Kernels<T>::q16_rows =
    rows_of<DecoderFor<T, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K>>;

template struct Q16Kernels<TensorType::Q8_0>;
template struct Q16Kernels<TensorType::Q4_0>;
template struct Q16Kernels<TensorType::Q4_1>;
template struct Q16Kernels<TensorType::Q5_0>;
template struct Q16Kernels<TensorType::Q5_1>;
template struct Q16Kernels<TensorType::Q4_K>;
template struct Q16Kernels<TensorType::Q5_K>;
template struct Q16Kernels<TensorType::Q6_K>;

}  // namespace tokenmill::kernels::neon
