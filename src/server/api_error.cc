#include "server/api_error.h"

namespace tokenmill::server {

ApiError::ApiError(int status, std::string message, std::string type, std::optional<std::string> param,
                   std::optional<std::string> code)
    : std::runtime_error(std::move(message)),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (param_) e["param"] = *param_;
  if (code_) e["code"] = *code_;
  return {{"error", e}};
}

ApiError error_for_status(int status) {
  switch (status) {
    case 400: return ApiError(400, "the HTTP request is malformed", "invalid_request_error");
    case 404:
      return ApiError(404, "no such endpoint; see docs/api.md for the list", "invalid_request_error", std::nullopt,
                      "not_found");
    case 405: return ApiError(405, "method not allowed on this endpoint", "invalid_request_error");
    case 413:
      return ApiError(413, "the request body is larger than the server's limit (--max-body-bytes)",
                      "invalid_request_error", std::nullopt, "request_too_large");
    case 408:
      return ApiError(408, "the request did not arrive in time", "invalid_request_error", std::nullopt,
                      "request_timeout");
    case 414: return ApiError(414, "the request URI is too long", "invalid_request_error");
    case 431:
      return ApiError(431, "the request head is larger than the server's limit", "invalid_request_error", std::nullopt,
                      "headers_too_large");
    case 501: return ApiError(501, "not implemented", "invalid_request_error", std::nullopt, "not_implemented");
    case 503:
      return ApiError(503, "the server is overloaded", "service_unavailable", std::nullopt, "too_many_connections");
    case 505:
      return ApiError(505, "only HTTP/1.0 and HTTP/1.1 are supported", "invalid_request_error", std::nullopt,
                      "http_version_not_supported");
    default:
      if (status >= 500) return ApiError(status, "internal server error", "server_error");
      return ApiError(status, fmt::format("HTTP error {}", status), "invalid_request_error");
  }
}

}  // namespace tokenmill::server
