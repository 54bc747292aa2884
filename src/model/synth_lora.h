// Synthetic LoRA adapters: for any base GGUF (synthetic or real), an
// adapter file in llama.cpp's format (model/lora_adapter.h) whose deltas
// have random directions and a chosen strength, for tests and benchmarks of
// multi-adapter serving. Same base, options and seed => byte-identical file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/tensor_type.h"
#include "gguf/writer.h"

namespace tokenmill::model {

struct SynthLoraOptions {
  int64_t rank = 8;
  float alpha = 16.0f;
  // Base tensor roles to adapt ("attn_q", "attn_k", "attn_v", "attn_qkv",
  // "attn_output", "ffn_gate", "ffn_up", "ffn_down", "output"); empty: every
  // decoder-layer linear the base file has (not the output projection).
  std::vector<std::string> targets;
  gguf::TensorType type = gguf::TensorType::F32;  // of lora_a and lora_b
  uint64_t seed = 0;
  // How large a delta is against its base product: the ratio of the
  // standard deviations of (scale B A) x and W x for a random x.
  float strength = 0.3f;
};

// The roles `targets` may name.
const std::vector<std::string>& synth_lora_roles();

// Builds the adapter for `base`. Throws Error for a bad option (rank < 1,
// an unknown role or one the base file lacks, a type whose blocks do not
// divide the rank or the row length).
gguf::GgufWriter build_synth_lora(const gguf::GgufFile& base, const SynthLoraOptions& options);

}  // namespace tokenmill::model
