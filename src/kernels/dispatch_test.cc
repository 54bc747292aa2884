#include "kernels/dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/ops.h"
#include "kernels/quantize_act.h"
#include "kernels/vec_dot.h"
#include "util/error.h"
#include "util/test_dependency.h"

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

// TOKENMILL_EXPECT_ISA (set by scripts/test_all.sh from /proc/cpuinfo, which
// is read without tokenmill's code) names the best ISA the CPU has. If
// detection reports less, every SIMD test would quietly run fewer kernels
// and the suite would pass while the fast paths went untested.
TEST(IsaCoverage, DetectionFindsWhatTheCpuHas) {
  const char* expected = std::getenv("TOKENMILL_EXPECT_ISA");
  if (expected == nullptr || expected[0] == '\0') {
    if (tokenmill::testing::strict_mode()) FAIL() << "TOKENMILL_EXPECT_ISA is not set (scripts/test_all.sh sets it)";
    GTEST_SKIP() << "TOKENMILL_EXPECT_ISA is not set: cannot check CPU detection against /proc/cpuinfo";
  }
  const Isa want = choose_isa(expected, with_avx512());  // parses the name; any ISA is valid here
  const Isa got = best_isa(cpu_features());
  EXPECT_GE(static_cast<int>(got), static_cast<int>(want))
      << "the CPU has " << expected << " but tokenmill detects only " << isa_name(got);
}

// The kernel tests compare every table this CPU can run with the scalar
// references; an ISA the CPU lacks is left out there. Say so as a skip, so a
// summary shows which kernels this machine did not test.
class IsaCoverageOf : public ::testing::TestWithParam<Isa> {};

TEST_P(IsaCoverageOf, KernelsAreTestedOnThisCpu) {
  if (kernels_for(GetParam()) == nullptr) {
    GTEST_SKIP() << "this CPU cannot run the " << isa_name(GetParam())
                 << " kernels: the kernel tests skip them here";
  }
  EXPECT_EQ(kernels_for(GetParam())->isa, GetParam());
  EXPECT_NE(std::find(available_kernels().begin(), available_kernels().end(), kernels_for(GetParam())),
            available_kernels().end());
}

INSTANTIATE_TEST_SUITE_P(Isas, IsaCoverageOf, ::testing::Values(Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

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
