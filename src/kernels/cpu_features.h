// What the CPU we run on can execute, detected once at start-up. Only the
// features the kernels use are reported (AVX2 code also needs FMA and F16C).
#pragma once

namespace tokenmill::kernels {

struct CpuFeatures {
  bool avx2 = false;  // includes the OS saving YMM state (checked by the runtime)
  bool fma = false;
  bool f16c = false;

  // Whether the *_avx2.cc kernels may run: they are compiled with
  // -mavx2 -mfma -mf16c and use all three.
  bool supports_avx2_kernels() const { return avx2 && fma && f16c; }
};

// The features of this CPU. Thread-safe; cpuid runs once.
const CpuFeatures& cpu_features();

}  // namespace tokenmill::kernels
