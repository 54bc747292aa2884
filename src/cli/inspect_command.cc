// `tokenmill inspect FILE`: what a GGUF file holds, read from its header
// alone (tensor data is mapped but never touched, so it is quick on any size).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "gguf/reader.h"
#include "model/config.h"
#include "model/rope_config.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct InspectFlags {
  std::string path;
  bool metadata = false;
  bool tensors = false;
};

constexpr double kMiB = 1024.0 * 1024.0;

std::string bytes_string(uint64_t n) { return fmt::format("{} bytes ({:.2f} MiB)", n, static_cast<double>(n) / kMiB); }

// The value of `key` for display, or "-" when the file lacks it.
std::string shown(const gguf::GgufFile& f, std::string_view key) {
  const gguf::Value* v = f.find(key);
  return v == nullptr ? "-" : v->to_display_string();
}

void print_shape(const gguf::GgufFile& f, const std::string& arch) {
  static constexpr std::string_view kKeys[] = {
      "context_length",       "embedding_length",     "block_count",
      "feed_forward_length",  "attention.head_count", "attention.head_count_kv",
      "attention.key_length", "rope.freq_base",       "attention.sliding_window",
      "expert_count",         "expert_used_count",    "expert_feed_forward_length",
  };
  fmt::print("hyperparameters:\n");
  for (std::string_view key : kKeys) {
    fmt::print("  {:<26} {}\n", key, shown(f, fmt::format("{}.{}", arch, key)));
  }
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  std::string vocab =
      tokens != nullptr && tokens->is_array() ? fmt::format("{}", tokens->as_array().items.size()) : "-";
  fmt::print("  {:<26} {}\n", "vocab_size (tokens)", vocab);
}

// "0,2,4" / "0-4,6-10": the layers whose flag is set, as ranges.
std::string layer_ranges(const std::vector<bool>& flags) {
  std::string out;
  for (size_t i = 0; i < flags.size();) {
    if (!flags[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < flags.size() && flags[j + 1]) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", i) : fmt::format("{}-{}", i, j);
    i = j + 1;
  }
  return out;
}

// What tokenmill makes of the file (ModelConfig): the variant it would run,
// or why it would refuse it.
void print_model(const gguf::GgufFile& f) {
  model::ModelConfig c;
  try {
    c = model::ModelConfig::from_gguf(f);
  } catch (const Error& e) {
    fmt::print("model:         not runnable by tokenmill: {}\n", e.what());
    return;
  }
  fmt::print("model (as tokenmill runs it):\n");
  fmt::print("  {:<15} {}\n", "architecture", c.arch_name);
  std::string context = fmt::format("{}", c.n_ctx_train);
  if (c.rope_scaling == model::RopeScalingType::kYarn)
    context += fmt::format(" (original, before RoPE scaling: {})", c.rope_orig_ctx);
  fmt::print("  {:<15} {}\n", "context", context);
  fmt::print("  {:<15} {}\n", "rope", model::rope_summary(c));
  const int64_t num_local = static_cast<int64_t>(std::count(c.layer_is_local.begin(), c.layer_is_local.end(), true));
  fmt::print("  {:<15} {}\n", "sliding window",
             num_local == 0 || c.sliding_window <= 0
                 ? std::string("none")
                 : fmt::format("{} positions on layers {} ({} of {})", c.sliding_window, layer_ranges(c.layer_is_local),
                               num_local, c.n_layer));
  const auto cap = [](float v) { return v > 0.0f ? fmt::format("{}", v) : std::string("none"); };
  fmt::print("  {:<15} attention {}, final logits {}\n", "soft-capping", cap(c.attn_softcap), cap(c.final_softcap));
  if (c.is_moe()) {
    fmt::print("  {:<15} {} per layer of width {}, {} per token ({}){}\n", "experts", c.n_expert, c.n_ff_exp,
               c.n_expert_used, c.expert_weights_norm ? "weights renormalised" : "softmax weights as they are",
               c.n_ff_shexp > 0 ? fmt::format(", a gated shared expert of width {}", c.n_ff_shexp) : std::string());
  }
  const gguf::Value* tmpl = f.find("tokenizer.chat_template");
  fmt::print("  {:<15} {}\n", "chat template", tmpl != nullptr ? "yes" : "no");
}

void print_tensor_summary(const gguf::GgufFile& f) {
  struct TypeTotal {
    int count = 0;
    uint64_t bytes = 0;
  };
  std::map<gguf::TensorType, TypeTotal> by_type;
  int64_t num_params = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    TypeTotal& total = by_type[t.type];
    ++total.count;
    total.bytes += t.num_bytes;
    num_params += t.num_elements();
  }
  fmt::print("parameters:    {} ({:.2f} M)\n", num_params, static_cast<double>(num_params) / 1e6);
  fmt::print("tensor types:\n");
  if (by_type.empty()) fmt::print("  (no tensors)\n");
  for (const auto& [type, total] : by_type) {
    fmt::print("  {:<6} {:>5} tensors  {}\n", gguf::tensor_type_name(type), total.count, bytes_string(total.bytes));
  }
}

// "2 \"<bos>\"": the id and, when the vocabulary has it, the token text.
std::string token_with_text(const gguf::GgufFile& f, std::string_view key) {
  const gguf::Value* id = f.find(key);
  if (id == nullptr) return "-";
  std::string out = id->to_display_string();
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  if (id->is_integer() && tokens != nullptr && tokens->is_array() && id->as_float() >= 0 &&
      id->as_float() < static_cast<double>(tokens->as_array().items.size())) {
    out += " " + tokens->as_array().items[static_cast<size_t>(id->as_float())].to_display_string();
  }
  return out;
}

void print_tokenizer(const gguf::GgufFile& f) {
  fmt::print("tokenizer:\n");
  fmt::print("  {:<8} {}\n", "model", shown(f, "tokenizer.ggml.model"));
  fmt::print("  {:<8} {}\n", "pre", shown(f, "tokenizer.ggml.pre"));
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  fmt::print("  {:<8} {}\n", "vocab",
             tokens != nullptr && tokens->is_array() ? fmt::format("{} tokens", tokens->as_array().items.size()) : "-");
  fmt::print("  {:<8} {}\n", "bos", token_with_text(f, "tokenizer.ggml.bos_token_id"));
  fmt::print("  {:<8} {}\n", "eos", token_with_text(f, "tokenizer.ggml.eos_token_id"));
  const gguf::Value* tmpl = f.find("tokenizer.chat_template");
  if (tmpl == nullptr) {
    fmt::print("chat template: none\n");
  } else if (!tmpl->is_string()) {
    fmt::print("chat template: (not a string: {})\n", gguf::value_type_name(tmpl->type));
  } else {
    const std::string& text = tmpl->as_string();
    std::string first_line = text.substr(0, text.find('\n'));
    fmt::print("chat template: {} bytes, first line {}\n", text.size(),
               gguf::Value::str(first_line).to_display_string());
  }
}

void print_tensor_list(const gguf::GgufFile& f) {
  fmt::print("tensors:\n");
  for (const gguf::TensorInfo& t : f.tensors()) {
    fmt::print("  {:<40} {:<5} {:<22} {}\n", t.name, gguf::tensor_type_name(t.type), t.shape_string(), t.num_bytes);
  }
}

void run_inspect(const InspectFlags& flags) {
  const gguf::GgufFile f = gguf::GgufFile::open(flags.path);
  const std::string arch = f.get_string_or("general.architecture", "");
  fmt::print("file:          {}\n", f.name());
  fmt::print("size:          {}\n", bytes_string(f.file_size()));
  fmt::print("gguf version:  {}\n", f.version());
  fmt::print("alignment:     {}\n", f.alignment());
  fmt::print("tensors:       {}\n", f.tensors().size());
  fmt::print("metadata keys: {}\n", f.metadata().size());
  fmt::print("architecture:  {}\n", arch.empty() ? "-" : arch);
  fmt::print("name:          {}\n", f.get_string_or("general.name", "-"));
  if (!arch.empty()) print_shape(f, arch);
  print_model(f);
  print_tensor_summary(f);
  print_tokenizer(f);
  if (flags.metadata) {
    fmt::print("metadata:\n");
    for (const gguf::MetadataEntry& e : f.metadata()) {
      fmt::print("  {} = {}\n", e.key, e.value.to_display_string());
    }
  }
  if (flags.tensors) print_tensor_list(f);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show what a GGUF file holds");
  cmd->add_option("file", flags->path, "GGUF file")->required();
  cmd->add_flag("--metadata", flags->metadata, "Also print every metadata key and value");
  cmd->add_flag("--tensors", flags->tensors, "Also print every tensor: name, type, shape, bytes");
  cmd->callback([flags] { run_inspect(*flags); });
}

}  // namespace tokenmill::cli
