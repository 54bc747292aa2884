// OpenAI-style API errors: what every failed request answers with,
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// and the HTTP status that goes with it. Handlers throw ApiError; the
// server's dispatch turns it into the response (http_server.cc).
#pragma once

#include <fmt/format.h>

#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace tokenmill::server {

class ApiError : public std::runtime_error {
 public:
  // status: the HTTP status (4xx/5xx). type: OpenAI's error type
  // ("invalid_request_error", ...). param: the request field at fault, if
  // one is. code: a short machine-readable code, if any.
  ApiError(int status, std::string message, std::string type, std::optional<std::string> param = std::nullopt,
           std::optional<std::string> code = std::nullopt);

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::optional<std::string>& param() const { return param_; }
  const std::optional<std::string>& code() const { return code_; }
  // Seconds for a Retry-After header (429/503); 0 = none.
  int retry_after_s() const { return retry_after_s_; }
  ApiError& with_retry_after(int seconds) {
    retry_after_s_ = seconds;
    return *this;
  }

  // {"error": {...}}; param and code are null when absent.
  nlohmann::json to_json() const;

 private:
  int status_;
  std::string type_;
  std::optional<std::string> param_;
  std::optional<std::string> code_;
  int retry_after_s_ = 0;
};

// 400 invalid_request_error naming `param` (may be empty: no param).
template <typename... Args>
[[noreturn]] void bad_request(const std::string& param, fmt::format_string<Args...> format, Args&&... args) {
  std::optional<std::string> p;
  if (!param.empty()) p = param;
  throw ApiError(400, fmt::format(format, std::forward<Args>(args)...), "invalid_request_error", p);
}

// The error body for a status that no handler produced (404 route, 413
// body too large, the front's own 400s): a generic message per status.
ApiError error_for_status(int status);

}  // namespace tokenmill::server
