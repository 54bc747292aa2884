#include "kernels/dispatch.h"

#include <fmt/format.h>

#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>
#include <string_view>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;

template <TensorType T>
void dequantize_row_ref_of(const void* src, float* dst, int64_t n) {
  dequantize_row_ref(T, src, dst, n);
}

// Every type's row gets the reference dequantizer, the one kernel every
// table has for every type (type_kernels.h).
template <TensorType... Ts>
void set_reference_rows(KernelTable& t) {
  ((t.of(Ts).dequantize_row = dequantize_row_ref_of<Ts>), ...);
}

KernelTable make_scalar_table() {
  KernelTable t;
  t.isa = Isa::kScalar;
  t.rms_norm = rms_norm_ref;
  t.swiglu = swiglu_ref;
  t.geglu_tanh = geglu_tanh_ref;
  t.softmax = softmax_ref;
  t.add_inplace = add_inplace_ref;
  t.scale_inplace = scale_inplace_ref;
  t.gemm_f32 = scalar::gemm_f32;
  t.quantize_acts = quantize_acts_ref;
  t.fp8_rows = matmul_fp8_rows_ref;
  t.w8a8_rows = w8a8_rows_ref;
  t.attend_head = scalar::attend_head;
  t.paged_attend_group = scalar::paged_attend_group;
  set_reference_rows<TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
                     TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q8_1, TensorType::Q2_K,
                     TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_K>(t);
  return t;
}

// Every ISA tokenmill knows, in order of preference (the last one the CPU
// runs wins under TOKENMILL_ISA=auto). `make` is null where this build has
// no code for the ISA (another CPU family).
struct IsaEntry {
  Isa isa;
  std::string_view name;
  bool (*runs_on)(const CpuFeatures& cpu);
  KernelTable (*make)();
  // Why `cpu` cannot run it, for the error when TOKENMILL_ISA forces it.
  std::string (*why_not)(const CpuFeatures& cpu);
};

#if defined(__x86_64__)
constexpr bool kX86 = true;
constexpr KernelTable (*kMakeAvx2)() = make_avx2_table;
#if defined(TOKENMILL_NO_AVX512_KERNELS)
constexpr KernelTable (*kMakeAvx512)() = nullptr;
#else
constexpr KernelTable (*kMakeAvx512)() = make_avx512_table;
#endif
#else
constexpr bool kX86 = false;
constexpr KernelTable (*kMakeAvx2)() = nullptr;
constexpr KernelTable (*kMakeAvx512)() = nullptr;
#endif
#if defined(__aarch64__)
constexpr KernelTable (*kMakeNeon)() = make_neon_table;
#else
constexpr KernelTable (*kMakeNeon)() = nullptr;
#endif

const IsaEntry kIsas[] = {
    {Isa::kScalar, "scalar", [](const CpuFeatures&) { return true; }, make_scalar_table,
     [](const CpuFeatures&) { return std::string(); }},
    {Isa::kAvx2, "avx2", [](const CpuFeatures& cpu) { return cpu.supports_avx2_kernels(); }, kMakeAvx2,
     [](const CpuFeatures& cpu) {
       return fmt::format("this CPU lacks AVX2, FMA or F16C (avx2={}, fma={}, f16c={})", cpu.avx2, cpu.fma, cpu.f16c);
     }},
    {Isa::kAvx512, "avx512", [](const CpuFeatures& cpu) { return cpu.supports_avx512_kernels(); }, kMakeAvx512,
     [](const CpuFeatures& cpu) {
       return fmt::format(
           "this CPU lacks AVX2, FMA, F16C, AVX-512 F, BW or VNNI (avx2={}, fma={}, f16c={}, avx512f={}, "
           "avx512bw={}, avx512vnni={})",
           cpu.avx2, cpu.fma, cpu.f16c, cpu.avx512f, cpu.avx512bw, cpu.avx512vnni);
     }},
    {Isa::kNeon, "neon", [](const CpuFeatures& cpu) { return cpu.supports_neon_kernels(); }, kMakeNeon,
     [](const CpuFeatures&) { return std::string("this CPU is not AArch64 with NEON"); }},
};

const IsaEntry* find_entry(Isa isa) {
  for (const IsaEntry& e : kIsas) {
    if (e.isa == isa) return &e;
  }
  return nullptr;
}

const IsaEntry& entry(Isa isa) {
  const IsaEntry* e = find_entry(isa);
  if (e == nullptr) fail("unknown ISA {}", static_cast<int>(isa));
  return *e;
}

// Whether this build has the ISA's code and `cpu` can run it.
bool usable(const IsaEntry& e, const CpuFeatures& cpu) { return e.make != nullptr && e.runs_on(cpu); }

}  // namespace

std::string_view isa_name(Isa isa) { return find_entry(isa) != nullptr ? find_entry(isa)->name : "unknown"; }

const KernelTable& scalar_kernels() { return *kernels_for(Isa::kScalar); }  // every CPU runs it

const KernelTable* kernels_for(Isa isa) {
  // One table per ISA, made on first use (thread-safe: call_once per slot).
  static std::once_flag once[std::size(kIsas)];
  static KernelTable tables[std::size(kIsas)];
  for (size_t i = 0; i < std::size(kIsas); ++i) {
    const IsaEntry& e = kIsas[i];
    if (e.isa != isa) continue;
    if (!usable(e, cpu_features())) return nullptr;
    std::call_once(once[i], [&] { tables[i] = e.make(); });
    return &tables[i];
  }
  return nullptr;
}

KernelTable kernel_table_definition(Isa isa) {
  const IsaEntry& e = entry(isa);
  if (e.make == nullptr) fail("kernel_table_definition: this build has no {} kernels", e.name);
  return e.make();
}

std::vector<Isa> built_isas() {
  std::vector<Isa> isas;
  for (const IsaEntry& e : kIsas) {
    if (e.make != nullptr) isas.push_back(e.isa);
  }
  return isas;
}

Isa best_isa(const CpuFeatures& cpu) {
  Isa best = Isa::kScalar;
  for (const IsaEntry& e : kIsas) {
    if (usable(e, cpu)) best = e.isa;
  }
  return best;
}

std::vector<const KernelTable*> available_kernels() {
  std::vector<const KernelTable*> tables;
  for (const IsaEntry& e : kIsas) {
    if (const KernelTable* t = kernels_for(e.isa)) tables.push_back(t);
  }
  return tables;
}

Isa choose_isa(const char* request, const CpuFeatures& cpu) {
  const std::string_view want = request == nullptr ? "" : request;
  if (want.empty() || want == "auto") return best_isa(cpu);
  std::string names = "auto";
  for (const IsaEntry& e : kIsas) {
    names += ", " + std::string(e.name);
    if (e.name != want) continue;
    if (e.make == nullptr) {
      const bool left_out = e.isa == Isa::kAvx512 && kX86;  // x86-64 without them
      fail("TOKENMILL_ISA={}, but this build has no {} kernels ({})", want, want,
           left_out ? "built with TOKENMILL_AVX512_KERNELS=OFF" : "they are for another CPU family");
    }
    if (!e.runs_on(cpu)) fail("TOKENMILL_ISA={}, but {}", want, e.why_not(cpu));
    return e.isa;
  }
  fail("TOKENMILL_ISA='{}' is not one of: {}", want, names);
}

const KernelTable& active_kernels() {
  static const KernelTable* table = kernels_for(choose_isa(std::getenv("TOKENMILL_ISA"), cpu_features()));
  return *table;
}

}  // namespace tokenmill::kernels
