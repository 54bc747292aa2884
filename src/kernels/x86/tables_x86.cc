// The kernel tables of x86-64: AVX2 (with FMA and F16C) and AVX-512 (F, BW,
// VNNI). Built only for x86-64 (tm_library); the kernels themselves are in
// the *_avx2.cc and *_avx512.cc files.
#include "kernels/dispatch.h"
#include "kernels/interleave.h"
#include "kernels/vec_dot.h"
#include "util/check.h"

namespace tokenmill::kernels {
namespace {

// The table entry for an ISA's interleaved product: checks the contract,
// then multiplies the copy matmul found on the weights.
template <auto kGemm>
void gemm_interleaved_entry(const WeightView& w, int64_t row_begin, int64_t row_end, const QuantizedActs& a,
                            int64_t num_tokens, float* y) {
  TM_CHECK(w.interleaved != nullptr);
  TM_CHECK_MSG(interleave_supported(w.type), "gemm_interleaved: no interleaved layout for this type");
  kGemm(w.type, static_cast<const uint8_t*>(w.interleaved), w.rows, w.cols, row_begin, row_end, a, num_tokens, y,
        w.rows);
}

}  // namespace

// Products with AVX2, FMA and F16C: row kernels for decode, per-call packed
// GEMMs, and the kernels for Q4_0, Q8_0, Q4_K and Q6_K weights interleaved
// at load.
KernelTable make_avx2_table() {
  KernelTable t;
  t.isa = Isa::kAvx2;
  t.rms_norm = avx2::rms_norm;
  t.swiglu = avx2::swiglu;
  t.geglu_tanh = avx2::geglu_tanh;
  t.softmax = avx2::softmax;
  t.add_inplace = avx2::add_inplace;
  t.scale_inplace = avx2::scale_inplace;
  t.gemm_f32 = avx2::gemm_f32;
  t.dequantize_row = avx2::dequantize_row;
  t.fused_supports = avx2::fused_supports;
  t.fused_rows = avx2::fused_rows;
  t.pack_rows = avx2::pack_rows;
  t.gemm_packed = avx2::gemm_packed;
  t.quantize_acts = avx2::quantize_acts;
  t.q16_supports = avx2::q16_supports;
  t.q16_rows = avx2::q16_rows;
  t.q16_layout = avx2::q16_layout;
  t.q16_decode_row = avx2::q16_decode_row;
  t.pack_q16_rows = avx2::pack_q16_rows;
  t.pack_q16_blocks_supports = avx2::pack_q16_blocks_supports;
  t.pack_q16_blocks = avx2::pack_q16_blocks;
  t.gemm_q16_packed = avx2::gemm_q16_packed;
  t.gemm_interleaved = gemm_interleaved_entry<avx2::gemm_interleaved>;
  // With 16 registers the interleaved tile is 3 tokens and decodes the
  // nibbles once per tile, where the packed GEMM decodes once per call: the
  // interleaved kernel wins at decode and up to 16 tokens and loses at 32
  // and at prefill (docs/benchmarks.md, kernel tuning). So prefill keeps the
  // packed GEMM.
  t.interleaved_max_tokens = 16;
  // Where the packed GEMM overtakes the row kernels (kernels_bench
  // GemmSwitch; docs/benchmarks.md, kernel tuning): Q4_0, packed straight
  // from its blocks, switches earlier than the types widened first.
  t.q16_row_max_tokens = 16;
  t.q16_row_max_tokens_direct = 10;
  t.fp8_rows = avx2::matmul_fp8_rows;
  t.w8a8_rows = avx2::w8a8_rows;
  t.attend_head = avx2::attend_head;
  t.paged_attend_group = avx2::paged_attend_group;
  return t;
}

// The AVX2 table with the 512-bit int16 GEMM micro-kernel (bit-identical
// results, twice the products per instruction), the 512-bit FP32
// GEMM micro-kernel and the 512-bit interleaved kernels (vpdpwssd).
KernelTable make_avx512_table() {
  KernelTable t = make_avx2_table();
  t.isa = Isa::kAvx512;
  t.gemm_q16_packed = avx512::gemm_q16_packed;
  t.gemm_packed = avx512::gemm_packed;
  t.gemm_interleaved = gemm_interleaved_entry<avx512::gemm_interleaved>;
  t.interleaved_max_tokens = KernelTable::kAnyTokens;
  t.paged_attend_group = avx512::paged_attend_group;
  // The faster micro-kernel repays the per-call packing sooner: packed
  // against row kernel, Q4_K 80 / 104 GFLOP/s at 8 tokens, 102 / 90 at 12;
  // Q4_0 (packed straight from its blocks) 101 / 98 at 6, 118 / 105 at 8.
  t.q16_row_max_tokens = 10;
  t.q16_row_max_tokens_direct = 6;
  return t;
}

}  // namespace tokenmill::kernels
