// `tokenmill grammar -m MODEL --json-schema FILE | --regex R | --gbnf FILE |
// --json-object`: compiles a constraint against the model's vocabulary and
// reports what constrained decoding would do, without running the model:
//   --print-gbnf   the GBNF the constraint becomes, then exit;
//   --walks N      N random walks through the grammar; each step prints one
//                  JSON line {"walk", "prefix" (token ids), "allowed_hex"
//                  (the token mask, 32-bit words as hex, word 0 first),
//                  "can_end", "mask_us"}, for cross-checks against another
//                  implementation;
//   --quiet        no per-step lines, only the summary;
//   the last line is a JSON summary: compile times (ms, over --compiles
//   uncached compilations), mask times per step (p50/p99, first visits of a
//   context and cached ones together) and mask-cache counters.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "gguf/reader.h"
#include "grammar/context_mask.h"
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct GrammarFlags {
  std::string model;
  std::string json_schema_file, regex, gbnf_file;
  bool json_object = false;
  bool print_gbnf = false;
  bool quiet = false;
  int walks = 0;
  int steps = 64;
  int compiles = 1;
  uint64_t seed = 1;
};

grammar::ConstraintSpec spec_of(const GrammarFlags& f) {
  const int given = !f.json_schema_file.empty() + !f.regex.empty() + !f.gbnf_file.empty() + f.json_object;
  if (given != 1) fail("give exactly one of --json-schema, --regex, --gbnf, --json-object");
  if (!f.json_schema_file.empty()) return {grammar::ConstraintKind::kJsonSchema, read_text_file(f.json_schema_file)};
  if (!f.regex.empty()) return {grammar::ConstraintKind::kRegex, f.regex};
  if (!f.gbnf_file.empty()) return {grammar::ConstraintKind::kGbnf, read_text_file(f.gbnf_file)};
  return {grammar::ConstraintKind::kJsonObject, ""};
}

std::string hex_mask(const std::vector<uint32_t>& bits) {
  std::string out;
  char buf[9];
  for (uint32_t w : bits) {
    std::snprintf(buf, sizeof buf, "%08x", w);
    out += buf;
  }
  return out;
}

// Half the time a short token (one or two bytes), so that walks close
// strings and reach the grammar's structure instead of rambling.
int32_t pick(const std::vector<int32_t>& allowed, const grammar::TokenVocab& vocab, std::mt19937_64& rng) {
  std::vector<int32_t> shorter;
  for (int32_t id : allowed) {
    if (!vocab.bytes(id).empty() && vocab.bytes(id).size() <= 2) shorter.push_back(id);
  }
  const std::vector<int32_t>& from = !shorter.empty() && rng() % 2 == 0 ? shorter : allowed;
  return from[rng() % from.size()];
}

void run_grammar(const GrammarFlags& f) {
  const gguf::GgufFile file = gguf::GgufFile::open(f.model);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  grammar::GrammarCompiler compiler(tok, grammar::GrammarLimits{});
  const grammar::ConstraintSpec spec = spec_of(f);
  if (f.print_gbnf) {
    std::printf("%s\n", compiler.to_gbnf(spec).c_str());
    return;
  }
  std::vector<double> compile_ms;
  std::shared_ptr<const grammar::CompiledGrammar> cg;
  for (int i = 0; i < std::max(1, f.compiles); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    cg = compiler.compile_uncached(spec);
    compile_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const grammar::TokenVocab& vocab = cg->vocab();
  std::mt19937_64 rng(f.seed);
  std::vector<double> mask_us;
  std::vector<uint32_t> bits(vocab.mask_words());
  for (int w = 0; w < f.walks; ++w) {
    grammar::GrammarMatcher m(cg);
    std::vector<int32_t> prefix;
    for (int step = 0; step < f.steps; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      m.fill_mask(bits);
      mask_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab.size(); ++id) {
        if (grammar::test_bit(bits, id) && !vocab.bytes(id).empty()) allowed.push_back(id);
      }
      if (!f.quiet) {
        const nlohmann::json line = {{"walk", w},
                                     {"prefix", prefix},
                                     {"allowed_hex", hex_mask(bits)},
                                     {"can_end", m.can_end()},
                                     {"mask_us", mask_us.back()}};
        std::printf("%s\n", line.dump().c_str());
      }
      if (allowed.empty()) break;
      const int32_t id = pick(allowed, vocab, rng);
      if (!m.accept_token(id)) fail("internal error: the matcher refused token {} it allowed", id);
      prefix.push_back(id);
    }
  }
  const auto cache = cg->cache_stats();
  const nlohmann::json summary = {{"compile_ms_p50", bench::percentile(compile_ms, 0.5)},
                                  {"compile_ms_p99", bench::percentile(compile_ms, 0.99)},
                                  {"mask_steps", mask_us.size()},
                                  {"mask_us_p50", bench::percentile(mask_us, 0.5)},
                                  {"mask_us_p99", bench::percentile(mask_us, 0.99)},
                                  {"mask_us_max", bench::percentile(mask_us, 1.0)},
                                  {"context_cache_hits", cache.hits},
                                  {"context_cache_misses", cache.misses},
                                  {"rules", cg->grammar().num_rules()},
                                  {"symbols", cg->grammar().symbols.size()}};
  std::printf("%s\n", summary.dump().c_str());
}

}  // namespace

void add_grammar_command(CLI::App& app) {
  auto flags = std::make_shared<GrammarFlags>();
  CLI::App* cmd = app.add_subcommand("grammar", "Compile a structured-output constraint and walk its token masks");
  cmd->add_option("-m,--model", flags->model, "GGUF file whose tokenizer to use")->required();
  cmd->add_option("--json-schema", flags->json_schema_file, "A JSON Schema file");
  cmd->add_option("--regex", flags->regex, "A regular expression the whole output must match");
  cmd->add_option("--gbnf", flags->gbnf_file, "A GBNF grammar file (start rule: root)");
  cmd->add_flag("--json-object", flags->json_object, "Any JSON object");
  cmd->add_flag("--print-gbnf", flags->print_gbnf, "Print the GBNF the constraint becomes and exit");
  cmd->add_option("--walks", flags->walks, "Random walks through the grammar's token masks");
  cmd->add_option("--steps", flags->steps, "Tokens per walk at most");
  cmd->add_option("--compiles", flags->compiles, "Uncached compilations to time");
  cmd->add_option("--seed", flags->seed, "Seed of the walks");
  cmd->add_flag("--quiet", flags->quiet, "Print only the summary line");
  cmd->callback([flags] { run_grammar(*flags); });
}

}  // namespace tokenmill::cli
