// libFuzzer target for the grammar front ends, which read client input: the
// first byte picks the JSON Schema converter, the regex converter (plain, or
// in the JSON-string search mode that `pattern` uses) or the GBNF parser;
// the rest is the input. Any input must convert or throw tokenmill::Error,
// within small limits so that every run is quick. GBNF that a converter
// produced must parse: a failure other than a size or time limit is a bug
// in the converter, and aborts.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "util/error.h"

namespace {

using tokenmill::grammar::Deadline;
using tokenmill::grammar::GrammarLimits;

GrammarLimits small_limits() {
  GrammarLimits limits;
  limits.max_source_bytes = 4096;
  limits.max_gbnf_bytes = 1 << 16;
  limits.max_rules = 2000;
  limits.max_symbols = 40000;
  limits.max_schema_depth = 12;
  limits.max_repetition = 64;
  limits.max_compile_time = std::chrono::milliseconds(1000);
  return limits;
}

// The converters' output meets the parser with the parser's own (default)
// limits; only exceeding one of those may fail.
void check_generated(const std::string& gbnf) {
  const GrammarLimits limits;
  try {
    (void)tokenmill::grammar::parse_gbnf(gbnf, limits, Deadline(limits.max_compile_time));
  } catch (const tokenmill::Error& e) {
    const std::string message = e.what();
    if (message.find("more than") == std::string::npos && message.find("longer than") == std::string::npos) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 4;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const GrammarLimits limits = small_limits();
  const Deadline deadline(limits.max_compile_time);
  try {
    switch (mode) {
      case 0: {
        const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (schema.is_discarded()) return 0;
        check_generated(tokenmill::grammar::json_schema_to_gbnf(schema, limits, deadline));
        break;
      }
      case 1: check_generated(tokenmill::grammar::regex_to_gbnf(text, limits, deadline)); break;
      case 2: {
        tokenmill::grammar::RegexOptions pattern;
        pattern.json_string = true;
        pattern.search = true;
        check_generated(tokenmill::grammar::regex_rules(text, "root", limits, deadline, pattern));
        break;
      }
      default: (void)tokenmill::grammar::parse_gbnf(text, limits, deadline); break;
    }
  } catch (const tokenmill::Error&) {
  }
  return 0;
}
