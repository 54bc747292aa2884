// The boundary error type: thrown for anything the outside world can get wrong
// (a malformed file, a bad flag, a bad request). The message must say what was
// wrong and where, so that a user can fix it without reading the code.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tokenmill {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Formats with fmt and throws Error.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tokenmill
