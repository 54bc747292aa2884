#include "quant/checkpoint_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace tokenmill::quant {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

std::string config_lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The first of `keys` present in j (AutoAWQ's own file names them w_bit and
// q_group_size), or nullptr.
const Json* config_field(const Json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (j.contains(k) && !j[k].is_null()) return &j[k];
  }
  return nullptr;
}

int64_t config_int(const Json& j, std::initializer_list<const char*> keys, int64_t fallback,
                   const std::string& source) {
  const Json* v = config_field(j, keys);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) fail("{}: \"{}\" is not an integer ({})", source, *keys.begin(), v->dump());
  return v->get<int64_t>();
}

bool config_bool(const Json& j, const char* key, bool fallback, const std::string& source) {
  const Json* v = config_field(j, {key});
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail("{}: \"{}\" is not true or false ({})", source, key, v->dump());
  return v->get<bool>();
}

std::string config_string(const Json& j, std::initializer_list<const char*> keys, const std::string& fallback,
                          const std::string& source) {
  const Json* v = config_field(j, keys);
  if (v == nullptr) return fallback;
  if (!v->is_string()) fail("{}: \"{}\" is not a string ({})", source, *keys.begin(), v->dump());
  return config_lower(v->get<std::string>());
}

void read_checkpoint_format(const Json& j, CheckpointConfig& c) {
  if (c.method == CheckpointMethod::kAwq) {
    c.format = config_string(j, {"version"}, "gemm", c.source);
    if (c.format != "gemm") {
      fail("{}: AWQ version '{}' is not supported (only the GEMM layout, version \"gemm\")", c.source, c.format);
    }
    if (!config_bool(j, "zero_point", true, c.source)) {
      fail("{}: AWQ without zero points (zero_point: false) is not supported", c.source);
    }
    return;
  }
  c.format = config_string(j, {"checkpoint_format", "format"}, "gptq", c.source);
  if (c.format == "gptq") {
    c.zero_stored_minus_one = true;
  } else if (c.format != "gptq_v2") {
    fail("{}: unknown checkpoint format '{}' (supported: gptq, gptq_v2)", c.source, c.format);
  }
}

Json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read {}", path.string());
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail("{}: not a valid JSON object", path.string());
  return j;
}

}  // namespace

std::string_view checkpoint_method_name(CheckpointMethod method) {
  return method == CheckpointMethod::kAwq ? "awq" : "gptq";
}

CheckpointConfig parse_checkpoint_config(const Json& j, CheckpointMethod expected, const std::string& source) {
  if (!j.is_object()) fail("{}: the quantization settings are not a JSON object", source);
  CheckpointConfig c;
  c.source = source;
  c.method = expected;
  const std::string method = config_string(j, {"quant_method"}, std::string(checkpoint_method_name(expected)), source);
  if (method != "gptq" && method != "awq") {
    fail("{}: unknown quantization method '{}' (supported: gptq, awq)", source, method);
  }
  if (method != checkpoint_method_name(expected)) {
    fail("{}: the checkpoint is quant_method '{}', not '{}' (use --from {})", source, method,
         checkpoint_method_name(expected), method);
  }
  const int64_t bits = config_int(j, {"bits", "w_bit"}, 4, source);
  if (bits != 4) fail("{}: bits = {}: only 4-bit checkpoints can be imported", source, bits);
  c.bits = 4;
  c.group_size = config_int(j, {"group_size", "q_group_size"}, 128, source);
  if (c.group_size != -1 && c.group_size <= 0) {
    fail("{}: unsupported group size {} (a positive number of input columns, or -1 for whole rows)", source,
         c.group_size);
  }
  c.desc_act = config_bool(j, "desc_act", false, source);
  c.sym = config_bool(j, "sym", true, source);
  read_checkpoint_format(j, c);
  return c;
}

CheckpointConfig read_checkpoint_config(const std::string& dir, CheckpointMethod expected) {
  const fs::path base(dir);
  for (const char* name : {"quantize_config.json", "quant_config.json"}) {
    if (fs::exists(base / name))
      return parse_checkpoint_config(read_json_file(base / name), expected, (base / name).string());
  }
  const fs::path config = base / "config.json";
  if (fs::exists(config)) {
    const Json j = read_json_file(config);
    if (j.contains("quantization_config")) {
      return parse_checkpoint_config(j["quantization_config"], expected, config.string() + " quantization_config");
    }
  }
  fail(
      "{}: no quantization settings found (no quantize_config.json, quant_config.json, nor a "
      "\"quantization_config\" in config.json)",
      dir);
}

}  // namespace tokenmill::quant
