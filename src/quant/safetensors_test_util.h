// Test helper: safetensors bytes built from named tensors, written the way
// the format's writers do (header JSON, then the tensors back to back), so
// that the reader and importer tests state their inputs exactly.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tokenmill::quant::testing {

class SafetensorsBuilder {
 public:
  // Appends a tensor of raw bytes (their count must match dtype and shape
  // for the result to be valid; tests of refusals break that on purpose).
  SafetensorsBuilder& add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                          const void* data, size_t bytes) {
    const size_t begin = data_.size();
    data_.resize(begin + bytes);
    if (bytes > 0) std::memcpy(data_.data() + begin, data, bytes);
    header_[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, begin + bytes}}};
    return *this;
  }
  template <typename T>
  SafetensorsBuilder& add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                          const std::vector<T>& values) {
    return add(name, dtype, std::move(shape), values.data(), values.size() * sizeof(T));
  }
  nlohmann::json& header() { return header_; }

  std::vector<uint8_t> bytes() const { return bytes_with_header(header_.dump()); }
  std::vector<uint8_t> bytes_with_header(const std::string& json) const {
    // Sized once and filled with memcpy: vector::insert here trips a GCC 12
    // -Warray-bounds false positive.
    std::vector<uint8_t> out(8 + json.size() + data_.size());
    const uint64_t n = json.size();
    std::memcpy(out.data(), &n, 8);
    if (!json.empty()) std::memcpy(out.data() + 8, json.data(), json.size());
    if (!data_.empty()) std::memcpy(out.data() + 8 + json.size(), data_.data(), data_.size());
    return out;
  }

 private:
  nlohmann::json header_ = nlohmann::json::object();
  std::vector<uint8_t> data_;
};

}  // namespace tokenmill::quant::testing
