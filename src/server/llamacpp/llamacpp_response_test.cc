#include "server/llamacpp/llamacpp_response.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/llamacpp/llamacpp_slots.h"

namespace tokenmill::server {
namespace {

using nlohmann::json;

// Token i stands for the text "t<i>"; 100 is a partial UTF-8 character.
std::string piece_of(int32_t id) { return id == 100 ? std::string("\xE2\x96") : "t" + std::to_string(id); }
const TokenPieceFn kPiece = piece_of;

engine::GenerationResult result(std::vector<int32_t> tokens, engine::FinishReason reason, int64_t completion_tokens) {
  engine::GenerationResult r;
  for (int32_t t : tokens) r.text += piece_of(t);
  r.tokens = std::move(tokens);
  r.final.reason = reason;
  r.final.usage.prompt_tokens = 4;
  r.final.usage.completion_tokens = completion_tokens;
  return r;
}

TEST(LlamaResponse, StopTypes) {
  using engine::FinishReason;
  EXPECT_EQ(llama_stop(result({1, 2}, FinishReason::kLength, 2), {}, kPiece).type, "limit");
  EXPECT_EQ(llama_stop(result({1, 2}, FinishReason::kTimeout, 2), {}, kPiece).type, "limit");
  // An EOS is counted but streams no token.
  EXPECT_EQ(llama_stop(result({1, 2}, FinishReason::kStop, 3), {"t2"}, kPiece).type, "eos");
  const LlamaStop word = llama_stop(result({1, 23}, FinishReason::kStop, 2), {"zz", "t2", "t1t"}, kPiece);
  EXPECT_EQ(word.type, "word");
  EXPECT_EQ(word.word, "t1t");  // completed first ("t1t" ends at byte 3, "t2" at 5)
  EXPECT_EQ(llama_stop(result({1}, FinishReason::kCancelled, 1), {}, kPiece).type, "none");
}

TEST(LlamaResponse, Utf8AndPieces) {
  EXPECT_EQ(utf8_valid_prefix("ab\xE2\x96"), "ab");
  EXPECT_EQ(utf8_valid_prefix("\xC3\xA1x"), "\xC3\xA1x");
  EXPECT_EQ(utf8_valid_prefix("\xFF"), "");
  EXPECT_EQ(llama_piece_json("hi"), json("hi"));
  EXPECT_EQ(llama_piece_json("\xC3"), json::parse("[195]"));
}

TEST(LlamaResponse, ProbabilitiesInLlamaShape) {
  engine::TokenLogprob lp;
  lp.logprob = -0.5f;
  lp.top = {{7, -0.25f}, {100, -std::numeric_limits<float>::infinity()}};
  const json p = llama_probabilities_json({7}, {lp}, kPiece);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]["id"], 7);
  EXPECT_EQ(p[0]["token"], "t7");
  EXPECT_EQ(p[0]["bytes"], json::parse("[116, 55]"));
  EXPECT_DOUBLE_EQ(p[0]["logprob"].get<double>(), -0.5);
  ASSERT_EQ(p[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(p[0]["top_logprobs"][0]["id"], 7);
  // A partial character: the valid prefix as text, every byte in bytes; no -inf in JSON.
  EXPECT_EQ(p[0]["top_logprobs"][1]["token"], "");
  EXPECT_EQ(p[0]["top_logprobs"][1]["bytes"], json::parse("[226, 150]"));
  EXPECT_TRUE(p[0]["top_logprobs"][1]["logprob"].is_number());
  EXPECT_LT(p[0]["top_logprobs"][1]["logprob"].get<double>(), -1e30);
}

TEST(LlamaResponse, Timings) {
  engine::FinalEvent f;
  f.usage = {10, 4, 5};
  f.timings.prefill_ms = 12;
  f.timings.decode_ms = 40;
  f.timings.tpot_ms = 10;
  const json t = llama_timings_json(f);
  EXPECT_EQ(t["cache_n"], 4);
  EXPECT_EQ(t["prompt_n"], 6);
  EXPECT_DOUBLE_EQ(t["prompt_per_token_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(t["prompt_per_second"].get<double>(), 500.0);
  EXPECT_EQ(t["predicted_n"], 5);
  EXPECT_DOUBLE_EQ(t["predicted_ms"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(t["predicted_per_second"].get<double>(), 100.0);
  EXPECT_FALSE(t.contains("draft_n"));
  EXPECT_EQ(llama_timings_json(engine::FinalEvent{})["prompt_per_second"], 0.0);  // no division by zero
}

TEST(LlamaResponse, FinalAndPartialObjects) {
  LlamaResponseSpec spec;
  spec.model = "m";
  spec.settings = {{"n_predict", 8}};
  spec.stops = {"t3"};
  spec.n_ctx = 100;
  LlamaChoice c;
  c.index = 1;
  c.id_slot = 2;
  c.prompt_text = "<s> hi";
  c.result = result({1, 2}, engine::FinishReason::kStop, 3);
  engine::TokenLogprob lp;
  c.result.logprobs = {lp, lp};
  json f = llama_final_json(spec, c, kPiece);
  EXPECT_EQ(f["content"], "t1t2");
  EXPECT_EQ(f["stop"], true);
  EXPECT_EQ(f["stop_type"], "eos");
  EXPECT_EQ(f["stopped_eos"], true);
  EXPECT_EQ(f["stopped_word"], false);
  EXPECT_EQ(f["stopped_limit"], false);
  EXPECT_EQ(f["stopping_word"], "");
  EXPECT_EQ(f["tokens_predicted"], 3);
  EXPECT_EQ(f["tokens_evaluated"], 4);
  EXPECT_EQ(f["tokens"], json::array());  // only with return_tokens
  EXPECT_EQ(f["id_slot"], 2);
  EXPECT_EQ(f["index"], 1);
  EXPECT_EQ(f["prompt"], "<s> hi");
  EXPECT_EQ(f["truncated"], false);
  EXPECT_EQ(f["generation_settings"]["n_predict"], 8);
  EXPECT_FALSE(f.contains("completion_probabilities"));
  spec.return_tokens = spec.probs = true;
  f = llama_final_json(spec, c, kPiece);
  EXPECT_EQ(f["tokens"], json::parse("[1, 2]"));
  EXPECT_EQ(f["completion_probabilities"].size(), 2u);
  spec.stream = true;
  c.result.final.text = "tail";
  f = llama_final_json(spec, c, kPiece);
  EXPECT_EQ(f["content"], "tail");  // the chunks carried the rest
  EXPECT_FALSE(f.contains("completion_probabilities"));
  spec.n_ctx = 7;  // 4 prompt + 3 completion tokens fill it
  EXPECT_EQ(llama_final_json(spec, c, kPiece)["truncated"], true);

  engine::TokenEvent t;
  t.token = 9;
  t.text = "t9";
  t.logprob = lp;
  const json p = llama_partial_json(spec, 0, 3, t, 1, 4, kPiece);
  EXPECT_EQ(p["content"], "t9");
  EXPECT_EQ(p["tokens"], json::parse("[9]"));
  EXPECT_EQ(p["stop"], false);
  EXPECT_EQ(p["id_slot"], 3);
  EXPECT_EQ(p["tokens_predicted"], 1);
  EXPECT_EQ(p["completion_probabilities"].size(), 1u);
}

TEST(LlamaResponse, GenerationSettingsReportTheParsedValues) {
  SamplingRequest c;
  c.sampling.temperature = 0.5f;
  c.sampling.top_k = 12;
  c.sampling.stop = {"x"};
  c.sampling.logit_bias = {{3, -1.0f}};
  c.logprobs = true;
  c.top_logprobs = 4;
  json s = llama_generation_settings(c, 32, 256, "m");
  EXPECT_FLOAT_EQ(s["temperature"].get<float>(), 0.5f);
  EXPECT_EQ(s["top_k"], 12);
  EXPECT_EQ(s["n_predict"], 32);
  EXPECT_EQ(s["n_ctx"], 256);
  EXPECT_EQ(s["n_probs"], 4);
  EXPECT_EQ(s["seed"], kLlamaRandomSeed);
  EXPECT_EQ(s["stop"], json::parse(R"(["x"])"));
  EXPECT_EQ(s["logit_bias"], json::parse(R"([{"bias": -1.0, "token": 3}])"));
  c.seed_given = true;
  c.sampling.seed = 5;
  EXPECT_EQ(llama_generation_settings(c, 32, 256, "m")["seed"], 5);
}

TEST(SlotBoard, LeasesTakeAndReturnSlots) {
  SlotBoard board;
  board.set_total(2);
  SlotBoard::Lease a = board.acquire(-1, {{"k", 1}}, 10);
  EXPECT_EQ(a.id(), 0);
  SlotBoard::Lease b = board.acquire(0, {}, -1);  // 0 is taken: the lowest free one
  EXPECT_EQ(b.id(), 1);
  EXPECT_EQ(board.acquire(-1, {}, -1).id(), -1);  // full
  a.on_token(false);
  a.on_token(true);
  std::vector<SlotState> s = board.snapshot();
  EXPECT_TRUE(s[0].busy);
  EXPECT_EQ(s[0].n_decoded, 2);
  EXPECT_EQ(s[0].n_remain, 8);
  EXPECT_TRUE(s[0].has_new_line);
  EXPECT_EQ(s[0].params["k"], 1);
  EXPECT_NE(s[0].id_task, s[1].id_task);
  EXPECT_EQ(board.num_busy(), 2);
  a = SlotBoard::Lease();  // released
  EXPECT_EQ(board.num_busy(), 1);
  EXPECT_FALSE(board.snapshot()[0].busy);
  EXPECT_EQ(board.snapshot()[0].n_decoded, 0);
  SlotBoard::Lease c = board.acquire(1, {}, -1);  // wanted, but busy
  EXPECT_EQ(c.id(), 0);
}

TEST(SlotBoard, ATenantSeesOnlyItsOwnSlotsWhole) {
  SlotBoard board;
  board.set_total(3);
  SlotBoard::Lease a = board.acquire(-1, {{"stop", {"secret"}}, {"grammar", "root ::= \"x\""}}, 10, "alice");
  SlotBoard::Lease b = board.acquire(-1, {{"stop", {"mine"}}}, 5, "bob");
  a.on_token(true);
  const std::vector<SlotState> seen_by_bob = board.snapshot_for("bob", /*sees_all=*/false);
  ASSERT_EQ(seen_by_bob.size(), 3u);
  // Alice's slot: busy, and nothing of hers.
  EXPECT_TRUE(seen_by_bob[0].busy);
  EXPECT_TRUE(seen_by_bob[0].params.is_null());
  EXPECT_EQ(seen_by_bob[0].id_task, -1);
  EXPECT_EQ(seen_by_bob[0].n_decoded, 0);
  EXPECT_EQ(seen_by_bob[0].n_remain, -1);
  EXPECT_FALSE(seen_by_bob[0].has_new_line);
  EXPECT_TRUE(seen_by_bob[0].tenant.empty());
  // His own: whole.
  EXPECT_EQ(seen_by_bob[1].params["stop"][0], "mine");
  EXPECT_EQ(seen_by_bob[1].n_remain, 5);
  EXPECT_FALSE(seen_by_bob[2].busy);
  // An admin sees both whole.
  const std::vector<SlotState> all = board.snapshot_for("ops", /*sees_all=*/true);
  EXPECT_EQ(all[0].params["stop"][0], "secret");
  EXPECT_EQ(all[0].n_decoded, 1);
  EXPECT_EQ(all[1].params["stop"][0], "mine");
}

}  // namespace
}  // namespace tokenmill::server
