// ISA dispatch: one table of kernel function pointers per instruction set,
// chosen once at first use. The public entry points in matmul.h, ops.h,
// attention.h, fp8.h and w8a8.h call through active_kernels(); tests call a
// specific table to compare each ISA with the scalar references.
//
// Each ISA's table is made in one file (dispatch.cc: scalar;
// x86/tables_x86.cc: AVX2 and AVX-512; neon/tables_neon.cc: NEON) and listed
// once in dispatch.cc's registry, which isa_name, choose_isa, best_isa and
// available_kernels all read. A table has type-independent entries (ops,
// GEMM micro-kernels, attention) and one row per weight type (TypeKernels,
// type_kernels.h). A null entry means "this ISA has no kernel of its own
// here"; matmul then takes another path. Adding an ISA is one table file,
// one header declaring its kernels (avx2/avx2.h, avx512/avx512.h,
// neon/neon.h), one registry line and its CMake flags. Files for one CPU family
// (*_avx2.cc, *_avx512.cc, *_x86.cc; *_neon.cc) are built only for that
// family (CMakeLists.txt: tm_library), wherever they sit: the file name
// decides, the folder only has to agree with it.
//
// Where the files live (src/kernels/):
//   .          the public headers (matmul.h, ops.h, attention.h, gemm.h,
//              quant.h, quant_blocks.h ...), the ISA-neutral code behind
//              them (matmul.cc, dispatch.cc ...; q16_row_walk.h, shared by
//              AVX2 and NEON) and all the tests, which keep the _x86 /
//              _neon suffix rule;
//   ref/       the scalar references: (de)quantizers, matmul_ref, the ops,
//              and gemm_q16_ref (the int16 GEMM's exact numerics);
//   avx2/      the AVX2 kernels, avx2.h (what they export, for the
//              table) and the headers only they include (math_avx2.h,
//              vec_dot_avx2.h);
//   avx512/    the AVX-512 kernels, avx512.h and math_avx512.h;
//   x86/       what the two x86 ISAs share: their tables (tables_x86.cc)
//              and the tile walks both micro-kernels include (gemm_tiles.h,
//              gemm_interleaved_walk.h). A folder rather than the top level
//              so that, as with neon/, each CPU family's code and its
//              registration sit apart from the code every build compiles;
//   neon/      the NEON kernels, neon.h and their table (tables_neon.cc).
//
// Rule for *_avx2.cc files (compiled with -mavx2 -mfma -mf16c): they may call
// only intrinsics, their own internal-linkage helpers and out-of-line
// functions of other files. An inline function or template shared with other
// files (std::max<float>, std::vector, std::exp(float) ...) would be emitted
// there with AVX encoding, and the linker may pick that copy for callers on
// CPUs without AVX. Their code runs only through kernels_for(Isa::kAvx2),
// which exists only when cpu_features() says the CPU has AVX2, FMA and F16C.
// The same holds for *_avx512.cc files (also -mavx512f -mavx512bw
// -mavx512vnni) and kernels_for(Isa::kAvx512): the AVX2 table with the
// kernels that have a 512-bit version replaced. *_neon.cc files need no
// such care: NEON is part of the AArch64 baseline.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/fp8.h"
#include "kernels/gemm.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "kernels/quantize_act.h"
#include "kernels/type_kernels.h"
#include "kernels/w8a8.h"

namespace tokenmill::kernels {

// In the registry's order of preference within a CPU family.
enum class Isa { kScalar, kAvx2, kAvx512, kNeon };

std::string_view isa_name(Isa isa);

struct KernelTable {
  Isa isa = Isa::kScalar;

  // --- ops.h (same contracts) ---
  void (*rms_norm)(const float* x, const float* w, float* out, int64_t n, float eps) = nullptr;
  void (*swiglu)(float* gate, const float* up, int64_t n) = nullptr;
  void (*geglu_tanh)(float* gate, const float* up, int64_t n) = nullptr;
  void (*softmax)(float* x, int64_t n) = nullptr;
  void (*add_inplace)(float* y, const float* x, int64_t n) = nullptr;
  void (*scale_inplace)(float* x, float s, int64_t n) = nullptr;

  // --- matmul building blocks ---
  // Dense FP32 panel product:
  //   y[t * y_stride + r] = sum_{c < cols} w[r * w_stride + c] * x[t * x_stride + c]
  // w: [num_rows, w_stride], x: [num_tokens, x_stride], y: [num_tokens, y_stride].
  // Each output is computed by the same operation sequence whatever the
  // tiling, so results do not depend on how rows are split over threads.
  void (*gemm_f32)(const float* w, int64_t w_stride, int64_t num_rows, const float* x, int64_t x_stride,
                   int64_t num_tokens, int64_t cols, float* y, int64_t y_stride) = nullptr;
  // Packed-panel FP32 GEMM for prefill (gemm.h: layout, contracts). Null
  // where this ISA has none; matmul then multiplies row-major panels with
  // gemm_f32.
  void (*pack_rows)(const float* src, int64_t src_stride, int64_t num_src, int64_t cols, int64_t row0,
                    int64_t panel_rows, float* packed) = nullptr;
  void (*gemm_packed)(const float* packed, int64_t num_rows, int64_t cols, const float* x, int64_t x_stride,
                      int64_t num_tokens, float* y, int64_t y_stride) = nullptr;

  // --- the integer path's type-independent parts (type_kernels.h) ---
  // Quantizes x [num_tokens, cols] to int16 blocks (quantize_acts_ref's bits).
  void (*quantize_acts)(const float* x, int64_t num_tokens, int64_t cols, const QuantizedActsOut& out) = nullptr;
  // Packs rows widened by a row's q16_decode_row into the int16 GEMM's
  // panels (gemm.h).
  void (*pack_q16_rows)(const int16_t* q, const float* scale16, const float* bias16, int64_t num_src, int64_t cols,
                        int64_t row0, int64_t panel_rows, int16_t* packed_q, float* packed_scale,
                        float* packed_bias) = nullptr;
  // The packed int16 GEMM (gemm.h) for every type whose row has
  // q16_decode_row. Null where this ISA has none (matmul then uses the FP32
  // panels).
  void (*gemm_q16_packed)(const int16_t* packed_q, const float* packed_scale, const float* packed_bias, bool halves,
                          int bias, int64_t num_rows, int64_t cols, const QuantizedActs& a, int64_t num_tokens,
                          float* y, int64_t y_stride) = nullptr;

  // matmul takes a row's gemm_interleaved up to this many tokens, the packed
  // int16 GEMM beyond; kAnyTokens: always the interleaved one.
  static constexpr int64_t kAnyTokens = INT64_MAX;
  int64_t interleaved_max_tokens = kAnyTokens;

  // --- per weight type (type_kernels.h), indexed by GGUF type id ---
  std::array<TypeKernels, gguf::kTensorTypeIdLimit> types{};
  const TypeKernels& of(gguf::TensorType type) const { return types[static_cast<size_t>(type)]; }
  TypeKernels& of(gguf::TensorType type) { return types[static_cast<size_t>(type)]; }

  // --- FP8 weights (fp8.h) and W8A8 (w8a8.h) ---
  // Rows [row_begin, row_end) of matmul_fp8 / matmul_w8a8 for up to 4
  // tokens; y[t * rows + r]. Every table has both (the scalar ones at least).
  void (*fp8_rows)(const Fp8Matrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t num_tokens,
                   float* y) = nullptr;
  void (*w8a8_rows)(const WeightView& w, int64_t row_begin, int64_t row_end, const int8_t* qx, const float* sx,
                    int64_t num_tokens, float* y) = nullptr;

  // --- attention building block ---
  // One (token, head) pair: out = softmax_j(score(q, k_j)) . v_j over keys
  // j in [j_begin, j_end), where score = scale * q.k_j, soft-capped if
  // softcap > 0. q, out: [head_dim]; k, v: rows j_begin.. with kv_stride
  // floats between consecutive keys. Precondition: j_begin < j_end.
  void (*attend_head)(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t j_begin, int64_t j_end,
                      int64_t head_dim, float scale, float softcap, float* out) = nullptr;

  // --- paged attention building block (paged_attention.h) ---
  // One (token, KV head) pair: each of the num_heads (<= kMaxPagedGroup)
  // query heads q[g] = q + g * head_dim attends the keys at positions
  // [j_begin, j_end) of KV head kv_head, read through block_table, into
  // out + g * head_dim. Each K and V row is loaded (and converted) once for
  // all num_heads heads. Each head's result does not depend on num_heads.
  // weights (may be null): receives [num_heads, j_end - j_begin], each
  // head's final softmax weight of every key (summing to 1), for the
  // heavy-hitter KV policy's attention mass (kv/kv_policy.h); out is the
  // same with or without it.
  // Precondition: j_begin < j_end.
  void (*paged_attend_group)(const PagedKv& kv, const int32_t* block_table, int64_t kv_head, const float* q,
                             int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale,
                             float softcap, float* out, float* weights) = nullptr;
};

// For the per-ISA paged_attend_group kernels: the addresses of keys
// [j0, j0 + n) of a sequence read through its block table, k_rows[i] =
// kv.k + row * row_bytes + offset (v_rows the same in kv.v), row the
// pool row of position j0 + i (paged_attention.cc).
void paged_chunk_rows(const PagedKv& kv, const int32_t* block_table, int64_t j0, int64_t n, int64_t row_bytes,
                      int64_t offset, const uint8_t** k_rows, const uint8_t** v_rows);

// The most query heads one paged_attend_group call takes.
inline constexpr int64_t kMaxPagedGroup = 8;

// The scalar table (always available; the ops in it are the *_ref functions).
const KernelTable& scalar_kernels();
// The table for `isa`, or null when this CPU cannot run it.
const KernelTable* kernels_for(Isa isa);
// The table `isa` is defined as, whether or not this CPU can run it: for
// tests that check which kernels each ISA's table holds on any machine.
// Never call through it unless kernels_for(isa) is non-null.
KernelTable kernel_table_definition(Isa isa);
// The best ISA of this build that `cpu` can run (what TOKENMILL_ISA=auto
// picks).
Isa best_isa(const CpuFeatures& cpu);
// The ISAs this build has kernels for (scalar first), whether or not this
// CPU can run them.
std::vector<Isa> built_isas();
// Every table this CPU can run, scalar first (for tests comparing them).
std::vector<const KernelTable*> available_kernels();
// Picks the ISA from a TOKENMILL_ISA value: null, "" or "auto" mean the best
// the CPU supports; "scalar", "avx2", "avx512" and "neon" force one. Throws
// tokenmill::Error for an unknown name, an ISA this CPU lacks (never runs
// AVX2 without it) or one this build has no code for.
Isa choose_isa(const char* request, const CpuFeatures& cpu);
// The table every public kernel uses, chosen on first call from the
// TOKENMILL_ISA environment variable and cpu_features(). Thread-safe.
const KernelTable& active_kernels();

// The public operations computed with a given table (for tests and A/B runs).
void matmul_with(const KernelTable& kt, const WeightView& w, const float* x, int64_t num_tokens, float* y,
                 ThreadPool& pool);
void matmul_many_with(const KernelTable& kt, std::span<const WeightView> ws, const float* x, int64_t num_tokens,
                      std::span<float* const> ys, ThreadPool& pool);
void matmul_grouped_with(const KernelTable& kt, std::span<const GroupedProduct> products, const float* x,
                         int64_t x_rows, ThreadPool& pool);
void attention_with(const KernelTable& kt, const AttentionShape& shape, const float* q, const int64_t* q_pos,
                    int64_t num_tokens, const float* k, const float* v, int64_t n_ctx, float* out, ThreadPool& pool);
void paged_attention_with(const KernelTable& kt, const AttentionShape& shape, const float* q, const int64_t* q_pos,
                          int64_t num_tokens, const PagedKv& kv, std::span<const int32_t> block_table, int64_t n_ctx,
                          float* out, ThreadPool& pool, int64_t first_block = 0, float* key_mass = nullptr);

// The tables of the other CPU families' ISAs (tables_x86.cc, tables_neon.cc;
// each defined only in a build for its family).
KernelTable make_avx2_table();
KernelTable make_avx512_table();
KernelTable make_neon_table();

// Per-ISA implementations, referenced by the tables.
namespace scalar {
void gemm_f32(const float* w, int64_t w_stride, int64_t num_rows, const float* x, int64_t x_stride, int64_t num_tokens,
              int64_t cols, float* y, int64_t y_stride);
void attend_head(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t j_begin, int64_t j_end,
                 int64_t head_dim, float scale, float softcap, float* out);
void paged_attend_group(const PagedKv& kv, const int32_t* block_table, int64_t kv_head, const float* q,
                        int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale, float softcap,
                        float* out, float* weights);
}  // namespace scalar

}  // namespace tokenmill::kernels
