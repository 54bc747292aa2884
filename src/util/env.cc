#include "util/env.h"

#include <cstdlib>
#include <string_view>

#include "util/error.h"

namespace tokenmill {

bool env_flag(const char* name, bool default_value) {
  const char* env = std::getenv(name);
  const std::string_view v = env == nullptr ? "" : env;
  if (v.empty()) return default_value;
  if (v == "0") return false;
  if (v == "1") return true;
  fail("{} must be 0 or 1 (got '{}')", name, v);
}

}  // namespace tokenmill
