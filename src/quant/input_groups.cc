#include "quant/input_groups.h"

#include <fmt/format.h>

namespace tokenmill::quant {
namespace {

void add_group(const gguf::GgufFile& file, std::vector<std::string> names, const std::string& vector,
               const std::string& rows, int64_t layer, std::vector<InputGroup>& out) {
  InputGroup g;
  for (std::string& n : names) {
    if (file.find_tensor(n) != nullptr) g.matrices.push_back(std::move(n));
  }
  if (g.matrices.empty()) return;
  if (!vector.empty() && file.find_tensor(vector) != nullptr) g.fold_vector = vector;
  if (!rows.empty() && file.find_tensor(rows) != nullptr) g.fold_rows = rows;
  g.layer = layer;
  out.push_back(std::move(g));
}

}  // namespace

std::vector<InputGroup> input_groups(const gguf::GgufFile& file, const model::ModelConfig& config) {
  std::vector<InputGroup> out;
  for (int64_t l = 0; l < config.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    const bool fused_qkv = file.find_tensor(p + "attn_qkv.weight") != nullptr;
    const bool fused_gate_up = file.find_tensor(p + "ffn_gate.weight") == nullptr;
    add_group(file,
              fused_qkv ? std::vector<std::string>{p + "attn_qkv.weight"}
                        : std::vector<std::string>{p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"},
              p + "attn_norm.weight", "", l, out);
    add_group(file, {p + "attn_output.weight"}, "", "", l, out);
    add_group(file,
              fused_gate_up ? std::vector<std::string>{p + "ffn_up.weight"}
                            : std::vector<std::string>{p + "ffn_gate.weight", p + "ffn_up.weight"},
              p + "ffn_norm.weight", "", l, out);
    add_group(file, {p + "ffn_down.weight"}, "", fused_gate_up ? "" : p + "ffn_up.weight", l, out);
  }
  add_group(file, {file.find_tensor("output.weight") ? "output.weight" : "token_embd.weight"}, "", "", -1, out);
  return out;
}

}  // namespace tokenmill::quant
