#include "quant/imatrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "util/error.h"

namespace tokenmill::quant {
namespace {

constexpr std::string_view kSum2 = ".in_sum2";
constexpr std::string_view kCounts = ".counts";
constexpr std::string_view kMax = ".in_max";

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<float> read_f32(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  if (t.type != gguf::TensorType::F32) {
    fail("{}: imatrix tensor '{}' has type {}, expected F32", file.name(), t.name, gguf::tensor_type_name(t.type));
  }
  std::vector<float> v(static_cast<size_t>(t.num_elements()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

}  // namespace

void Imatrix::add(const std::string& name, const float* x, int64_t num_tokens, int64_t cols) {
  ChannelStats& s = entries_[name];
  if (s.sum_sq.empty()) {
    s.sum_sq.assign(static_cast<size_t>(cols), 0.0);
    s.abs_max.assign(static_cast<size_t>(cols), 0.0f);
  } else if (static_cast<int64_t>(s.sum_sq.size()) != cols) {
    fail("imatrix: '{}' seen with {} and {} columns", name, s.sum_sq.size(), cols);
  }
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* row = x + t * cols;
    for (int64_t c = 0; c < cols; ++c) {
      s.sum_sq[static_cast<size_t>(c)] += double(row[c]) * row[c];
      s.abs_max[static_cast<size_t>(c)] = std::max(s.abs_max[static_cast<size_t>(c)], std::fabs(row[c]));
    }
  }
  s.count += num_tokens;
}

const ChannelStats* Imatrix::find(std::string_view name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<float> Imatrix::importance(std::string_view name) const {
  const ChannelStats* s = find(name);
  if (s == nullptr || s->count <= 0) return {};
  std::vector<float> out(s->sum_sq.size());
  for (size_t c = 0; c < out.size(); ++c) out[c] = static_cast<float>(s->sum_sq[c] / double(s->count));
  return out;
}

void Imatrix::save(const std::string& path) const {
  gguf::GgufWriter w;
  w.set("general.type", gguf::Value::str("imatrix"));
  w.set("imatrix.chunk_count", gguf::Value::u32(static_cast<uint32_t>(chunk_count)));
  w.set("imatrix.chunk_size", gguf::Value::u32(static_cast<uint32_t>(chunk_size)));
  std::vector<gguf::Value> names;
  for (const std::string& d : datasets) names.push_back(gguf::Value::str(d));
  w.set("imatrix.datasets", gguf::Value::array(gguf::ValueType::STRING, std::move(names)));
  for (const auto& [name, s] : entries_) {
    const int64_t cols = static_cast<int64_t>(s.sum_sq.size());
    std::vector<float> sum(s.sum_sq.begin(), s.sum_sq.end());
    w.add_tensor(name + std::string(kSum2), gguf::TensorType::F32, {cols, 1}, f32_bytes(sum));
    w.add_tensor(name + std::string(kCounts), gguf::TensorType::F32, {1, 1}, f32_bytes({static_cast<float>(s.count)}));
    if (!s.abs_max.empty())
      w.add_tensor(name + std::string(kMax), gguf::TensorType::F32, {cols, 1}, f32_bytes(s.abs_max));
  }
  w.write(path);
}

Imatrix Imatrix::load(const std::string& path) {
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  if (file.get_string_or("general.type", "") != "imatrix") {
    fail("{}: not an imatrix file (general.type is not \"imatrix\"); create one with `tokenmill calibrate`", path);
  }
  Imatrix m;
  m.chunk_count = file.get_int_or("imatrix.chunk_count", 0);
  m.chunk_size = file.get_int_or("imatrix.chunk_size", 0);
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (!t.name.ends_with(kSum2)) continue;
    const std::string name = t.name.substr(0, t.name.size() - kSum2.size());
    const gguf::TensorInfo* counts = file.find_tensor(name + std::string(kCounts));
    if (counts == nullptr) fail("{}: '{}' has no matching '{}{}'", path, t.name, name, kCounts);
    ChannelStats s;
    const std::vector<float> sum = read_f32(file, t);
    s.sum_sq.assign(sum.begin(), sum.end());
    const std::vector<float> c = read_f32(file, *counts);
    if (c.empty() || !(c[0] >= 0.0f)) fail("{}: '{}' has a bad count", path, counts->name);
    s.count = static_cast<int64_t>(c[0]);
    if (const gguf::TensorInfo* mx = file.find_tensor(name + std::string(kMax))) {
      s.abs_max = read_f32(file, *mx);
      if (s.abs_max.size() != s.sum_sq.size()) fail("{}: '{}' and '{}' differ in size", path, t.name, mx->name);
    }
    m.entries_.emplace(name, std::move(s));
  }
  if (m.entries_.empty()) fail("{}: the imatrix holds no '*{}' tensors", path, kSum2);
  return m;
}

}  // namespace tokenmill::quant
