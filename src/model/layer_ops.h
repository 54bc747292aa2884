// Row-wise steps of the decoder layer that differ between architectures only
// by data (a norm present or not, a residual multiplier, a soft cap): the
// forward pass calls them unconditionally and the data decides.
#pragma once

#include <cstdint>

#include "model/weights.h"
#include "util/thread_pool.h"

namespace tokenmill::model {

// out[t] = rms_norm(in[t]) * w for each of `rows` rows of length n (in place allowed).
void norm_rows(const float* in, const VectorView& w, float* out, int64_t rows, int64_t n, float eps);

// A sub-block's input [rows, n]: rms_norm(x) * w written to `scratch` when the
// layer has the pre-norm w, else x itself (olmo2 normalises after the block).
const float* block_input(const float* x, const VectorView& w, float* scratch, int64_t rows, int64_t n, float eps);

// x += scale * out over n floats; scale is granite's residual multiplier
// (1 elsewhere, which skips the extra pass). Overwrites out when scaling.
void add_residual(float* x, float* out, float scale, int64_t n);

// x = cap * tanh(x / cap) over n floats, split over the pool.
void softcap_inplace(float* x, int64_t n, float cap, ThreadPool& pool);

// y[t] += b for each of `rows` rows of length b.size; nothing when b is absent.
void add_bias(float* y, const VectorView& b, int64_t rows);

}  // namespace tokenmill::model
