// Constrained decoding in the engine: with random weights and sampling at
// temperature 1, every output is a sentence of the request's grammar and
// ends with "stop" (EOS where the grammar may end, or the end of a grammar
// nothing can extend), alone and batched with free requests, with n > 1
// samples, and with speculative drafts that the grammar must filter.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/test_util.h"
#include "grammar/gbnf_parser.h"
#include "grammar/text_match.h"

namespace tokenmill::engine {
namespace {

using testing::CoreDriver;
using testing::random_prompt;
using testing::tiny_config;

// Digits and letters the tiny SPM vocabulary spells with single characters
// and byte tokens, plus a fixed literal it holds as words.
const char* kRecordGrammar = R"(
root ::= "{\"id\": " [1-9] [0-9]{0,3} ", \"tags\": [" ( tag ( ", " tag ){0,2} )? "]}"
tag ::= "\"" [a-z]{1,6} "\""
)";

std::shared_ptr<const grammar::CompiledGrammar> compile(const EngineCore& core, const std::string& gbnf) {
  const grammar::GrammarLimits limits;
  auto vocab = grammar::TokenVocab::build(*core.tokenizer());
  return std::make_shared<const grammar::CompiledGrammar>(
      grammar::parse_gbnf(gbnf, limits, grammar::Deadline(limits.max_compile_time)), vocab,
      grammar::ConstraintSpec{grammar::ConstraintKind::kGbnf, gbnf});
}

GenerateRequest sampled(uint64_t seed, int64_t max_tokens) {
  GenerateRequest r;
  r.prompt = random_prompt(seed, 12);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  return r;
}

// Every constrained output parses; free outputs are left alone.
void expect_constrained_outputs(const EngineConfig& config, int rounds) {
  CoreDriver d(config);
  auto cg = compile(d.core(), kRecordGrammar);
  std::vector<RequestHandle> constrained;
  std::vector<RequestHandle> free;
  for (int i = 0; i < rounds; ++i) {
    GenerateRequest r = sampled(100 + static_cast<uint64_t>(i), 200);
    r.grammar = cg;
    r.n = i % 3 == 0 ? 2 : 1;
    for (RequestHandle& h : d.add_samples(r)) constrained.push_back(h);
    free.push_back(d.add(sampled(500 + static_cast<uint64_t>(i), 20)));
  }
  d.run_to_end();
  for (RequestHandle& h : constrained) {
    const GenerationResult g = h.wait();
    std::string bytes;
    for (int32_t id : g.tokens) bytes += d.core().tokenizer()->token_to_piece(id);
    EXPECT_EQ(g.final.reason, FinishReason::kStop) << g.final.error << " after: " << bytes;
    EXPECT_TRUE(grammar::grammar_accepts(cg->grammar(), bytes)) << bytes;
    EXPECT_EQ(g.text, bytes);
  }
  for (RequestHandle& h : free) EXPECT_EQ(h.wait().final.reason, FinishReason::kLength);
  EXPECT_GT(cg->cache_stats().hits, 0);
}

TEST(EngineGrammar, SampledOutputsAreSentencesOfTheGrammar) {
  expect_constrained_outputs(tiny_config(), testing::property_rounds(10));
}

TEST(EngineGrammar, DraftTokensAreCheckedAgainstTheGrammar) {
  EngineConfig c = tiny_config();
  c.spec.method = spec::SpecMethod::kDraft;
  c.spec.draft_model = testing::tiny_draft_model_path();
  c.spec.ngram = {4, 1, 3};
  c.spec.adaptive = false;
  expect_constrained_outputs(c, testing::property_rounds(5));
  c.spec.method = spec::SpecMethod::kNgram;
  c.spec.draft_model.clear();
  expect_constrained_outputs(c, testing::property_rounds(5));
}

TEST(EngineGrammar, MaxTokensInsideTheStructureFinishesWithLength) {
  CoreDriver d(tiny_config());
  GenerateRequest r = sampled(7, 3);
  r.grammar = compile(d.core(), kRecordGrammar);
  RequestHandle h = d.add(r);
  d.run_to_end();
  const GenerationResult g = h.wait();
  EXPECT_EQ(g.final.reason, FinishReason::kLength);
  EXPECT_EQ(g.tokens.size(), 3u);
}

TEST(EngineGrammar, GreedyRequestsFollowTheGrammarToo) {
  CoreDriver d(tiny_config());
  auto cg = compile(d.core(), R"(root ::= "yes" | "no")");
  GenerateRequest r = sampled(3, 50);
  r.sampling.temperature = 0.0f;
  r.grammar = cg;
  RequestHandle h = d.add(r);
  d.run_to_end();
  const GenerationResult g = h.wait();
  EXPECT_EQ(g.final.reason, FinishReason::kStop);
  EXPECT_TRUE(g.text == "yes" || g.text == "no") << g.text;
}

}  // namespace
}  // namespace tokenmill::engine
