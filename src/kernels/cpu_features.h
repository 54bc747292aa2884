// What the CPU we run on can execute, detected once at start-up. Only the
// features the kernels use are reported (AVX2 code also needs FMA and F16C).
#pragma once

namespace tokenmill::kernels {

struct CpuFeatures {
  bool avx2 = false;  // includes the OS saving YMM state (checked by the runtime)
  bool fma = false;
  bool f16c = false;
  // AVX-512 Foundation, Byte/Word and VNNI, each including the OS saving
  // ZMM and mask state.
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vnni = false;
  // AArch64 Advanced SIMD (NEON): part of every AArch64 CPU the Linux and
  // macOS ABIs run on, so true whenever tokenmill is built for AArch64.
  bool neon = false;

  // Whether the *_avx2.cc kernels may run: they are compiled with
  // -mavx2 -mfma -mf16c and use all three.
  bool supports_avx2_kernels() const { return avx2 && fma && f16c; }
  // Whether the *_avx512.cc kernels may run (the AVX-512 table keeps the
  // AVX2 kernels it does not replace).
  bool supports_avx512_kernels() const { return supports_avx2_kernels() && avx512f && avx512bw && avx512vnni; }
  // Whether the *_neon.cc kernels may run.
  bool supports_neon_kernels() const { return neon; }
};

// The features of this CPU. Thread-safe; detection runs once.
const CpuFeatures& cpu_features();

}  // namespace tokenmill::kernels
