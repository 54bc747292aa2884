#include "engine/engine_core.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/cache_namespace.h"
#include "engine/memory_budget.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::engine {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::optional<Refusal> invalid(std::string message) { return Refusal{RejectReason::kInvalid, std::move(message)}; }

std::optional<Refusal> check_fields(const GenerateRequest& r, const RequestLimits& limits) {
  if (r.n != 1) return invalid(fmt::format("n = {}: only one sample per request is supported", r.n));
  if (r.prompt.empty()) return invalid("the prompt is empty");
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= limits.n_vocab)
      return invalid(fmt::format("prompt token id {} is outside the vocabulary [0, {})", t, limits.n_vocab));
  }
  if (r.max_tokens < 1) return invalid(fmt::format("max_tokens must be at least 1, got {}", r.max_tokens));
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs)
    return invalid(fmt::format("top_logprobs must be in [0, {}], got {}", kMaxTopLogprobs, r.top_logprobs));
  const int priority = static_cast<int>(r.priority);
  if (priority < 0 || priority > static_cast<int>(Priority::kLow))
    return invalid(fmt::format("unknown priority class {}", priority));
  if (r.timeout && r.timeout->count() < 0) return invalid("the timeout is negative");
  if (!r.sampling.stop.empty() && !limits.has_tokenizer)
    return invalid("stop strings need a model with a tokenizer");
  try {
    r.sampling.validate(limits.n_vocab);
  } catch (const Error& e) {
    return invalid(e.what());
  }
  return std::nullopt;
}

}  // namespace

std::optional<Refusal> check_request(const GenerateRequest& r, const RequestLimits& limits) {
  if (std::optional<Refusal> bad = check_fields(r, limits)) return bad;
  const int64_t prompt = static_cast<int64_t>(r.prompt.size());
  const int64_t total = prompt + r.max_tokens;
  if (total > limits.max_model_len) {
    return Refusal{RejectReason::kTooLong,
                   fmt::format("prompt ({} tokens) + max_tokens ({}) = {} exceeds the context of {} tokens", prompt,
                               r.max_tokens, total, limits.max_model_len)};
  }
  // The last sampled token never enters the cache: total - 1 positions.
  const int64_t blocks = ceil_div(total - 1, limits.block_size);
  if (blocks > limits.num_blocks) {
    return Refusal{RejectReason::kTooLong,
                   fmt::format("prompt ({} tokens) + max_tokens ({}) needs {} KV blocks but the cache has {} "
                               "({} tokens)",
                               prompt, r.max_tokens, blocks, limits.num_blocks, limits.num_blocks * limits.block_size)};
  }
  if (limits.prefill_chunk == 0 && prompt > limits.max_batch_tokens) {
    return Refusal{RejectReason::kTooLong,
                   fmt::format("prompt ({} tokens) exceeds max_batch_tokens ({}) with chunked prefill off", prompt,
                               limits.max_batch_tokens)};
  }
  return std::nullopt;
}

EngineCore::EngineCore(const EngineConfig& config, Metrics& metrics)
    : config_(config), metrics_(metrics), pool_(config.num_threads) {
  config_.validate();
  model_ = model::Model::load(config_.model_path);
  if (config_.matmul_hook_factory) {
    matmul_hook_ = config_.matmul_hook_factory(*model_);
    model_->set_matmul_hook(matmul_hook_.get());
  }
  const model::ModelConfig& mc = model_->config();
  if (tokenizer::Tokenizer::present_in(model_->file())) tokenizer_ = tokenizer::Tokenizer::from_gguf(model_->file());
  namespace_ = make_cache_namespace(config_.model_path, mc, tokenizer(), config_.adapter_id, config_.kv_dtype);

  const kv::KvGeometry geometry = model_->kv_geometry(config_.block_size, config_.kv_dtype);
  const int64_t blocks =
      resolve_kv_blocks(config_, mc, geometry.bytes_per_block(), mem_available_bytes().value_or(int64_t{1} << 30));
  storage_ = std::make_unique<kv::PagedKvStorage>(geometry, blocks);
  metrics_.set_kv_layout(kv::kv_dtype_name(config_.kv_dtype), geometry.bytes_per_token(), storage_->total_bytes());

  sched::SchedulerConfig sc;
  sc.num_blocks = static_cast<int32_t>(blocks);
  sc.block_size = static_cast<int32_t>(config_.block_size);
  sc.max_batch_tokens = config_.max_batch_tokens;
  sc.max_seqs = config_.max_seqs;
  sc.prefill_chunk = config_.prefill_chunk;
  sc.max_model_len = config_.max_model_len > 0 ? std::min(config_.max_model_len, mc.n_ctx_train) : mc.n_ctx_train;
  sc.max_waiting = config_.max_waiting;
  sc.on_kv_exhausted = config_.kv_exhausted;
  sc.priority_aging_s = config_.priority_aging_s;
  sc.enable_prefix_cache = config_.prefix_cache;
  scheduler_ = std::make_unique<sched::Scheduler>(sc);
  scheduler_->set_stop_check([this](const sched::Sequence& seq) { return stop_check(seq); });

  limits_.n_vocab = static_cast<int32_t>(mc.n_vocab);
  limits_.max_model_len = sc.max_model_len;
  limits_.num_blocks = blocks;
  limits_.block_size = config_.block_size;
  limits_.max_batch_tokens = config_.max_batch_tokens;
  limits_.prefill_chunk = config_.prefill_chunk;
  limits_.has_tokenizer = tokenizer_.has_value();
  update_gauges();
}

EngineCore::~EngineCore() = default;

void EngineCore::add(std::shared_ptr<RequestStream> stream, const GenerateRequest& request,
                     SteadyClock::time_point submitted) {
  const RequestId id = stream->id();
  if (std::optional<Refusal> refusal = check_request(request, limits_)) {
    FinalEvent f;
    f.reason = FinishReason::kRejected;
    f.reject = refusal->reason;
    f.error = std::move(refusal->message);
    metrics_.on_reject(f.reject);
    metrics_.on_finish(f);
    stream->push_final(std::move(f));
    return;
  }
  auto seq = std::make_unique<sched::Sequence>();
  seq->id = id;
  seq->prompt = request.prompt;
  seq->max_tokens = request.max_tokens;
  seq->priority = static_cast<int>(request.priority);
  seq->tenant = request.tenant;
  seq->cache_namespace =
      request_namespace(namespace_, config_.prefix_isolation == PrefixIsolation::kTenant, request.tenant);
  seq->arrival = submitted;
  if (request.timeout) seq->deadline = submitted + *request.timeout;
  seq->sampling = request.sampling;
  states_.emplace(id, RequestState(std::move(stream), request, limits_.n_vocab, tokenizer(), submitted));
  if (std::unique_ptr<sched::Sequence> rejected = scheduler_->add(std::move(seq), SteadyClock::now())) {
    metrics_.on_reject(to_reject_reason(rejected->reject_reason));
    finish_sequence(*rejected, SteadyClock::now());
  }
  update_gauges();
}

void EngineCore::cancel(RequestId id) { scheduler_->cancel(id); }

void EngineCore::abort_all(sched::FinishReason reason, const std::string& message) {
  const SteadyClock::time_point now = SteadyClock::now();
  for (std::unique_ptr<sched::Sequence>& seq : scheduler_->finish_all(reason, now)) {
    seq->error = message;
    finish_sequence(*seq, now);
  }
  update_gauges();
}

sched::FinishReason EngineCore::stop_check(const sched::Sequence& seq) {
  const auto it = states_.find(seq.id);
  TM_CHECK(it != states_.end());
  return it->second.on_token(seq, commit_time_, metrics_);
}

void EngineCore::finish_sequence(const sched::Sequence& seq, SteadyClock::time_point now) {
  const auto it = states_.find(seq.id);
  TM_CHECK(it != states_.end());
  FinalEvent final = it->second.make_final(seq, now);
  metrics_.on_finish(final);
  update_gauges();  // the blocks are already freed: a reader woken by the final event sees them
  it->second.stream().push_final(std::move(final));
  states_.erase(it);
}

bool EngineCore::step() {
  const SteadyClock::time_point start = SteadyClock::now();
  sched::ScheduledBatch batch = scheduler_->schedule(start);
  for (const std::unique_ptr<sched::Sequence>& seq : batch.finished) finish_sequence(*seq, start);
  const bool progressed = !batch.empty() || !batch.finished.empty();
  if (!batch.empty()) {
    StepStats stats;
    run_batch(batch, stats);
    stats.step_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
    metrics_.on_step(stats);
    ++num_steps_;
  }
  update_gauges();
  return progressed;
}

void EngineCore::run_batch(const sched::ScheduledBatch& batch, StepStats& stats) {
  for (const kv::BlockCopy& c : batch.copies) storage_->copy_block(c.src, c.dst);
  if (!batch.copies.empty()) metrics_.on_cow_copies(batch.copies.size());

  const size_t n = batch.seqs.size();
  chunk_tokens_.resize(n);
  std::vector<model::SequenceChunk> chunks(n);
  for (size_t i = 0; i < n; ++i) {
    const sched::ScheduledSeq& s = batch.seqs[i];
    states_.at(s.seq->id).note_scheduled(*s.seq, num_steps_);
    chunk_tokens_[i] = s.seq->tokens(s.start_pos, s.num_tokens);
    chunks[i].tokens = chunk_tokens_[i];
    chunks[i].start_pos = s.start_pos;
    chunks[i].block_table = s.seq->blocks.blocks();
    chunks[i].logits = s.samples ? model::LogitRows::kLast : model::LogitRows::kNone;
    (s.is_decode ? stats.decode_tokens : stats.prefill_tokens) += s.num_tokens;
  }
  stats.num_seqs = static_cast<int64_t>(n);
  try {
    model_->forward(chunks, *storage_, logits_, pool_);
  } catch (const std::exception& e) {
    const std::string message = fmt::format("forward pass failed: {}", e.what());
    for (auto& seq : scheduler_->fail_batch(batch, message, SteadyClock::now())) finish_sequence(*seq, SteadyClock::now());
    return;
  }
  // One logits row per sampling entry, in batch order.
  const size_t vocab = static_cast<size_t>(limits_.n_vocab);
  std::vector<std::optional<int32_t>> sampled(n);
  size_t row_index = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!batch.seqs[i].samples) continue;
    const std::span<const float> row(logits_.data() + row_index++ * vocab, vocab);
    sampled[i] = states_.at(batch.seqs[i].seq->id).sample(row, sampler_scratch_);
    ++stats.sampled_tokens;
  }
  commit_time_ = SteadyClock::now();
  for (auto& seq : scheduler_->commit(batch, sampled, commit_time_)) finish_sequence(*seq, commit_time_);
}

void EngineCore::update_gauges() {
  const sched::SchedulerStats s = scheduler_->stats();
  SchedulerGauges g;
  g.running = s.num_running;
  g.waiting = s.num_waiting;
  g.kv_blocks_total = s.kv_blocks_total;
  g.kv_blocks_used = s.kv_blocks_used;
  g.kv_blocks_free = s.kv_blocks_free;
  g.kv_blocks_evictable = s.kv_blocks_evictable;
  g.kv_blocks_high_water = s.kv_blocks_high_water;
  g.prefix_cache_blocks = s.prefix_cache.blocks_held;
  g.preemptions = static_cast<uint64_t>(s.num_preemptions);
  g.prefix_cache_lookups = static_cast<uint64_t>(s.prefix_cache.lookups);
  g.prefix_cache_hit_tokens = static_cast<uint64_t>(s.prefix_cache.hit_tokens);
  g.prefix_cache_miss_tokens = static_cast<uint64_t>(s.prefix_cache.miss_tokens);
  g.prefix_cache_evictions = static_cast<uint64_t>(s.prefix_cache.evictions);
  metrics_.set_scheduler_gauges(g);
}

}  // namespace tokenmill::engine
