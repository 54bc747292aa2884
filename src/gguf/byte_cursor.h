// Bounds-checked little-endian reads over a byte span, for the GGUF parser.
// Every read checks the remaining length first and throws tokenmill::Error
// ("<file>: ...") instead of reading past the end, so malformed input can
// never cause an out-of-bounds access. Internal to gguf/.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "util/error.h"

namespace tokenmill::gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF reader maps little-endian files in place");

class ByteCursor {
 public:
  // `name` (the file) must outlive the cursor.
  ByteCursor(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return bytes_.size(); }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  const std::string& name() const { return name_; }

  // What is being read, for error messages: "metadata key 'x'". Set once per
  // item rather than per read so that hot loops build no strings.
  void set_context(std::string context) { context_ = std::move(context); }
  const std::string& context() const { return context_; }

  // Reads a trivially copyable little-endian value; `what` names it.
  template <typename T>
  T read(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    require(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  // A GGUF string: uint64 length, then that many bytes (not terminated).
  std::string read_string(const char* what) {
    uint64_t length = read<uint64_t>(what);
    if (length > remaining()) {
      fail("{}: {} of {} bytes at offset {}{} extends past end of file ({} bytes)", name_, what, length,
           pos_ - sizeof(uint64_t), context_suffix(), size());
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return s;
  }

  void require(uint64_t n, const char* what) const {
    if (n > remaining()) {
      fail("{}: unexpected end of file reading {} at offset {}{} (file is {} bytes)", name_, what, pos_,
           context_suffix(), size());
    }
  }

 private:
  std::string context_suffix() const { return context_.empty() ? "" : " in " + context_; }

  std::span<const uint8_t> bytes_;
  const std::string& name_;
  std::string context_;
  uint64_t pos_ = 0;
};

}  // namespace tokenmill::gguf
