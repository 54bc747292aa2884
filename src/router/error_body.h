// The OpenAI error shape for the router's own answers, the same as the
// replicas' (server/api_error.h), so that clients raise one kind of error:
//   {"error": {"message": ..., "type": ..., "param": null, "code": ...}}
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tokenmill::router {

// type: "server_error", "invalid_request_error", ...; code: short and
// machine-readable ("no_replica", "replica_failed", ...).
nlohmann::json error_json(const std::string& message, const std::string& type, const std::string& code);

}  // namespace tokenmill::router
