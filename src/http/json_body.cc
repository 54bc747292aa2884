#include "http/json_body.h"

namespace tokenmill::http {

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tokenmill::http
