#include "quant/checkpoint_tensors.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <utility>

#include "util/error.h"

namespace tokenmill::quant {
namespace {

namespace fs = std::filesystem;

constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kHfProjections = {{
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
}};

// Where the decoder layers sit in Llama/Qwen2 (model.layers) and in the
// multimodal Gemma 3 wrappers.
constexpr std::array<std::string_view, 3> kHfLayerRoots = {"model.layers.", "model.language_model.layers.",
                                                           "language_model.model.layers."};

}  // namespace

CheckpointTensors CheckpointTensors::open_dir(const std::string& dir) {
  if (!fs::is_directory(dir)) fail("{}: not a directory", dir);
  std::vector<fs::path> paths;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".safetensors") paths.push_back(e.path());
  }
  if (paths.empty()) fail("{}: no *.safetensors files", dir);
  std::sort(paths.begin(), paths.end());
  CheckpointTensors c;
  c.files_.reserve(paths.size());  // index_ points into the files' tensors
  for (const fs::path& p : paths) c.files_.push_back(SafetensorsFile::open(p.string()));
  for (const SafetensorsFile& f : c.files_) {
    for (const SafetensorsTensor& t : f.tensors()) {
      auto [it, inserted] = c.index_.emplace(t.name, &t);
      if (!inserted) fail("{}: tensor '{}' is also in another file of {}", f.name(), t.name, dir);
    }
  }
  return c;
}

const SafetensorsTensor* CheckpointTensors::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : it->second;
}

std::vector<std::string> CheckpointTensors::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, t] : index_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

LinearLayerName linear_layer_name(const std::string& prefix) {
  for (std::string_view root : kHfLayerRoots) {
    if (!std::string_view(prefix).starts_with(root)) continue;
    std::string_view rest = std::string_view(prefix).substr(root.size());
    int64_t layer = -1;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), layer);
    if (ec != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '.') break;
    const std::string_view module = rest.substr(static_cast<size_t>(end - rest.data()) + 1);
    for (const auto& [hf, role] : kHfProjections) {
      if (module != hf) continue;
      const std::string blk = fmt::format("blk.{}.{}", layer, role);
      return LinearLayerName{prefix, blk + ".weight", blk + ".bias", layer, role};
    }
    break;
  }
  fail(
      "checkpoint tensor {}.qweight is not one of the attention/MLP projections of a decoder layer "
      "(model.layers.N.self_attn.{{q,k,v,o}}_proj, model.layers.N.mlp.{{gate,up,down}}_proj)",
      prefix);
}

std::vector<LinearLayerName> find_linear_layers(const CheckpointTensors& tensors) {
  constexpr std::string_view kSuffix = ".qweight";
  std::vector<LinearLayerName> out;
  for (const std::string& name : tensors.names()) {
    if (!std::string_view(name).ends_with(kSuffix)) continue;
    out.push_back(linear_layer_name(name.substr(0, name.size() - kSuffix.size())));
  }
  std::sort(out.begin(), out.end(),
            [](const LinearLayerName& a, const LinearLayerName& b) { return a.gguf_name < b.gguf_name; });
  return out;
}

}  // namespace tokenmill::quant
