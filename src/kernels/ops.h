// Element-wise and normalisation operators of the transformer forward pass.
// All operate on FP32 rows; `n` is the row length.
#pragma once

#include <cstdint>

#include "kernels/rope.h"

namespace tokenmill::kernels {

// out[i] = x[i] / rms(x) * w[i]; rms over the row with eps. w may be null (no scale).
// out may alias x.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);

// Rotary embedding (rope, rope_angles, rope_apply) lives in kernels/rope.h.

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
