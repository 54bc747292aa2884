// Rotary position embedding (RoPE) with the frequency scalings GGUF files
// ask for: none, linear (positions divided by a factor), per-pair frequency
// divisors (Llama 3.1's rope_freqs tensor) and YaRN.
//
// The work is split in three so that each piece is done as rarely as it can
// be: rope_frequencies() once per layer kind (a pow per pair), rope_angles()
// once per token (a sincos per pair, shared by all its heads), rope_apply()
// once per head. All angle arithmetic is in double: pos * freq reaches ~1e5
// radians at long contexts, where float would lose ~1e-2 rad.
//
// YaRN, as llama.cpp's ggml computes it (the YaRN paper, Peng et al. 2023):
// each pair i has an unscaled angle theta_e = pos * base^(-2i/d) / ff_i and a
// position-interpolated one theta_i = freq_scale * theta_e. A ramp over the
// pair index blends them: pairs below the "fast" correction dimension keep
// theta_e (they turn many times within the original context), pairs above
// the "slow" one take theta_i, and pairs between mix linearly:
//   low  = max(0,     floor(corr(beta_fast)))
//   high = min(d - 1, ceil(corr(beta_slow)))
//   corr(b) = d * ln(orig_ctx / (2 pi b)) / (2 ln base)
//   ramp_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1)
//   mix_i  = ramp_i * ext_factor
//   theta  = theta_i * (1 - mix_i) + theta_e * mix_i
// and cos/sin are multiplied by mscale = attn_factor * (1 + 0.1 ln(1/freq_scale))
// (the attention temperature: q.k grows by mscale^2). Since theta is linear
// in pos, every pair has one effective frequency, which is what
// rope_frequencies() precomputes.
#pragma once

#include <cstdint>
#include <vector>

namespace tokenmill::kernels {

struct RopeScaling {
  double freq_scale = 1.0;  // multiplies positions: 1 / factor for linear and YaRN
  // YaRN. ext_factor 0 turns the ramp (and YaRN's mscale term) off; 1 is the
  // full ramp llama.cpp uses for files whose scaling type is "yarn".
  double ext_factor = 0.0;
  double attn_factor = 1.0;  // multiplies cos and sin (always; 1 = none)
  int64_t orig_ctx = 0;      // the context the model was trained with before extension
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

// The effective angular frequency of each rotated pair (angle = pos *
// freq[i]) and the factor cos/sin are multiplied by.
struct RopeFrequencies {
  std::vector<double> freq;  // [rope_dims / 2]
  double mscale = 1.0;
};

// freq_factors may be null; else [rope_dims / 2] divisors of the base
// frequencies (llama3). Preconditions (CHECK): rope_dims even and > 0, base
// > 0, freq_scale > 0, orig_ctx > 0 when ext_factor != 0.
RopeFrequencies rope_frequencies(int64_t rope_dims, double base, const RopeScaling& scaling, const float* freq_factors);

// YaRN's correction range [low, high] in pair indices (the formulas above).
void yarn_corr_dims(int64_t rope_dims, int64_t orig_ctx, double base, double beta_fast, double beta_slow,
                    double out[2]);

// cos/sin [freq.size()] of each pair's angle at pos, times mscale.
void rope_angles(const RopeFrequencies& f, int64_t pos, double* cos_out, double* sin_out);

// Rotates the first rope_dims elements of one head by the pairs' angles:
// `neox` pairs (i, i + rope_dims/2), else (2i, 2i+1). The rest is untouched.
void rope_apply(float* head, int64_t rope_dims, const double* cos_in, const double* sin_in, bool neox);

// Without YaRN, in one call (tests and tools): freq_scale multiplies
// positions, freq_factors (may be null) divide each frequency.
void rope_angles(int64_t rope_dims, int64_t pos, float freq_base, float freq_scale, const float* freq_factors,
                 double* cos_out, double* sin_out);
void rope(float* head, int64_t head_dim, int64_t rope_dims, int64_t pos, float freq_base, float freq_scale,
          const float* freq_factors, bool neox);

}  // namespace tokenmill::kernels
