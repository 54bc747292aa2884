// Settings read from the environment.
#pragma once

namespace tokenmill {

// A 0/1 switch: unset or empty gives default_value, "0" false, "1" true.
// Throws tokenmill::Error naming the variable for any other value.
bool env_flag(const char* name, bool default_value);

}  // namespace tokenmill
