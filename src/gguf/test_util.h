// Helpers for the gguf tests: hand-built byte strings and in-place patches,
// so that each malformed-file test states exactly which bytes are wrong.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "util/error.h"

namespace tokenmill::gguf::testing {

class ByteBuilder {
 public:
  template <typename T>
  ByteBuilder& put(T value) {
    size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
    return *this;
  }
  ByteBuilder& u8(uint8_t v) { return put(v); }
  ByteBuilder& u32(uint32_t v) { return put(v); }
  ByteBuilder& u64(uint64_t v) { return put(v); }
  ByteBuilder& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  // Magic, version and the two counts.
  ByteBuilder& header(uint64_t tensor_count, uint64_t kv_count, uint32_t version = 3) {
    return u32(kMagic).u32(version).u64(tensor_count).u64(kv_count);
  }
  ByteBuilder& zeros(size_t n) {
    bytes_.resize(bytes_.size() + n, 0);
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Index just past the first occurrence of `needle` (a key or tensor name,
// whose encoded fields follow it).
inline size_t find_after(const std::vector<uint8_t>& bytes, std::string_view needle) {
  for (size_t i = 0; i + needle.size() <= bytes.size(); ++i) {
    if (std::memcmp(bytes.data() + i, needle.data(), needle.size()) == 0) return i + needle.size();
  }
  ADD_FAILURE() << "'" << needle << "' not found in the test bytes";
  return 0;
}

template <typename T>
void patch(std::vector<uint8_t>& bytes, size_t at, T value) {
  ASSERT_LE(at + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}

// The Error message parsing `bytes` produces, or "parsed OK".
inline std::string parse_error(std::span<const uint8_t> bytes, const std::string& name = "model.gguf") {
  try {
    GgufFile::parse(bytes, name);
  } catch (const Error& e) {
    return e.what();
  }
  return "parsed OK";
}

}  // namespace tokenmill::gguf::testing
