// The AArch64 half of the dispatch tests: which kernels the NEON table holds
// (its own where neon.h has one, the scalar references elsewhere), and that
// AArch64 picks it.
#include <gtest/gtest.h>

#include "kernels/dispatch.h"
#include "kernels/neon/neon.h"
#include "kernels/ops.h"
#include "kernels/quantize_act.h"
#include "util/error.h"

namespace tokenmill::kernels {
namespace {

TEST(DispatchNeon, TableOwnsItsKernels) {
  const KernelTable n = kernel_table_definition(Isa::kNeon);
  EXPECT_EQ(n.isa, Isa::kNeon);
  EXPECT_EQ(n.gemm_f32, &neon::gemm_f32);
  EXPECT_EQ(n.quantize_acts, &neon::quantize_acts);
  using gguf::TensorType;
  EXPECT_EQ(n.of(TensorType::Q4_K).q16_rows, neon::Q16Kernels<TensorType::Q4_K>::q16_rows);
  EXPECT_EQ(n.of(TensorType::Q5_1).q16_rows, neon::Q16Kernels<TensorType::Q5_1>::q16_rows);
  EXPECT_EQ(n.of(TensorType::Q4_K).q16_row_max_tokens, kMaxQ16RowTokens);
  EXPECT_EQ(n.of(TensorType::Q2_K).q16_rows, nullptr);
  EXPECT_EQ(n.attend_head, &neon::attend_head);
  EXPECT_EQ(n.paged_attend_group, &neon::paged_attend_group);
  // What it keeps from the scalar table, it keeps on purpose.
  EXPECT_EQ(n.rms_norm, &rms_norm_ref);
  EXPECT_EQ(n.fp8_rows, &matmul_fp8_rows_ref);
  for (const TypeKernels& k : n.types) {
    EXPECT_EQ(k.gemm_interleaved, nullptr);
    EXPECT_EQ(k.q16_decode_row, nullptr);
    EXPECT_EQ(k.fused_rows, nullptr);
  }
  EXPECT_EQ(n.gemm_q16_packed, nullptr);
}

TEST(DispatchNeon, AutoPicksNeonOnAarch64) {
  EXPECT_TRUE(cpu_features().supports_neon_kernels());
  EXPECT_EQ(best_isa(cpu_features()), Isa::kNeon);
  EXPECT_EQ(choose_isa("neon", cpu_features()), Isa::kNeon);
  EXPECT_THROW(choose_isa("avx2", CpuFeatures{true, true, true}), Error);  // no x86 code in this build
}

}  // namespace
}  // namespace tokenmill::kernels
