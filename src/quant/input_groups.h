// The weight matrices of a model grouped by the input they multiply, with
// where a per-input-channel factor can be folded so that the model computes
// the same function (SmoothQuant, AWQ): X = rms_norm(x) * norm -> divide the
// norm vector; X = act(gate) * up -> divide ffn_up's rows.
//   * attn_q/attn_k/attn_v (or a fused attn_qkv): fold into attn_norm;
//   * ffn_gate/ffn_up (or a fused ffn_up): fold into ffn_norm;
//   * ffn_down: fold into ffn_up's rows (not when gate and up are fused:
//     only the up half of its rows may be divided);
//   * attn_output and the classifier: no fold (attn_output's input is the
//     attention average of V, whose factors would have to agree across the
//     heads sharing a KV head; the classifier's input is the final norm,
//     but a tied classifier is also the embedding table).
// A group whose norm is missing (olmo2 normalises after its blocks) has no
// fold either. Mixture-of-experts tensors are in no group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/config.h"

namespace tokenmill::quant {

struct InputGroup {
  std::vector<std::string> matrices;  // sharing one input; all present in the file
  std::string fold_vector;            // F32 vector to divide by the factors, or empty
  std::string fold_rows;              // matrix whose rows to divide, or empty
  int64_t layer = -1;                 // -1: the classifier
  bool can_fold() const { return !fold_vector.empty() || !fold_rows.empty(); }
};

// In layer order, the classifier last. Matrices absent from the file are
// left out (a group with none is dropped).
std::vector<InputGroup> input_groups(const gguf::GgufFile& file, const model::ModelConfig& config);

}  // namespace tokenmill::quant
