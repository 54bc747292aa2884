// The tensors of a checkpoint folder (every *.safetensors in it: a single
// file, or the shards model-0000X-of-0000N.safetensors) under one name
// index, and the Hugging Face -> GGUF names of its 4-bit linear layers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "quant/safetensors_reader.h"

namespace tokenmill::quant {

class CheckpointTensors {
 public:
  // Opens dir/*.safetensors (in name order). Throws tokenmill::Error when
  // there is none, a file is malformed, or two files hold the same name.
  static CheckpointTensors open_dir(const std::string& dir);

  const SafetensorsTensor* find(std::string_view name) const;  // nullptr when absent
  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  size_t num_files() const { return files_.size(); }

 private:
  std::vector<SafetensorsFile> files_;
  std::unordered_map<std::string, const SafetensorsTensor*> index_;
};

// One 4-bit linear layer: model.layers.N.self_attn.q_proj -> blk.N.attn_q.
struct LinearLayerName {
  std::string prefix;     // checkpoint name without ".qweight"
  std::string gguf_name;  // "blk.0.attn_q.weight"
  std::string gguf_bias;  // "blk.0.attn_q.bias"
  int64_t layer = 0;
  std::string_view role;  // "attn_q", "attn_k", ... "ffn_down"
};

// The GGUF name of a checkpoint prefix such as
// "model.layers.3.mlp.down_proj" (also under "model.language_model." or
// "language_model.model."); throws naming the prefix when it is not one of
// the seven attention/MLP projections of a numbered layer.
LinearLayerName linear_layer_name(const std::string& prefix);

// Every layer the checkpoint packs (tensors named PREFIX.qweight), sorted
// by GGUF name.
std::vector<LinearLayerName> find_linear_layers(const CheckpointTensors& tensors);

}  // namespace tokenmill::quant
