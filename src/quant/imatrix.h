// Importance matrix: per weight matrix, statistics of the activations that
// multiply each of its input channels, collected by `tokenmill calibrate`
// over a calibration text:
//   sum_sq[c]  = sum over tokens of x[t, c]^2  (its mean is the importance of
//                column c: the expected squared input that a weight error in
//                column c is multiplied by, so sum_c mean_sq[c] * err[c]^2 is
//                the expected squared output error of the row);
//   abs_max[c] = max over tokens of |x[t, c]|  (for SmoothQuant);
//   count      = tokens seen.
//
// File format: GGUF (general.type = "imatrix"), after llama.cpp's GGUF
// imatrix layout: per matrix NAME an F32 tensor "NAME.in_sum2" [cols, 1] and
// "NAME.counts" [1, 1]; tokenmill adds "NAME.in_max" [cols, 1]. Metadata
// imatrix.chunk_count, imatrix.chunk_size, imatrix.datasets.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::quant {

struct ChannelStats {
  std::vector<double> sum_sq;  // [cols]
  std::vector<float> abs_max;  // [cols]; empty when the file had none
  int64_t count = 0;
};

class Imatrix {
 public:
  // Adds tokens x: [num_tokens, cols] seen by matrix `name`. Throws Error if
  // `name` was seen before with another column count.
  void add(const std::string& name, const float* x, int64_t num_tokens, int64_t cols);

  const ChannelStats* find(std::string_view name) const;
  // Mean squared activation per column [cols]; empty when `name` is absent
  // or has no tokens.
  std::vector<float> importance(std::string_view name) const;
  const std::map<std::string, ChannelStats, std::less<>>& entries() const { return entries_; }

  int64_t chunk_count = 0;
  int64_t chunk_size = 0;
  std::vector<std::string> datasets;

  // Writes the GGUF file (atomically: PATH.tmp then rename).
  void save(const std::string& path) const;
  // Reads a file written by save() or by llama.cpp (in_sum2/counts only).
  // Throws Error naming the file for anything else.
  static Imatrix load(const std::string& path);

 private:
  std::map<std::string, ChannelStats, std::less<>> entries_;
};

}  // namespace tokenmill::quant
