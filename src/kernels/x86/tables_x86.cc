// The kernel tables of x86-64: AVX2 (with FMA and F16C) and AVX-512 (F, BW,
// VNNI). Built only for x86-64 (tm_library); the kernels themselves are in
// the *_avx2.cc and *_avx512.cc files (avx2/avx2.h, avx512/avx512.h). This
// file only reads their addresses, so it runs on any x86-64 CPU.
#include "kernels/avx2/avx2.h"
#include "kernels/dispatch.h"
#if !defined(TOKENMILL_NO_AVX512_KERNELS)
#include "kernels/avx512/avx512.h"
#endif

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;

// Each helper sets, for every type listed, the TypeKernels members one
// kernel file has for it (K<T>: one of the class templates of avx2.h).
template <template <TensorType> class K, TensorType... Ts>
void set_float_kernels(KernelTable& t) {
  ((t.of(Ts).dequantize_row = K<Ts>::dequantize_row, t.of(Ts).fused_rows = K<Ts>::fused_rows), ...);
}

template <template <TensorType> class K, TensorType... Ts>
void set_q16_kernels(KernelTable& t) {
  ((t.of(Ts).q16_rows = K<Ts>::q16_rows, t.of(Ts).q16_decode_row = K<Ts>::q16_decode_row), ...);
}

template <template <TensorType> class K, TensorType... Ts>
void set_interleaved_kernels(KernelTable& t) {
  ((t.of(Ts).gemm_interleaved = K<Ts>::gemm_interleaved), ...);
}

// The switch from q16_rows to the packed int16 GEMM for every type with
// q16_rows, and sooner for those packed straight from their blocks.
void set_q16_switch(KernelTable& t, int64_t max_tokens, int64_t max_tokens_direct) {
  for (TypeKernels& row : t.types) {
    if (row.q16_rows != nullptr) row.q16_row_max_tokens = row.pack_q16_blocks ? max_tokens_direct : max_tokens;
  }
}

}  // namespace

// Products with AVX2, FMA and F16C: row kernels for decode, per-call packed
// GEMMs, and kernels for weights interleaved at load. Types without an AVX2
// kernel of some kind keep the scalar table's (the reference dequantizer)
// or none (matmul takes another path).
KernelTable make_avx2_table() {
  KernelTable t = kernel_table_definition(Isa::kScalar);
  t.isa = Isa::kAvx2;
  t.rms_norm = avx2::rms_norm;
  t.swiglu = avx2::swiglu;
  t.geglu_tanh = avx2::geglu_tanh;
  t.softmax = avx2::softmax;
  t.add_inplace = avx2::add_inplace;
  t.scale_inplace = avx2::scale_inplace;
  t.gemm_f32 = avx2::gemm_f32;
  t.pack_rows = avx2::pack_rows;
  t.gemm_packed = avx2::gemm_packed;
  t.quantize_acts = avx2::quantize_acts;
  t.pack_q16_rows = avx2::pack_q16_rows;
  t.gemm_q16_packed = avx2::gemm_q16_packed;
  t.fp8_rows = avx2::matmul_fp8_rows;
  t.w8a8_rows = avx2::w8a8_rows;
  t.attend_head = avx2::attend_head;
  t.paged_attend_group = avx2::paged_attend_group;

  // Per weight type: which AVX2 kernels there are.
  set_float_kernels<avx2::FloatRowKernels, TensorType::F32, TensorType::F16, TensorType::BF16>(t);
  set_float_kernels<avx2::BlockFloatKernels, TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0, TensorType::Q4_K,
                    TensorType::Q6_K>(t);
  set_q16_kernels<avx2::Q16LegacyKernels, TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
                  TensorType::Q5_1>(t);
  set_q16_kernels<avx2::Q16KQuantKernels, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                  TensorType::Q6_K>(t);
  t.of(TensorType::Q4_0).pack_q16_blocks = avx2::PackBlocksKernels<TensorType::Q4_0>::pack_q16_blocks;
  set_interleaved_kernels<avx2::InterleavedKernels, TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0,
                          TensorType::Q4_K, TensorType::Q6_K>(t);
  // With 16 registers the interleaved tile is 3 tokens and decodes the
  // nibbles once per tile, where the packed GEMM decodes once per call: the
  // interleaved kernel wins at decode and up to 16 tokens and loses at 32
  // and at prefill (docs/benchmarks.md, kernel tuning). So prefill keeps the
  // packed GEMM.
  t.interleaved_max_tokens = 16;
  // Where the packed GEMM overtakes the row kernels (kernels_bench
  // GemmSwitch; docs/benchmarks.md, kernel tuning): Q4_0, packed straight
  // from its blocks, switches earlier than the types widened first.
  set_q16_switch(t, 16, 10);
  return t;
}

#if !defined(TOKENMILL_NO_AVX512_KERNELS)
// The AVX2 table with the 512-bit int16 GEMM micro-kernel (bit-identical
// results, twice the products per instruction), the 512-bit FP32
// GEMM micro-kernel and the 512-bit interleaved kernels (vpdpwssd).
KernelTable make_avx512_table() {
  KernelTable t = make_avx2_table();
  t.isa = Isa::kAvx512;
  t.gemm_q16_packed = avx512::gemm_q16_packed;
  t.gemm_packed = avx512::gemm_packed;
  t.paged_attend_group = avx512::paged_attend_group;
  set_interleaved_kernels<avx512::InterleavedKernels, TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K,
                          TensorType::Q6_K>(t);
  // No 512-bit Q5_0 x 16 kernel: the AVX2 one would also take AVX-512
  // prefill (any token count), where the 512-bit packed GEMM is the faster,
  // so Q5_0 keeps the row kernels and the packed GEMM here.
  t.of(TensorType::Q5_0).gemm_interleaved = nullptr;
  t.interleaved_max_tokens = KernelTable::kAnyTokens;
  // The faster micro-kernel repays the per-call packing sooner (packed
  // against row kernel: docs/benchmarks.md, kernel tuning).
  set_q16_switch(t, 10, 6);
  return t;
}
#endif

}  // namespace tokenmill::kernels
