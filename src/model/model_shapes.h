// Weight formats and tensor encoding shared by the model writers (synth and
// the llama2.c importer): which GGUF type each weight matrix is stored in,
// how a requested type falls back when a row does not fit its blocks, and
// the parallel row-by-row quantization that produces the tensor bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "util/thread_pool.h"

namespace tokenmill::model {

// The file-level format a user asks for: one tensor type for every 2-D
// matrix, or llama.cpp's "mostly Q4_K_M" mixture (see q4_k_m_type in
// synth.cc). 1-D tensors (norms, biases) are always F32.
struct WeightFormat {
  gguf::TensorType base = gguf::TensorType::F32;
  bool q4_k_m = false;  // base is Q4_K when set
};

// Parses "F32", "q8_0", "Q4_K_M" ... (case-insensitive); nullopt when the
// name is unknown or the type cannot be quantized to (Q8_1, Q8_K).
std::optional<WeightFormat> parse_weight_format(std::string_view name);
std::string weight_format_name(const WeightFormat& format);
// "F32|F16|BF16|Q8_0|..." for help texts and error messages.
std::string weight_format_choices();

// general.file_type as numbered by llama.cpp's LLAMA_FTYPE (0 all F32,
// 1 mostly F16, 2 Q4_0, 3 Q4_1, 7 Q8_0, 8 Q5_0, 9 Q5_1, 10 Q2_K, 11 Q3_K_S,
// 14 Q4_K_S, 15 Q4_K_M, 16 Q5_K_S, 18 Q6_K, 32 BF16).
uint32_t llama_file_type(const WeightFormat& format);

// The type a matrix whose rows hold row_length elements is stored in when
// `wanted` is requested: wanted itself when row_length is a multiple of its
// block size; else Q8_0 for the 256-element K-quant types when it fits;
// else `last_resort` (F32 or F16, which fit any row).
gguf::TensorType fitting_type(gguf::TensorType wanted, int64_t row_length, gguf::TensorType last_resort);

// Fills out [row_length] with the float values of row `row`. Called
// concurrently from pool threads for distinct rows: must be thread-safe.
using RowSource = std::function<void(int64_t row, std::span<float> out)>;

// Encodes a [num_rows, row_length] matrix, produced row by row, as `type`.
// Returns row_bytes(type, row_length) * num_rows bytes. Rows are split over
// the pool's threads; the result does not depend on the thread count.
// Precondition: row_length is a multiple of type's block size.
// Cost: one source call and one quantize_row_ref per row.
std::vector<uint8_t> encode_rows(gguf::TensorType type, int64_t num_rows, int64_t row_length, const RowSource& source,
                                 ThreadPool& pool);

}  // namespace tokenmill::model
