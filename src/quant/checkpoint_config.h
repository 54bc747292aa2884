// The quantization settings of a GPTQ or AWQ checkpoint folder, as its
// quantizer wrote them: quantize_config.json (AutoGPTQ, GPTQModel),
// quant_config.json (AutoAWQ) or the "quantization_config" object of
// config.json (Hugging Face transformers). Only what the importer needs and
// supports: 4-bit codes, GPTQ's "gptq" (v1) and "gptq_v2" checkpoint
// formats, AWQ's "gemm" layout with zero points.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace tokenmill::quant {

enum class CheckpointMethod { kGptq, kAwq };

std::string_view checkpoint_method_name(CheckpointMethod method);  // "gptq", "awq"

struct CheckpointConfig {
  CheckpointMethod method = CheckpointMethod::kGptq;
  int bits = 4;
  // Input columns per scale/zero group; -1 means one group per whole row.
  int64_t group_size = 128;
  bool desc_act = false;  // GPTQ act-order: g_idx is then not in order
  bool sym = true;
  // GPTQ "gptq" (v1) checkpoints store zero - 1 (AutoGPTQ's packing quirk);
  // "gptq_v2" stores the zero itself, as AWQ does.
  bool zero_stored_minus_one = false;
  std::string format;  // "gptq", "gptq_v2" or "gemm", for messages and metadata
  std::string source;  // the file the settings came from, for messages
};

// Parses one settings object; `source` names it in errors. Throws
// tokenmill::Error naming the problem: a quant_method other than `expected`,
// bits != 4, a group size that is neither -1 nor positive, an unknown
// checkpoint format or AWQ version, AWQ without zero points.
CheckpointConfig parse_checkpoint_config(const nlohmann::json& settings, CheckpointMethod expected,
                                         const std::string& source);

// Reads dir's settings: quantize_config.json, else quant_config.json, else
// config.json's "quantization_config". Throws when none is there or the
// file is not valid JSON.
CheckpointConfig read_checkpoint_config(const std::string& dir, CheckpointMethod expected);

}  // namespace tokenmill::quant
