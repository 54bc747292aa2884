// The x86-64 half of the dispatch tests: ISA choice from synthetic CPU
// features, and which kernels the AVX2 and AVX-512 tables hold.
#include <gtest/gtest.h>

#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/quantize_act.h"
#include "kernels/vec_dot.h"
#include "util/error.h"

namespace tokenmill::kernels {
namespace {

CpuFeatures with_avx2() { return CpuFeatures{true, true, true}; }
CpuFeatures with_avx512() { return CpuFeatures{true, true, true, true, true, true}; }
CpuFeatures without_vnni() { return CpuFeatures{true, true, true, true, true, false}; }
CpuFeatures without_f16c() { return CpuFeatures{true, true, false}; }
CpuFeatures bare() { return CpuFeatures{}; }

TEST(Dispatch, AutoPicksTheBestSupported) {
  EXPECT_EQ(choose_isa(nullptr, with_avx2()), Isa::kAvx2);
  EXPECT_EQ(choose_isa("", with_avx2()), Isa::kAvx2);
  EXPECT_EQ(choose_isa("auto", with_avx2()), Isa::kAvx2);
  EXPECT_EQ(choose_isa(nullptr, bare()), Isa::kScalar);
  EXPECT_EQ(choose_isa("auto", without_f16c()), Isa::kScalar);  // AVX2 kernels need all three
  EXPECT_EQ(choose_isa(nullptr, with_avx512()), Isa::kAvx512);
  EXPECT_EQ(choose_isa("auto", without_vnni()), Isa::kAvx2);
}

TEST(Dispatch, ForcedChoices) {
  EXPECT_EQ(choose_isa("scalar", with_avx2()), Isa::kScalar);
  EXPECT_EQ(choose_isa("avx2", with_avx2()), Isa::kAvx2);
  EXPECT_THROW(choose_isa("avx2", bare()), Error);  // never run AVX2 without it
  EXPECT_THROW(choose_isa("avx2", without_f16c()), Error);
  EXPECT_THROW(choose_isa("avx512", with_avx2()), Error);
  EXPECT_THROW(choose_isa("avx512", without_vnni()), Error);
  EXPECT_EQ(choose_isa("avx512", with_avx512()), Isa::kAvx512);
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
  EXPECT_EQ(a.dequantize_row, &avx2::dequantize_row);
  EXPECT_EQ(a.fused_rows, &avx2::fused_rows);
  EXPECT_EQ(a.gemm_packed, &avx2::gemm_packed);
  EXPECT_EQ(a.quantize_acts, &avx2::quantize_acts);
  EXPECT_EQ(a.q16_rows, &avx2::q16_rows);
  EXPECT_EQ(a.gemm_q16_packed, &avx2::gemm_q16_packed);
  EXPECT_EQ(a.attend_head, &avx2::attend_head);
  EXPECT_EQ(a.paged_attend_group, &avx2::paged_attend_group);
  EXPECT_EQ(a.fp8_rows, &avx2::matmul_fp8_rows);
  EXPECT_EQ(a.w8a8_rows, &avx2::w8a8_rows);
  EXPECT_NE(a.gemm_interleaved, nullptr);

  const KernelTable z = kernel_table_definition(Isa::kAvx512);
  EXPECT_EQ(z.isa, Isa::kAvx512);
  EXPECT_EQ(z.gemm_packed, &avx512::gemm_packed);
  EXPECT_EQ(z.gemm_q16_packed, &avx512::gemm_q16_packed);
  EXPECT_EQ(z.paged_attend_group, &avx512::paged_attend_group);
  EXPECT_NE(z.gemm_interleaved, nullptr);
  EXPECT_NE(z.gemm_interleaved, a.gemm_interleaved);
  // The AVX2 limit is not inherited: AVX-512 prefill reads the copy too, so
  // the model releases the file's pages of those matrices.
  EXPECT_LT(a.interleaved_max_tokens, KernelTable::kAnyTokens);
  EXPECT_EQ(z.interleaved_max_tokens, KernelTable::kAnyTokens);
  // What it keeps from the AVX2 table, it keeps on purpose.
  EXPECT_EQ(z.q16_rows, &avx2::q16_rows);
  EXPECT_EQ(z.rms_norm, &avx2::rms_norm);
}

}  // namespace
}  // namespace tokenmill::kernels
