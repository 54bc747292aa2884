// Test helpers shared by the model tests: synthetic GGUF files built in
// memory, read back, and rewritten with one key or tensor changed, and the
// message that loading a bad one throws. Header-only; tests only.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/weights.h"
#include "util/error.h"

namespace tokenmill::model::test_files {

// The raw bytes of an F32 tensor's data.
inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// File bytes and the parsed file, which views into the bytes.
struct ParsedGguf {
  std::vector<uint8_t> bytes;
  std::optional<gguf::GgufFile> file;
};

inline std::unique_ptr<ParsedGguf> parse_gguf(std::vector<uint8_t> bytes, const std::string& name) {
  auto p = std::make_unique<ParsedGguf>();
  p->bytes = std::move(bytes);
  p->file.emplace(gguf::GgufFile::parse(p->bytes, name));
  return p;
}

// What to change in a synthetic file.
struct Edit {
  std::string drop;                                      // a key or tensor left out
  std::vector<std::pair<std::string, gguf::Value>> set;  // keys added or replaced
  std::string extra;                                     // an F32 tensor of 64 zeros added
};

inline Edit dropping(const std::string& name) { return Edit{name, {}, ""}; }
inline Edit adding(const std::string& tensor) { return Edit{"", {}, tensor}; }
inline Edit setting(const std::string& key, gguf::Value value) { return Edit{"", {{key, std::move(value)}}, ""}; }

// The tiny synthetic model of `arch` (format `type`, shape overrides `o`)
// with `edit` applied.
inline std::unique_ptr<ParsedGguf> variant(SynthArch arch, const Edit& edit = {}, const std::string& type = "F32",
                                           const ShapeOverrides& o = {}) {
  SynthOptions opts;
  opts.arch = arch;
  opts.overrides = o;
  opts.format = *parse_weight_format(type);
  opts.num_threads = 1;
  const std::vector<uint8_t> original = build_synth_model(opts, nullptr).to_bytes();
  const gguf::GgufFile f = gguf::GgufFile::parse(original, "original");
  gguf::GgufWriter w;
  for (const gguf::MetadataEntry& e : f.metadata())
    if (e.key != edit.drop) w.set(e.key, e.value);
  for (const auto& [key, value] : edit.set) w.set(key, value);
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name == edit.drop) continue;
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims, t.dims + t.num_dims),
                 std::vector<uint8_t>(t.data, t.data + t.num_bytes));
  }
  if (!edit.extra.empty())
    w.add_tensor(edit.extra, gguf::TensorType::F32, {64}, std::vector<uint8_t>(64 * sizeof(float)));
  return parse_gguf(w.to_bytes(), std::string(synth_arch_name(arch)) + ".gguf");
}

// The message of the Error that reading the config of `w` throws, or "(no error)".
inline std::string config_error(const gguf::GgufWriter& w) {
  const std::vector<uint8_t> bytes = w.to_bytes();
  try {
    ModelConfig::from_gguf(gguf::GgufFile::parse(bytes, "m.gguf"));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The message of the Error that loading config and weights throws, or "(no error)".
inline std::string load_error(const gguf::GgufFile& f) {
  try {
    ModelWeights::bind(f, ModelConfig::from_gguf(f));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A tiny synthetic F32 model of `arch` written to a temporary file (named
// after `tag`, the architecture and the process) and loaded; the file is
// removed with the object.
class TinyModelFile {
 public:
  TinyModelFile(SynthArch arch, uint64_t seed, const std::string& tag) {
    SynthOptions o;
    o.arch = arch;
    o.preset = "tiny";
    o.format = *parse_weight_format("F32");
    o.seed = seed;
    o.num_threads = 2;
    path_ = std::filesystem::temp_directory_path() /
            (tag + "_" + std::string(synth_arch_name(arch)) + "_" + std::to_string(getpid()) + ".gguf");
    write_synth_model(o, path_.string());
    model_ = Model::load(path_.string());
  }
  ~TinyModelFile() {
    model_.reset();
    std::filesystem::remove(path_);
  }
  TinyModelFile(const TinyModelFile&) = delete;
  TinyModelFile& operator=(const TinyModelFile&) = delete;
  Model& model() { return *model_; }

 private:
  std::filesystem::path path_;
  std::unique_ptr<Model> model_;
};

// n token ids drawn uniformly from [0, vocab) by a generator seeded with `seed`.
inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = dist(rng);
  return t;
}

}  // namespace tokenmill::model::test_files
