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

TEST(Dispatch, TablesAreCompleteAndMatchTheCpu) {
  const KernelTable& s = scalar_kernels();
  EXPECT_EQ(s.isa, Isa::kScalar);
  EXPECT_TRUE(s.rms_norm && s.swiglu && s.geglu_tanh && s.softmax && s.add_inplace && s.scale_inplace && s.gemm_f32 &&
              s.dequantize_row && s.attend_head);
  const KernelTable* a = kernels_for(Isa::kAvx2);
  EXPECT_EQ(a != nullptr, cpu_features().supports_avx2_kernels());
  if (a != nullptr) {
    EXPECT_EQ(a->isa, Isa::kAvx2);
    EXPECT_TRUE(a->rms_norm && a->swiglu && a->geglu_tanh && a->softmax && a->add_inplace && a->scale_inplace &&
                a->gemm_f32 && a->dequantize_row && a->fused_supports && a->fused_rows && a->attend_head);
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
  for (const KernelTable* t : all) {
    EXPECT_TRUE(t->fp8_rows && t->w8a8_rows && t->quantize_acts && t->paged_attend_group) << isa_name(t->isa);
  }
  EXPECT_EQ(all.front(), &scalar_kernels());
  const KernelTable* n = kernels_for(Isa::kNeon);
  EXPECT_EQ(n != nullptr, cpu_features().supports_neon_kernels());
  EXPECT_EQ(all.size(), 1u + (a != nullptr) + (z != nullptr) + (n != nullptr));
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
  Isa want = Isa::kScalar;
  bool known = false;
  for (Isa isa : built_isas()) {
    if (isa_name(isa) == expected) {
      want = isa;
      known = true;
    }
  }
  ASSERT_TRUE(known) << "TOKENMILL_EXPECT_ISA=" << expected << " names no ISA of this build";
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
    GTEST_SKIP() << "this CPU cannot run the " << isa_name(GetParam()) << " kernels: the kernel tests skip them here";
  }
  EXPECT_EQ(kernels_for(GetParam())->isa, GetParam());
  EXPECT_NE(std::find(available_kernels().begin(), available_kernels().end(), kernels_for(GetParam())),
            available_kernels().end());
}

// Every SIMD ISA this build has kernels for.
std::vector<Isa> simd_isas() {
  std::vector<Isa> isas = built_isas();
  isas.erase(std::remove(isas.begin(), isas.end(), Isa::kScalar), isas.end());
  return isas;
}

INSTANTIATE_TEST_SUITE_P(Isas, IsaCoverageOf, ::testing::ValuesIn(simd_isas()),
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
  EXPECT_EQ(isa_name(Isa::kNeon), "neon");
}

TEST(Dispatch, UnknownOrForeignIsaIsRejected) {
  EXPECT_THROW(choose_isa("SCALAR ", cpu_features()), Error);
  EXPECT_THROW(choose_isa("sse2", cpu_features()), Error);
  EXPECT_EQ(choose_isa("scalar", cpu_features()), Isa::kScalar);
  // Every ISA the registry knows is either built here or rejected by name,
  // whatever features a caller claims.
  CpuFeatures everything{true, true, true, true, true, true, true};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    const auto built = built_isas();
    const std::string name(isa_name(isa));
    if (std::find(built.begin(), built.end(), isa) == built.end()) {
      EXPECT_THROW(choose_isa(name.c_str(), everything), Error) << name;
      EXPECT_EQ(kernels_for(isa), nullptr) << name;
    } else {
      EXPECT_EQ(choose_isa(name.c_str(), everything), isa) << name;
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels
