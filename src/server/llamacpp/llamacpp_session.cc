#include "server/llamacpp/llamacpp_session.h"

namespace tokenmill::server {

using nlohmann::json;

LlamaSession::LlamaSession(ServingContext& ctx, SlotBoard& board, LlamaJob job)
    : ctx_(ctx), job_(std::move(job)), piece_([tok = ctx.tokenizer](int32_t id) {
        return tok ? tok->token_to_piece(id, /*special=*/true) : "<" + std::to_string(id) + ">";
      }) {
  const size_t n = static_cast<size_t>(job_.gen.common.n);
  choices_.resize(job_.gen.prompts.size() * n);
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    c.out.index = static_cast<int>(i);
    c.out.prompt_text = job_.prompt_texts[i / n];
    c.out.result.final.usage.prompt_tokens = static_cast<int64_t>(job_.gen.prompts[i / n].size());
    c.lease = board.acquire(i == 0 ? job_.wanted_slot : -1, job_.spec.settings, job_.gen.max_tokens, job_.gen.tenant);
    c.out.id_slot = c.lease.id();
  }
}

std::optional<json> LlamaSession::run_whole(engine::Engine& engine, const HttpRequest& req) {
  // The slots show each choice's progress (GET /slots) while it runs.
  std::optional<std::vector<engine::GenerationResult>> results =
      run_to_end(ctx_, engine, job_.gen, req, [this](size_t i, const engine::StreamEvent& e) {
        if (e.token) choices_[i].lease.on_token(e.token->text.find('\n') != std::string::npos);
        if (e.final) choices_[i].lease = SlotBoard::Lease();  // the slot is free again
      });
  if (!results) return std::nullopt;  // the client left
  json list = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    choices_[i].out.result = std::move((*results)[i]);
    list.push_back(select_response_fields(llama_final_json(job_.spec, choices_[i].out, piece_), job_.spec.fields));
  }
  return list.size() == 1 ? list[0] : list;
}

std::string LlamaSession::on_token(size_t i, const engine::TokenEvent& t) {
  Choice& c = choices_[i];
  engine::GenerationResult& r = c.out.result;
  r.tokens.push_back(t.token);
  r.text += t.text;
  if (t.logprob) r.logprobs.push_back(*t.logprob);
  c.lease.on_token(t.text.find('\n') != std::string::npos);
  const int64_t predicted = static_cast<int64_t>(r.tokens.size());
  return sse_event(
      llama_partial_json(job_.spec, c.out.index, c.out.id_slot, t, predicted, r.final.usage.prompt_tokens, piece_));
}

std::string LlamaSession::on_final(size_t i, const engine::FinalEvent& f) {
  Choice& c = choices_[i];
  c.out.result.text += f.text;
  c.out.result.final = f;
  c.lease = SlotBoard::Lease();  // the slot is free again
  // llama.cpp has no "cancelled" end: a shutdown's abort is an error event.
  if (f.reason == engine::FinishReason::kCancelled) return sse_event(failure_error(f)->to_json());
  return sse_event(select_response_fields(llama_final_json(job_.spec, c.out, piece_), job_.spec.fields));
}

}  // namespace tokenmill::server
