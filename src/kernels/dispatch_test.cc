#include "kernels/dispatch.h"

#include <gtest/gtest.h>

#include <cstdlib>

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

TEST(Dispatch, TablesAreCompleteAndMatchTheCpu) {
  const KernelTable& s = scalar_kernels();
  EXPECT_EQ(s.isa, Isa::kScalar);
  EXPECT_TRUE(s.rms_norm && s.swiglu && s.geglu_tanh && s.softmax && s.add_inplace && s.scale_inplace &&
              s.gemm_f32 && s.dequantize_row && s.attend_head);
  const KernelTable* a = kernels_for(Isa::kAvx2);
  EXPECT_EQ(a != nullptr, cpu_features().supports_avx2_kernels());
  if (a != nullptr) {
    EXPECT_EQ(a->isa, Isa::kAvx2);
    EXPECT_TRUE(a->rms_norm && a->swiglu && a->geglu_tanh && a->softmax && a->add_inplace &&
                a->scale_inplace && a->gemm_f32 && a->dequantize_row && a->fused_supports &&
                a->fused_rows && a->attend_head);
    EXPECT_TRUE(a->fused_supports(gguf::TensorType::Q8_0));
    EXPECT_FALSE(a->fused_supports(gguf::TensorType::Q2_K));
  }
  const KernelTable* z = kernels_for(Isa::kAvx512);
  EXPECT_EQ(z != nullptr, cpu_features().supports_avx512_kernels());
  if (z != nullptr) {
    EXPECT_EQ(z->isa, Isa::kAvx512);
    EXPECT_TRUE(z->gemm_q16_packed != nullptr && z->q16_rows != nullptr && z->attend_head != nullptr);
  }
  const auto all = available_kernels();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front(), &scalar_kernels());
  EXPECT_EQ(all.size(), 1u + (a != nullptr) + (z != nullptr));
}

// The active table is what TOKENMILL_ISA and the CPU select (ctest runs this
// binary with the variable unset; run it with TOKENMILL_ISA=scalar to A/B).
TEST(Dispatch, ActiveTableFollowsEnvironment) {
  const Isa want = choose_isa(std::getenv("TOKENMILL_ISA"), cpu_features());
  EXPECT_EQ(active_kernels().isa, want);
  EXPECT_EQ(&active_kernels(), kernels_for(want));
  EXPECT_EQ(isa_name(Isa::kScalar), "scalar");
  EXPECT_EQ(isa_name(Isa::kAvx2), "avx2");
  EXPECT_EQ(isa_name(Isa::kAvx512), "avx512");
}

}  // namespace
}  // namespace tokenmill::kernels
