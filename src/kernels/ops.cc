// Public ops: dispatch to the active ISA (rope, scalar only, is in rope.cc).
#include "kernels/ops.h"

#include <cmath>
#include <vector>

#include "kernels/dispatch.h"
#include "util/check.h"

namespace tokenmill::kernels {

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  active_kernels().rms_norm(x, w, out, n, eps);
}

void swiglu(float* gate, const float* up, int64_t n) { active_kernels().swiglu(gate, up, n); }

void geglu_tanh(float* gate, const float* up, int64_t n) { active_kernels().geglu_tanh(gate, up, n); }

void softmax(float* x, int64_t n) { active_kernels().softmax(x, n); }

void add_inplace(float* y, const float* x, int64_t n) { active_kernels().add_inplace(y, x, n); }

void scale_inplace(float* x, float s, int64_t n) { active_kernels().scale_inplace(x, s, n); }

}  // namespace tokenmill::kernels
