#include "http/sse.h"

#include "http/json_body.h"

namespace tokenmill::http {

std::string sse_event(const nlohmann::json& payload) {
  // Compact dumps escape control characters inside strings, so the payload
  // is one line and cannot end the event early.
  std::string out = "data: ";
  out += dump_json(payload);
  out += "\n\n";
  return out;
}

}  // namespace tokenmill::http
