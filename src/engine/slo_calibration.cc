#include "engine/slo_calibration.h"

#include <algorithm>
#include <vector>

#include "engine/engine.h"
#include "util/error.h"

namespace tokenmill::engine {
namespace {

// Token ids spread over the vocabulary (no tokenizer needed; distinct per
// request, so nothing is served from the prefix cache).
std::vector<int32_t> synthetic_prompt(int64_t length, int32_t n_vocab, int32_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(length));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int32_t>((static_cast<int64_t>(i) * 7919 + salt * 104729 + 1) % n_vocab);
  return ids;
}

GenerateRequest calibration_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.spec_max_draft = 0;  // plain steps: what the cost line is of
  return r;
}

void wait_all(std::vector<RequestHandle>& handles) {
  for (RequestHandle& h : handles) {
    while (std::optional<StreamEvent> e = h.next()) {
      if (!e->final) continue;
      if (e->final->reason == FinishReason::kRejected || e->final->reason == FinishReason::kError)
        fail("the SLO calibration's request failed: {}", e->final->error);
      break;
    }
  }
}

}  // namespace

void calibrate_slo_costs(Engine& engine) {
  const RequestLimits& limits = engine.limits();
  const EngineConfig& c = engine.config();
  const int32_t n_vocab = std::max<int32_t>(limits.n_vocab, 2);
  // Room for one sequence: the context, and half the smallest full pool
  // (what a request holds must fit beside whatever the pool keeps).
  int64_t room = limits.max_model_len() > 0 ? limits.max_model_len() : 512;
  for (const sched::KvGroupConfig& g : limits.capacity.kv_groups)
    if (g.window == 0) room = std::min<int64_t>(room, g.num_blocks * limits.capacity.block_size / 2);
  constexpr int64_t kDecodeSteps = 4;  // each batch: kMinSteps and then some
  // One full prefill chunk (or step), within the context.
  const int64_t step = c.prefill_chunk > 0 ? std::min(c.prefill_chunk, c.max_batch_tokens) : c.max_batch_tokens;
  const int64_t long_prompt = std::clamp<int64_t>(step, 1, std::max<int64_t>(room - kDecodeSteps - 1, 1));
  std::vector<RequestHandle> first;
  first.push_back(engine.submit(calibration_request(synthetic_prompt(long_prompt, n_vocab, 0), kDecodeSteps)));
  wait_all(first);
  // A batch decoding together: a second batch size for the decode line,
  // and a second prefill step (the short prompts, prefilled together).
  const int64_t batch = std::clamp<int64_t>(c.max_seqs, 1, 8);
  const int64_t short_prompt =
      std::min<int64_t>(16, std::max<int64_t>(room / batch - 2 * kDecodeSteps - limits.capacity.block_size, 1));
  std::vector<RequestHandle> together;
  for (int64_t i = 0; i < batch; ++i)
    together.push_back(engine.submit(
        calibration_request(synthetic_prompt(short_prompt, n_vocab, static_cast<int32_t>(i + 1)), 2 * kDecodeSteps)));
  wait_all(together);
  // A third prefill of another size: the model trusts its prefill cost
  // after kMinSteps of forgotten weight, which two steps fall just short of.
  std::vector<RequestHandle> last;
  last.push_back(engine.submit(calibration_request(
      synthetic_prompt(std::max<int64_t>(long_prompt / 2, 1), n_vocab, static_cast<int32_t>(batch + 1)),
      kDecodeSteps)));
  wait_all(last);
}

}  // namespace tokenmill::engine
