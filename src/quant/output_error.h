// The output error a rounding of a weight matrix causes over the
// calibration inputs: for rows d_r = w_r - q_r of the difference,
//   sum_r d_r^T H d_r,  H = mean x x^T,
// which is the mean squared error of the layer's outputs X W^T over the
// calibration tokens. AWQ (awq.h) and GPTQ's settings search
// (gptq_search.h) minimise it.
#pragma once

#include <cstdint>
#include <vector>

#include "util/thread_pool.h"

namespace tokenmill::quant {

// d: [n, cols]; h: [cols, cols] full (float). Computed as one product D H
// in the float matmul kernels over the pool, summed in double.
double output_error(const std::vector<float>& h, int64_t cols, const float* d, int64_t n, ThreadPool& pool);

// n row indices spread evenly over [0, rows) (all of them when n >= rows):
// the rows a search measures candidates on.
std::vector<int64_t> evenly_spaced_rows(int64_t rows, int64_t n);

}  // namespace tokenmill::quant
