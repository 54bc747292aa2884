// Element-wise and normalisation operators of the transformer forward pass.
// All operate on FP32 rows; `n` is the row length.
#pragma once

#include <cstdint>

namespace tokenmill::kernels {

// out[i] = x[i] / rms(x) * w[i]; rms over the row with eps. w may be null (no scale).
// out may alias x.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);

// In-place rotary embedding on one head vector of length head_dim at position
// pos. rope_dims <= head_dim leading dims are rotated. `neox` selects pairing
// (i, i + rope_dims/2) instead of (2i, 2i+1). freq_scale multiplies positions;
// freq_factors (may be null, length rope_dims/2) divide each frequency (llama3).
void rope(float* head, int64_t head_dim, int64_t rope_dims, int64_t pos, float freq_base, float freq_scale,
          const float* freq_factors, bool neox);

// rope() in two halves, so that the angles of a position are computed once
// and shared by every head of the token (a pow and a sincos per pair,
// recomputed for each head, were a visible share of a prefill).
// rope_angles writes cos/sin [rope_dims / 2] of the pairs' angles at pos;
// rope_apply rotates one head with them. Together they give exactly rope().
void rope_angles(int64_t rope_dims, int64_t pos, float freq_base, float freq_scale, const float* freq_factors,
                 double* cos_out, double* sin_out);
void rope_apply(float* head, int64_t rope_dims, const double* cos_in, const double* sin_in, bool neox);

// gate[i] = silu(gate[i]) * up[i]
void swiglu(float* gate, const float* up, int64_t n);
// gate[i] = gelu_tanh(gate[i]) * up[i]
void geglu_tanh(float* gate, const float* up, int64_t n);

// In-place numerically stable softmax over n values.
void softmax(float* x, int64_t n);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);
// x[i] *= s
void scale_inplace(float* x, float s, int64_t n);

// Scalar references of the operations above (same contracts). They compute
// in double where it matters and are what the scalar ISA (TOKENMILL_ISA=scalar)
// runs; the optimised versions are tested against them.
void rms_norm_ref(const float* x, const float* w, float* out, int64_t n, float eps);
void swiglu_ref(float* gate, const float* up, int64_t n);
void geglu_tanh_ref(float* gate, const float* up, int64_t n);
void softmax_ref(float* x, int64_t n);
void add_inplace_ref(float* y, const float* x, int64_t n);
void scale_inplace_ref(float* x, float s, int64_t n);

}  // namespace tokenmill::kernels
