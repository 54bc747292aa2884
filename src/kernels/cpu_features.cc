#include "kernels/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tokenmill::kernels {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  // The compiler runtime's checks also verify that the OS enables AVX state
  // (XGETBV), which a raw cpuid bit would not.
  f.avx2 = __builtin_cpu_supports("avx2") != 0;
  f.fma = __builtin_cpu_supports("fma") != 0;
  // As for AVX2, these checks include the OS enabling ZMM and mask state.
  f.avx512f = __builtin_cpu_supports("avx512f") != 0;
  f.avx512bw = __builtin_cpu_supports("avx512bw") != 0;
  f.avx512vnni = __builtin_cpu_supports("avx512vnni") != 0;
  // Not every compiler knows "f16c" in __builtin_cpu_supports (clang 14 does
  // not), so read CPUID leaf 1, ECX bit 29 directly. F16C uses VEX encoding,
  // so it is only usable where AVX is, which the avx2 check above covers.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0) f.f16c = (ecx & (1u << 29)) != 0;
#elif defined(__aarch64__) && defined(__ARM_NEON)
  // Advanced SIMD is mandatory in AArch64; the compiler defines __ARM_NEON
  // for every AArch64 target Linux and macOS use.
  f.neon = true;
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace tokenmill::kernels
