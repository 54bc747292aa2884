#include "router/error_body.h"

namespace tokenmill::router {

nlohmann::json error_json(const std::string& message, const std::string& type, const std::string& code) {
  return {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}};
}

}  // namespace tokenmill::router
