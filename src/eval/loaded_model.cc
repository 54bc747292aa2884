#include "eval/loaded_model.h"

#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tokenmill::eval {

std::string LoadedModel::runtime_name() const {
  return hook ? std::string(quant::runtime_name(hook->runtime())) : "dense";
}

int64_t LoadedModel::weight_bytes() const {
  int64_t total = 0;
  for (const gguf::TensorInfo& t : model->file().tensors()) total += static_cast<int64_t>(t.num_bytes);
  if (hook == nullptr) return total;
  // Swap the file bytes of the matrices the runtime holds for its own: the
  // hook's weight_bytes() covers every matrix the forward multiplies by.
  int64_t matmul_file_bytes = 0;
  std::vector<const void*> seen;
  const model::ModelWeights& w = model->weights();
  auto add = [&](const kernels::WeightView& v) {
    for (const void* p : seen) {
      if (p == v.data) return;
    }
    seen.push_back(v.data);
    matmul_file_bytes += gguf::row_bytes(v.type, v.cols) * v.rows;
  };
  add(w.output);
  for (const model::LayerWeights& l : w.layers) {
    for (const kernels::WeightView& v : {l.wq, l.wk, l.wv, l.wo, l.w_gate, l.w_up, l.w_down}) add(v);
  }
  return total - matmul_file_bytes + hook->weight_bytes();
}

int64_t LoadedModel::kv_bytes_per_token() const { return model->kv_geometry(16, kv_dtype).bytes_per_token(); }

nlohmann::json LoadedModel::info() const {
  return {{"path", path},
          {"file_bytes", model->file().file_size()},
          {"weight_bytes", weight_bytes()},
          {"runtime", runtime_name()},
          {"kv_dtype", std::string(kv::kv_dtype_name(kv_dtype))},
          {"kv_bytes_per_token", kv_bytes_per_token()},
          {"kv_policy", kv_policy.describe()},
          {"lora", adapter ? nlohmann::json{{"path", adapter->path()},
                                            {"scale", adapter->user_scale()},
                                            {"identity", adapter->identity()}}
                           : nlohmann::json(nullptr)}};
}

LoadedModel load_model(const LoadOptions& o, const char* role) {
  LoadedModel m;
  m.path = o.model_path;
  const std::optional<kv::KvDtype> dtype = kv::kv_dtype_from_name(o.kv_dtype);
  if (!dtype) fail("--kv-dtype '{}' is not one of: {}", o.kv_dtype, kv::kv_dtype_choices());
  m.kv_dtype = *dtype;
  m.kv_policy = kv::make_kv_policy(o.kv_policy, o.kv_sinks, o.kv_window, o.kv_positions, o.kv_budget);
  m.model = model::Model::load(o.model_path);
  m.hook = quant::make_weight_runtime(*m.model, o.runtime);
  if (!o.lora_path.empty()) m.adapter = model::LoraAdapter::load(o.lora_path, *m.model, o.lora_path, o.lora_scale);
  std::fprintf(stderr, "%s: %s, weights %.2f MB (runtime %s), KV %s %lld bytes/token\n", role, o.model_path.c_str(),
               m.weight_bytes() / 1e6, m.runtime_name().c_str(), std::string(kv::kv_dtype_name(m.kv_dtype)).c_str(),
               static_cast<long long>(m.kv_bytes_per_token()));
  if (m.kv_policy.evicts())
    std::fprintf(stderr, "%s: KV policy %s (each --batch is one step)\n", role, m.kv_policy.describe().c_str());
  if (m.adapter)
    std::fprintf(stderr, "%s: LoRA %s (scale %g, %lld matrices, rank <= %lld)\n", role, o.lora_path.c_str(),
                 static_cast<double>(o.lora_scale), static_cast<long long>(m.adapter->num_adapted()),
                 static_cast<long long>(m.adapter->max_rank()));
  return m;
}

std::vector<int32_t> tokenize_text(const model::Model& model, const std::string& text) {
  if (!tokenizer::Tokenizer::present_in(model.file())) {
    fail("{}: the model has no tokenizer; give token ids with --tokens", model.file().name());
  }
  return tokenizer::Tokenizer::from_gguf(model.file()).encode(text, true, false);
}

Sequences parse_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read '{}'", path);
  Sequences out;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    for (char& c : line) {
      if (c == ',' || c == '\r' || c == '\t') c = ' ';
    }
    std::vector<int32_t> ids;
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      int32_t v = -1;
      const auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
      if (ec != std::errc() || ptr != w.data() + w.size() || v < 0) fail("{}:{}: bad token id '{}'", path, line_no, w);
      ids.push_back(v);
    }
    if (!ids.empty()) out.push_back(std::move(ids));
  }
  if (out.empty()) fail("{}: no token ids", path);
  return out;
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  if (!out) fail("cannot write '{}'", path);
  out << j.dump(2) << "\n";
  if (!out) fail("failed writing '{}'", path);
}

}  // namespace tokenmill::eval
