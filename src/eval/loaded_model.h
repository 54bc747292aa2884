// A model loaded for measurement: the file, its weight runtime (W8A8 / FP8
// hook, chosen at load time) and its KV type, with the memory figures the
// card reports. Plus the small input/output helpers the eval commands share.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eval/evaluator.h"
#include "kv/kv_dtype.h"
#include "model/model.h"
#include "quant/weight_runtime.h"

namespace tokenmill::eval {

struct LoadOptions {
  std::string model_path;
  std::string kv_dtype = "f32";  // exact by default: these commands measure
  std::string runtime = "auto";  // auto|dense|w8a8|fp8_e4m3
  int threads = 0;
  std::string lora_path;  // a LoRA adapter to apply; empty: none
  float lora_scale = 1.0f;
  // --kv-policy/--kv-sinks/--kv-window/--kv-positions (kv/kv_policy.h)
  std::string kv_policy = "full";
  int64_t kv_sinks = 4;
  int64_t kv_window = 1024;
  int64_t kv_budget = 2048;
  std::string kv_positions = "preserve";
};

struct LoadedModel {
  std::string path;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<quant::WeightRuntimeHook> hook;  // null: dense
  kv::KvDtype kv_dtype = kv::KvDtype::F32;
  std::shared_ptr<const model::LoraAdapter> adapter;  // null: none
  kv::KvPolicy kv_policy;

  ModelUnderTest under_test() const { return {model.get(), hook.get(), kv_dtype, adapter.get(), kv_policy}; }
  std::string runtime_name() const;
  // Bytes of weights as the kernels read them: the file's tensors, with the
  // matrices a runtime repacked counted in their packed size.
  int64_t weight_bytes() const;
  int64_t kv_bytes_per_token() const;
  nlohmann::json info() const;  // path, file bytes, weight bytes, runtime, kv dtype, kv bytes/token
};

// Loads and prints one start-up line to stderr (role: "model", "base"):
// weights in MB, runtime, KV type and bytes per token. Throws Error for a
// bad file, KV type or runtime.
LoadedModel load_model(const LoadOptions& options, const char* role = "model");

// The model's tokenizer applied to text, BOS first (as the model asks).
std::vector<int32_t> tokenize_text(const model::Model& model, const std::string& text);
// One sequence per non-empty line: token ids separated by commas and/or
// spaces; each sequence's first id acts as its BOS.
Sequences parse_token_file(const std::string& path);
// Writes JSON (pretty) to path; throws Error when it cannot.
void write_json_file(const std::string& path, const nlohmann::json& j);

}  // namespace tokenmill::eval
