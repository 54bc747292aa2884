// The x86-64 half of the dispatch tests: ISA choice from synthetic CPU
// features, and which kernels the AVX2 and AVX-512 tables hold.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/avx2/avx2.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/quantize_act.h"
#include "util/error.h"
#if !defined(TOKENMILL_NO_AVX512_KERNELS)
#include "kernels/avx512/avx512.h"
#endif

namespace tokenmill::kernels {
namespace {

CpuFeatures with_avx2() { return CpuFeatures{true, true, true}; }
CpuFeatures with_avx512() { return CpuFeatures{true, true, true, true, true, true}; }
CpuFeatures without_vnni() { return CpuFeatures{true, true, true, true, true, false}; }
CpuFeatures without_f16c() { return CpuFeatures{true, true, false}; }
CpuFeatures bare() { return CpuFeatures{}; }

// False in a build with TOKENMILL_AVX512_KERNELS=OFF.
bool avx512_built() {
  const auto built = built_isas();
  return std::find(built.begin(), built.end(), Isa::kAvx512) != built.end();
}

TEST(Dispatch, AutoPicksTheBestSupported) {
  EXPECT_EQ(choose_isa(nullptr, with_avx2()), Isa::kAvx2);
  EXPECT_EQ(choose_isa("", with_avx2()), Isa::kAvx2);
  EXPECT_EQ(choose_isa("auto", with_avx2()), Isa::kAvx2);
  EXPECT_EQ(choose_isa(nullptr, bare()), Isa::kScalar);
  EXPECT_EQ(choose_isa("auto", without_f16c()), Isa::kScalar);  // AVX2 kernels need all three
  EXPECT_EQ(choose_isa(nullptr, with_avx512()), avx512_built() ? Isa::kAvx512 : Isa::kAvx2);
  EXPECT_EQ(choose_isa("auto", without_vnni()), Isa::kAvx2);
}

TEST(Dispatch, ForcedChoices) {
  EXPECT_EQ(choose_isa("scalar", with_avx2()), Isa::kScalar);
  EXPECT_EQ(choose_isa("avx2", with_avx2()), Isa::kAvx2);
  EXPECT_THROW(choose_isa("avx2", bare()), Error);  // never run AVX2 without it
  EXPECT_THROW(choose_isa("avx2", without_f16c()), Error);
  EXPECT_THROW(choose_isa("avx512", with_avx2()), Error);
  EXPECT_THROW(choose_isa("avx512", without_vnni()), Error);
  if (avx512_built()) {
    EXPECT_EQ(choose_isa("avx512", with_avx512()), Isa::kAvx512);
  } else {
    EXPECT_THROW(choose_isa("avx512", with_avx512()), Error);  // a build without them says so
  }
  EXPECT_EQ(choose_isa("avx2", with_avx512()), Isa::kAvx2);
  EXPECT_THROW(choose_isa("SCALAR ", with_avx2()), Error);
}

// Each ISA's table must hold its own kernels, not ones copied from the table
// it starts from: the AVX-512 table begins as a copy of the AVX2 one, so a
// dropped override would otherwise still give a complete, working table
// that quietly runs the slower kernels. Checked on every CPU (the tables are
// only inspected here, never called).
TEST(Dispatch, EachIsaTableOwnsItsKernels) {
  const KernelTable s = kernel_table_definition(Isa::kScalar);
  EXPECT_EQ(s.isa, Isa::kScalar);
  EXPECT_EQ(s.rms_norm, &rms_norm_ref);
  EXPECT_EQ(s.gemm_f32, &scalar::gemm_f32);
  EXPECT_EQ(s.attend_head, &scalar::attend_head);
  EXPECT_EQ(s.paged_attend_group, &scalar::paged_attend_group);
  EXPECT_EQ(s.quantize_acts, &quantize_acts_ref);
  EXPECT_EQ(s.fp8_rows, &matmul_fp8_rows_ref);
  EXPECT_EQ(s.w8a8_rows, &w8a8_rows_ref);

  const KernelTable a = kernel_table_definition(Isa::kAvx2);
  EXPECT_EQ(a.isa, Isa::kAvx2);
  EXPECT_EQ(a.rms_norm, &avx2::rms_norm);
  EXPECT_EQ(a.swiglu, &avx2::swiglu);
  EXPECT_EQ(a.geglu_tanh, &avx2::geglu_tanh);
  EXPECT_EQ(a.softmax, &avx2::softmax);
  EXPECT_EQ(a.add_inplace, &avx2::add_inplace);
  EXPECT_EQ(a.scale_inplace, &avx2::scale_inplace);
  EXPECT_EQ(a.gemm_f32, &avx2::gemm_f32);
  EXPECT_EQ(a.gemm_packed, &avx2::gemm_packed);
  EXPECT_EQ(a.quantize_acts, &avx2::quantize_acts);
  EXPECT_EQ(a.gemm_q16_packed, &avx2::gemm_q16_packed);
  EXPECT_EQ(a.attend_head, &avx2::attend_head);
  EXPECT_EQ(a.paged_attend_group, &avx2::paged_attend_group);
  EXPECT_EQ(a.fp8_rows, &avx2::matmul_fp8_rows);
  EXPECT_EQ(a.w8a8_rows, &avx2::w8a8_rows);
  // Rows: each kernel file's kernels for its types, the reference elsewhere.
  using gguf::TensorType;
  EXPECT_EQ(a.of(TensorType::F16).dequantize_row, avx2::FloatRowKernels<TensorType::F16>::dequantize_row);
  EXPECT_EQ(a.of(TensorType::BF16).fused_rows, avx2::FloatRowKernels<TensorType::BF16>::fused_rows);
  EXPECT_EQ(a.of(TensorType::Q4_K).dequantize_row, avx2::BlockFloatKernels<TensorType::Q4_K>::dequantize_row);
  EXPECT_EQ(a.of(TensorType::Q4_1).dequantize_row, s.of(TensorType::Q4_1).dequantize_row);
  EXPECT_EQ(a.of(TensorType::Q4_1).fused_rows, nullptr);
  EXPECT_EQ(a.of(TensorType::Q5_1).q16_rows, avx2::Q16LegacyKernels<TensorType::Q5_1>::q16_rows);
  EXPECT_EQ(a.of(TensorType::Q3_K).q16_decode_row, avx2::Q16KQuantKernels<TensorType::Q3_K>::q16_decode_row);
  EXPECT_EQ(a.of(TensorType::Q8_K).q16_rows, nullptr);
  EXPECT_EQ(a.of(TensorType::Q4_0).pack_q16_blocks, avx2::PackBlocksKernels<TensorType::Q4_0>::pack_q16_blocks);
  EXPECT_EQ(a.of(TensorType::Q4_K).pack_q16_blocks, nullptr);
  // Q4_0, packed straight from its blocks, leaves the row kernel sooner.
  EXPECT_LT(a.of(TensorType::Q4_0).q16_row_max_tokens, a.of(TensorType::Q4_K).q16_row_max_tokens);
  EXPECT_EQ(a.of(TensorType::Q6_K).gemm_interleaved, avx2::InterleavedKernels<TensorType::Q6_K>::gemm_interleaved);
  EXPECT_EQ(a.of(TensorType::Q5_0).gemm_interleaved, avx2::InterleavedKernels<TensorType::Q5_0>::gemm_interleaved);
  EXPECT_EQ(a.of(TensorType::Q5_K).gemm_interleaved, nullptr);

#if defined(TOKENMILL_NO_AVX512_KERNELS)
  EXPECT_THROW(kernel_table_definition(Isa::kAvx512), Error);
#else
  const KernelTable z = kernel_table_definition(Isa::kAvx512);
  EXPECT_EQ(z.isa, Isa::kAvx512);
  EXPECT_EQ(z.gemm_packed, &avx512::gemm_packed);
  EXPECT_EQ(z.gemm_q16_packed, &avx512::gemm_q16_packed);
  EXPECT_EQ(z.paged_attend_group, &avx512::paged_attend_group);
  for (TensorType type : {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K}) {
    EXPECT_NE(z.of(type).gemm_interleaved, nullptr);
    EXPECT_NE(z.of(type).gemm_interleaved, a.of(type).gemm_interleaved);
  }
  // No 512-bit Q5_0 x 16 kernel, and not the AVX2 one (it would take prefill).
  EXPECT_EQ(z.of(TensorType::Q5_0).gemm_interleaved, nullptr);
  // The AVX2 limit is not inherited: AVX-512 prefill reads the copy too, so
  // the model releases the file's pages of those matrices.
  EXPECT_LT(a.interleaved_max_tokens, KernelTable::kAnyTokens);
  EXPECT_EQ(z.interleaved_max_tokens, KernelTable::kAnyTokens);
  // The faster int16 micro-kernel repays packing sooner.
  EXPECT_LT(z.of(TensorType::Q4_K).q16_row_max_tokens, a.of(TensorType::Q4_K).q16_row_max_tokens);
  // What it keeps from the AVX2 table, it keeps on purpose.
  EXPECT_EQ(z.of(TensorType::Q4_K).q16_rows, a.of(TensorType::Q4_K).q16_rows);
  EXPECT_EQ(z.rms_norm, &avx2::rms_norm);
#endif
}

}  // namespace
}  // namespace tokenmill::kernels
