#include "engine/engine_core.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/cache_namespace.h"
#include "engine/memory_budget.h"
#include "util/check.h"
#include "util/error.h"
#include "util/int_math.h"

namespace tokenmill::engine {
namespace {


std::optional<Refusal> invalid(std::string message) { return Refusal{RejectReason::kInvalid, std::move(message)}; }

std::optional<Refusal> check_fields(const GenerateRequest& r, const RequestLimits& limits) {
  const int64_t max_n = std::min<int64_t>(kMaxSamples, limits.max_seqs);
  if (r.n < 1 || r.n > max_n)
    return invalid(fmt::format("n = {}: parallel samples must be in [1, {}] (at most max_seqs)", r.n, max_n));
  if (r.prompt.empty()) return invalid("the prompt is empty");
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= limits.n_vocab)
      return invalid(fmt::format("prompt token id {} is outside the vocabulary [0, {})", t, limits.n_vocab));
  }
  if (r.prompt_logprobs < -1 || r.prompt_logprobs > kMaxTopLogprobs)
    return invalid(fmt::format("prompt_logprobs must be in [-1, {}], got {}", kMaxTopLogprobs, r.prompt_logprobs));
  if (r.max_tokens < 1 && !(r.max_tokens == 0 && r.prompt_logprobs >= 0))
    return invalid(fmt::format("max_tokens must be at least 1 (0 only with prompt_logprobs), got {}", r.max_tokens));
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
  // max_tokens 0 still runs as one (discarded) sampled token.
  const int64_t total = prompt + std::max<int64_t>(r.max_tokens, 1);
  if (prompt >= limits.max_model_len) {
    return Refusal{RejectReason::kPromptTooLong,
                   fmt::format("the prompt ({} tokens) leaves no room in the context of {} tokens", prompt,
                               limits.max_model_len)};
  }
  if (total > limits.max_model_len) {
    return Refusal{RejectReason::kContextExceeded,
                   fmt::format("prompt ({} tokens) + max_tokens ({}) = {} exceeds the context of {} tokens", prompt,
                               r.max_tokens, total, limits.max_model_len)};
  }
  // The last sampled token never enters the cache: total - 1 positions.
  // Parallel samples share the prompt's full blocks and own the rest.
  const int64_t shared = prompt / limits.block_size;
  const int64_t blocks = shared + r.n * (ceil_div(total - 1, limits.block_size) - shared);
  if (blocks > limits.num_blocks) {
    return Refusal{RejectReason::kKvNeverFits,
                   fmt::format("prompt ({} tokens) + max_tokens ({}) needs {} KV blocks but the cache has {} "
                               "({} tokens)",
                               prompt, r.max_tokens, blocks, limits.num_blocks, limits.num_blocks * limits.block_size)};
  }
  if (limits.prefill_chunk == 0 && prompt > limits.max_batch_tokens) {
    return Refusal{RejectReason::kPromptTooLong,
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

  // Two pools when the model has both kinds of layers (see resolve_kv_pools).
  const bool split = config_.kv_window_pool && model_->has_window_group();
  const kv::KvGeometry geometry =
      model_->kv_geometry(config_.block_size, config_.kv_dtype, split ? model::KvGroup::kFull : model::KvGroup::kAll);
  const kv::KvGeometry window_geometry =
      split ? model_->kv_geometry(config_.block_size, config_.kv_dtype, model::KvGroup::kWindow) : kv::KvGeometry{};
  const KvPoolSizes sizes =
      resolve_kv_pools(config_, mc, geometry.bytes_per_block(), split ? window_geometry.bytes_per_block() : 0,
                       mem_available_bytes().value_or(int64_t{1} << 30));
  const int64_t blocks = sizes.blocks;
  storage_ = std::make_unique<kv::PagedKvStorage>(geometry, blocks);
  if (split) window_storage_ = std::make_unique<kv::PagedKvStorage>(window_geometry, sizes.window_blocks);
  metrics_.set_kv_layout(kv::kv_dtype_name(config_.kv_dtype), kv_bytes_per_token(), kv_bytes());

  sched::SchedulerConfig sc;
  sc.num_blocks = static_cast<int32_t>(blocks);
  sc.num_window_blocks = static_cast<int32_t>(sizes.window_blocks);
  sc.sliding_window = split ? mc.sliding_window : 0;
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
  limits_.max_seqs = config_.max_seqs;
  limits_.has_tokenizer = tokenizer_.has_value();
  update_gauges();
}

EngineCore::~EngineCore() = default;

void EngineCore::add(std::vector<std::shared_ptr<RequestStream>> streams, const GenerateRequest& request,
                     SteadyClock::time_point submitted) {
  TM_CHECK(!streams.empty());
  const RequestId id = streams[0]->id();
  std::optional<Refusal> refusal = check_request(request, limits_);
  if (!refusal && streams.size() != static_cast<size_t>(request.n))
    refusal = Refusal{RejectReason::kInvalid, "one stream per sample is required"};
  if (refusal) {
    for (const std::shared_ptr<RequestStream>& stream : streams) {
      FinalEvent f;
      f.reason = FinishReason::kRejected;
      f.reject = refusal->reason;
      f.error = refusal->message;
      metrics_.on_reject(f.reject);
      metrics_.on_finish(f);
      stream->push_final(std::move(f));
    }
    return;
  }
  auto seq = std::make_unique<sched::Sequence>();
  seq->id = id;
  seq->prompt = request.prompt;
  seq->max_tokens = std::max<int64_t>(request.max_tokens, 1);  // 0: one token sampled, then discarded
  seq->skip_prefix_lookup = request.prompt_logprobs >= 0;
  seq->priority = static_cast<int>(request.priority);
  seq->tenant = request.tenant;
  seq->cache_namespace =
      request_namespace(namespace_, config_.prefix_isolation == PrefixIsolation::kTenant, request.tenant);
  seq->arrival = submitted;
  if (request.timeout) seq->deadline = submitted + *request.timeout;
  seq->sampling = request.sampling;
  for (size_t k = 0; k < streams.size(); ++k) {
    const RequestId sample_id = streams[k]->id();
    GenerateRequest sample = request;
    sample.sampling.seed = request.sampling.seed + k;  // documented: sample k uses seed + k
    states_.emplace(sample_id, RequestState(std::move(streams[k]), sample, limits_.n_vocab, tokenizer(), submitted,
                                            static_cast<int>(k)));
    if (k == 0) continue;
    seq->fork_ids.push_back(sample_id);
    fork_parent_[sample_id] = id;
  }
  if (std::unique_ptr<sched::Sequence> rejected = scheduler_->add(std::move(seq), SteadyClock::now())) {
    finish_sequence(*rejected, SteadyClock::now());  // counts the rejection
  }
  update_gauges();
}

void EngineCore::cancel(RequestId id) {
  if (scheduler_->cancel(id)) return;
  const auto it = fork_parent_.find(id);
  if (it == fork_parent_.end()) return;
  const sched::Sequence* parent = scheduler_->find(it->second);
  if (parent == nullptr || !scheduler_->drop_fork(it->second, id)) return;
  fork_parent_.erase(it);
  // The sample never ran on its own: end it as its parent stands, cancelled.
  sched::Sequence ended;
  ended.prompt = parent->prompt;
  ended.first_scheduled = parent->first_scheduled;
  ended.status = sched::SequenceStatus::kFinished;
  ended.finish_reason = sched::FinishReason::kCancelled;
  finish_request(id, ended, SteadyClock::now());
}

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
  finish_request(seq.id, seq, now);
  for (uint64_t fork : seq.fork_ids) {  // ended before its prompt was prefilled: they end alike
    fork_parent_.erase(fork);
    finish_request(fork, seq, now);
  }
}

void EngineCore::finish_request(RequestId id, const sched::Sequence& seq, SteadyClock::time_point now) {
  const auto it = states_.find(id);
  TM_CHECK(it != states_.end());
  FinalEvent final = it->second.make_final(seq, now);
  if (final.reason == FinishReason::kRejected) metrics_.on_reject(final.reject);  // at add() or while queued
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
  for (const kv::BlockCopy& c : batch.window_copies) window_storage_->copy_block(c.src, c.dst);
  const size_t num_copies = batch.copies.size() + batch.window_copies.size();
  if (num_copies > 0) metrics_.on_cow_copies(num_copies);

  std::vector<model::SequenceChunk> chunks = build_chunks(batch, stats);
  try {
    model_->forward(chunks, model::KvPools{storage_.get(), window_storage_.get()}, logits_, pool_);
  } catch (const std::exception& e) {
    const std::string message = fmt::format("forward pass failed: {}", e.what());
    for (auto& seq : scheduler_->fail_batch(batch, message, SteadyClock::now())) finish_sequence(*seq, SteadyClock::now());
    return;
  }
  const std::vector<std::optional<int32_t>> sampled = sample_rows(batch, chunks, stats);
  commit_time_ = SteadyClock::now();
  for (auto& seq : scheduler_->commit(batch, sampled, commit_time_, fork_tokens_)) finish_sequence(*seq, commit_time_);
}

std::vector<model::SequenceChunk> EngineCore::build_chunks(const sched::ScheduledBatch& batch, StepStats& stats) {
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
    chunks[i].window_table = s.seq->window_blocks.blocks();
    chunks[i].window_first = s.seq->window_blocks.first_block();
    chunks[i].logits = s.samples ? model::LogitRows::kLast : model::LogitRows::kNone;
    if (states_.at(s.seq->id).wants_prompt_logits(s.start_pos, s.num_tokens)) chunks[i].logits = model::LogitRows::kAll;
    (s.is_decode ? stats.decode_tokens : stats.prefill_tokens) += s.num_tokens;
  }
  stats.num_seqs = static_cast<int64_t>(n);
  return chunks;
}

// Rows in batch order: every token's for kAll entries (prompt
// log-probabilities; the last one samples), one for kLast, none for kNone.
// Fills fork_tokens_ for sequences whose forks are made in this commit.
std::vector<std::optional<int32_t>> EngineCore::sample_rows(const sched::ScheduledBatch& batch,
                                                            std::span<const model::SequenceChunk> chunks,
                                                            StepStats& stats) {
  const size_t n = batch.seqs.size();
  fork_tokens_.assign(n, {});
  const size_t vocab = static_cast<size_t>(limits_.n_vocab);
  std::vector<std::optional<int32_t>> sampled(n);
  size_t row_index = 0;
  for (size_t i = 0; i < n; ++i) {
    const sched::ScheduledSeq& s = batch.seqs[i];
    RequestState& state = states_.at(s.seq->id);
    if (chunks[i].logits == model::LogitRows::kAll) {
      for (int64_t j = 0; j < s.num_tokens; ++j) {
        const std::span<const float> row(logits_.data() + (row_index + static_cast<size_t>(j)) * vocab, vocab);
        state.record_prompt_logprob(*s.seq, s.start_pos + j, row);
      }
      row_index += static_cast<size_t>(s.num_tokens) - 1;  // the last row is the sampling row below
    }
    if (chunks[i].logits == model::LogitRows::kNone) continue;
    const std::span<const float> row(logits_.data() + row_index++ * vocab, vocab);
    if (!s.samples) continue;  // a kAll chunk that does not end the prefill
    sampled[i] = state.sample(row, sampler_scratch_);
    ++stats.sampled_tokens;
    sample_forks(*s.seq, state, row, i, stats);
  }
  return sampled;
}

// The first tokens of a sequence's pending forks (parallel samples), each
// sampled from the parent's row by the fork's own state (its own seed);
// the scheduler makes the forks in commit().
void EngineCore::sample_forks(const sched::Sequence& seq, const RequestState& parent, std::span<const float> row,
                              size_t entry, StepStats& stats) {
  for (uint64_t fork : seq.fork_ids) {
    RequestState& state = states_.at(fork);
    state.inherit_prefill(parent);
    fork_tokens_[entry].push_back(state.sample(row, sampler_scratch_));
    fork_parent_.erase(fork);
    ++stats.sampled_tokens;
  }
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
  g.kv_window_blocks_total = s.kv_window_blocks_total;
  g.kv_window_blocks_used = s.kv_window_blocks_used;
  g.prefix_cache_blocks = s.prefix_cache.blocks_held;
  g.preemptions = static_cast<uint64_t>(s.num_preemptions);
  g.prefix_cache_lookups = static_cast<uint64_t>(s.prefix_cache.lookups);
  g.prefix_cache_hit_tokens = static_cast<uint64_t>(s.prefix_cache.hit_tokens);
  g.prefix_cache_miss_tokens = static_cast<uint64_t>(s.prefix_cache.miss_tokens);
  g.prefix_cache_evictions = static_cast<uint64_t>(s.prefix_cache.evictions);
  metrics_.set_scheduler_gauges(g);
}

}  // namespace tokenmill::engine
