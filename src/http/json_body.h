// JSON text for response bodies and stream events: compact, and never
// failing on a string that is not valid UTF-8 (such bytes become U+FFFD), so
// a token piece cut inside a character cannot throw in the middle of an
// answer.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tokenmill::http {

std::string dump_json(const nlohmann::json& j);

}  // namespace tokenmill::http
