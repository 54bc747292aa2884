#include "kernels/dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/interleave.h"
#include "kernels/ops.h"
#include "kernels/quantize_act.h"
#include "util/error.h"
#include "util/test_dependency.h"

namespace tokenmill::kernels {
namespace {

TEST(Dispatch, TablesAreCompleteAndMatchTheCpu) {
  const KernelTable& s = scalar_kernels();
  EXPECT_EQ(s.isa, Isa::kScalar);
  EXPECT_TRUE(s.rms_norm && s.swiglu && s.geglu_tanh && s.softmax && s.add_inplace && s.scale_inplace && s.gemm_f32 &&
              s.attend_head);
  const KernelTable* a = kernels_for(Isa::kAvx2);
  EXPECT_EQ(a != nullptr, cpu_features().supports_avx2_kernels());
  if (a != nullptr) {
    EXPECT_EQ(a->isa, Isa::kAvx2);
    EXPECT_TRUE(a->rms_norm && a->swiglu && a->geglu_tanh && a->softmax && a->add_inplace && a->scale_inplace &&
                a->gemm_f32 && a->attend_head);
    EXPECT_NE(a->of(gguf::TensorType::Q8_0).fused_rows, nullptr);
    EXPECT_EQ(a->of(gguf::TensorType::Q2_K).fused_rows, nullptr);
  }
  const KernelTable* z = kernels_for(Isa::kAvx512);
  const auto built = built_isas();
  const bool avx512_built = std::find(built.begin(), built.end(), Isa::kAvx512) != built.end();
  EXPECT_EQ(z != nullptr, avx512_built && cpu_features().supports_avx512_kernels());
  if (z != nullptr) {
    EXPECT_EQ(z->isa, Isa::kAvx512);
    EXPECT_TRUE(z->gemm_q16_packed != nullptr && z->of(gguf::TensorType::Q4_K).q16_rows != nullptr &&
                z->attend_head != nullptr);
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

// The per-type rows are consistent in every table this build has (whether
// or not this CPU runs it): every type tokenmill reads has a dequantizer; an
// integer decode kernel comes with its switch point; the int16 prefill
// pieces come together; interleaved kernels only where interleave.h has the
// layout; and no row for an id that is no type.
TEST(Dispatch, TypeRowsAreConsistent) {
  for (Isa isa : built_isas()) {
    const KernelTable t = kernel_table_definition(isa);
    for (uint32_t id = 0; id < gguf::kTensorTypeIdLimit; ++id) {
      const TypeKernels& k = t.types[id];
      const auto info = gguf::tensor_type_info(id);
      const std::string where = std::string(isa_name(isa)) + " type id " + std::to_string(id);
      if (!info) {
        EXPECT_TRUE(!k.dequantize_row && !k.fused_rows && !k.q16_rows && !k.q16_decode_row && !k.pack_q16_blocks &&
                    !k.gemm_interleaved)
            << where;
        continue;
      }
      EXPECT_NE(k.dequantize_row, nullptr) << where;
      if (k.q16_rows != nullptr) {
        EXPECT_GE(k.q16_row_max_tokens, 1) << where;
        EXPECT_LE(k.q16_row_max_tokens, kMaxQ16RowTokens) << where;
      } else {
        EXPECT_EQ(k.q16_row_max_tokens, 0) << where;
      }
      EXPECT_TRUE(k.pack_q16_blocks == nullptr || k.q16_decode_row != nullptr) << where;
      EXPECT_TRUE(k.q16_decode_row == nullptr || t.gemm_q16_packed != nullptr) << where;
      EXPECT_TRUE(k.gemm_interleaved == nullptr || has_interleaved_layout(info->type)) << where;
    }
  }
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
