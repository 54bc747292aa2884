#include "engine/engine_core.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/cache_namespace.h"
#include "engine/memory_budget.h"
#include "util/check.h"
#include "util/error.h"
#include "util/int_math.h"

namespace tokenmill::engine {
EngineCore::EngineCore(const EngineConfig& config, Metrics& metrics)
    : config_(config), metrics_(metrics), pool_(config.num_threads) {
  config_.validate();
  load_model();
  std::vector<sched::KvGroupConfig> kv_groups = create_kv_pools();
  if (config_.spec.enabled())  // after the pools: a draft model takes as many bytes
    spec_ = std::make_unique<Speculator>(config_, *model_, *runner_, states_, metrics_, pool_);
  metrics_.set_kv_layout(kv::kv_dtype_name(config_.kv_dtype), kv_bytes_per_token(), kv_bytes());
  const sched::SchedulerConfig sc = scheduler_config(std::move(kv_groups));
  scheduler_ = std::make_unique<sched::Scheduler>(sc, &runner_->attention_mass());
  if (config_.slo.enabled())
    slo_ = std::make_unique<SloAdmission>(
        config_.slo, sched::ForecastLimits{sc.max_batch_tokens, sc.max_seqs, sc.prefill_chunk}, metrics_);
  limits_ = request_limits(sc);
  update_gauges();
}

// The model (and the weight runtime's hook on it), its tokenizer (the
// config's, else the model file's) and the prefix cache's namespace.
void EngineCore::load_model() {
  model_ = model::Model::load(config_.model_path, config_.parallel.get(), config_.rope);
  if (config_.parallel && !config_.parallel->is_root()) fail("the engine runs on the root rank only");
  if (config_.matmul_hook_factory) {
    matmul_hook_ = config_.matmul_hook_factory(*model_);
    model_->set_matmul_hook(matmul_hook_.get());
  }
  tokenizer_ = config_.tokenizer;
  if (!tokenizer_ && tokenizer::Tokenizer::present_in(model_->file()))
    tokenizer_ = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(model_->file()));
  namespace_ = make_cache_namespace(config_.model_path, model_->config(), tokenizer(), config_.adapter_id,
                                    config_.kv_dtype, config_.kv_policy);
}

// Sizes and allocates the KV pools (two when the model has both kinds of
// layers; see resolve_kv_pools), builds the runner on them and tells a
// parallel runtime their sizes. Returns the scheduler's view of them.
std::vector<sched::KvGroupConfig> EngineCore::create_kv_pools() {
  const std::vector<model::KvLayerGroup> groups = model_->kv_layer_groups(config_.kv_window_pool);
  std::vector<kv::KvGeometry> geometries;
  for (const model::KvLayerGroup& g : groups)
    geometries.push_back(model_->kv_geometry(config_.block_size, config_.kv_dtype, g.layers));
  const KvPoolSizes sizes = resolve_kv_pools(config_, model_->config(), geometries[0].bytes_per_block(),
                                             groups.size() > 1 ? geometries[1].bytes_per_block() : 0,
                                             mem_available_bytes().value_or(int64_t{1} << 30));
  std::vector<std::unique_ptr<kv::PagedKvStorage>> pools;
  std::vector<sched::KvGroupConfig> kv_groups;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t blocks = g == 0 ? sizes.blocks : sizes.window_blocks;
    pools.push_back(std::make_unique<kv::PagedKvStorage>(geometries[g], blocks));
    kv_groups.push_back({static_cast<int32_t>(blocks), groups[g].window});
  }
  // Measured now rather than on the first request's step (a prefill of a
  // few hundred tokens).
  if (kv::kv_keys_channel_scaled(config_.kv_dtype)) model_->prepare_key_scales(pool_);
  runner_ = std::make_unique<runner::ModelRunner>(*model_, std::move(pools), pool_);
  if (config_.parallel) {
    std::vector<int64_t> blocks{sizes.blocks};
    if (groups.size() > 1) blocks.push_back(sizes.window_blocks);
    config_.parallel->publish_pool_sizes(blocks);
    metrics_.set_parallel_layout(model_->shard().tp_size, model_->shard().pp_size, model_->shard().ep_size);
  }
  return kv_groups;
}

sched::SchedulerConfig EngineCore::scheduler_config(std::vector<sched::KvGroupConfig> kv_groups) const {
  sched::SchedulerConfig sc;
  sc.kv_groups = std::move(kv_groups);
  sc.block_size = static_cast<int32_t>(config_.block_size);
  sc.max_batch_tokens = config_.max_batch_tokens;
  sc.max_seqs = config_.max_seqs;
  sc.prefill_chunk = config_.prefill_chunk;
  const int64_t n_ctx_train = model_->config().n_ctx_train;
  sc.max_model_len = config_.max_model_len > 0 ? std::min(config_.max_model_len, n_ctx_train) : n_ctx_train;
  sc.max_waiting = config_.max_waiting;
  sc.on_kv_exhausted = config_.kv_exhausted;
  sc.priority_aging_s = config_.priority_aging_s;
  sc.enable_prefix_cache = config_.prefix_cache;
  sc.tenants = {config_.tenant_limits, config_.default_tenant_limits};
  sc.kv_policy = config_.kv_policy;
  return sc;
}

RequestLimits EngineCore::request_limits(const sched::SchedulerConfig& sc) const {
  RequestLimits limits;
  limits.n_vocab = static_cast<int32_t>(model_->config().n_vocab);
  limits.capacity = sc.capacity();
  limits.has_tokenizer = tokenizer_ != nullptr;
  limits.embeddings = model_->shard().pp_size == 1;
  limits.speculation = config_.spec.enabled();
  limits.parallel = config_.parallel != nullptr;
  return limits;
}

EngineCore::~EngineCore() = default;

void EngineCore::add(std::vector<std::shared_ptr<RequestStream>> streams, const GenerateRequest& request,
                     SteadyClock::time_point submitted) {
  TM_CHECK(!streams.empty());
  const RequestId id = streams[0]->id();
  std::optional<Refusal> refusal = check_request(request, limits_);
  if (!refusal && streams.size() != static_cast<size_t>(request.n))
    refusal = Refusal{RejectReason::kInvalid, "one stream per sample is required"};
  if (!refusal && request.adapter != nullptr && request.adapter->base() != model_.get())
    refusal = Refusal{RejectReason::kInvalid, "the LoRA adapter was loaded for another model"};
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
  // A cache hit leaves positions uncomputed: fine for last pooling only.
  seq->skip_prefix_lookup = request.prompt_logprobs >= 0 || request.embedding == Pooling::kMean;
  seq->priority = static_cast<int>(request.priority);
  seq->tenant = request.tenant;
  seq->adapter = request.adapter;
  kv::CacheNamespace ns = namespace_;
  if (request.kv_policy) {  // the request's own, in place of the engine's
    seq->kv_policy = *request.kv_policy;
    ns.kv_policy = request.kv_policy->evicts() ? request.kv_policy->describe() : "";
  }
  if (request.adapter != nullptr) {
    seq->adapter_name = request.adapter->name();
    ns.adapter = request.adapter->identity();
  }
  seq->cache_namespace = request_namespace(ns, config_.prefix_isolation == PrefixIsolation::kTenant, request.tenant);
  seq->arrival = submitted;
  if (request.timeout) seq->deadline = submitted + *request.timeout;
  for (size_t k = 0; k < streams.size(); ++k) {
    const RequestId sample_id = streams[k]->id();
    GenerateRequest sample = request;
    sample.sampling.seed = request.sampling.seed + k;  // documented: sample k uses seed + k
    RequestState state(std::move(streams[k]), sample, limits_.n_vocab, tokenizer(), submitted, static_cast<int>(k));
    if (request.embedding) state.start_embedding(*request.embedding, model_->config().n_embd);
    states_.emplace(sample_id, std::move(state));
    if (k == 0) continue;
    seq->fork_ids.push_back(sample_id);
    fork_parent_[sample_id] = id;
  }
  if (refuse_unattainable(*seq, SteadyClock::now())) return;
  if (std::unique_ptr<sched::Sequence> rejected = scheduler_->add(std::move(seq), SteadyClock::now())) {
    finish_sequence(*rejected, SteadyClock::now());  // counts the rejection
  }
  update_gauges();
}

bool EngineCore::refuse_unattainable(sched::Sequence& seq, SteadyClock::time_point now) {
  if (!slo_) return false;
  const int64_t cached =
      seq.skip_prefix_lookup ? 0 : scheduler_->prefix_cache().lookup(seq.cache_namespace, seq.prompt).num_tokens;
  const std::optional<SloRefusal> refusal = slo_->check(seq, scheduler_->ranked(now), now, cached);
  if (!refusal) return false;
  seq.status = sched::SequenceStatus::kFinished;
  seq.finish_reason = FinishReason::kRejected;
  seq.reject_reason = RejectReason::kSloUnattainable;
  seq.error = refusal->message;
  seq.finished = now;
  finish_sequence(seq, now);  // counts the rejection
  return true;
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
  ended.finish_reason = FinishReason::kCancelled;
  finish_request(id, ended, SteadyClock::now());
}

void EngineCore::set_paused(RequestId id, bool paused) {
  if (scheduler_->set_paused(id, paused)) update_gauges();
}

void EngineCore::resume_all() {
  if (scheduler_->num_paused() == 0) return;
  scheduler_->resume_all();
  update_gauges();
}

void EngineCore::abort_all(FinishReason reason, const std::string& message) {
  const SteadyClock::time_point now = SteadyClock::now();
  for (std::unique_ptr<sched::Sequence>& seq : scheduler_->finish_all(reason, now)) {
    seq->error = message;
    finish_sequence(*seq, now);
  }
  update_gauges();
}

void EngineCore::finish_sequence(const sched::Sequence& seq, SteadyClock::time_point now) {
  finish_request(seq.id, seq, now);
  for (uint64_t fork : seq.fork_ids) {  // ended before its prompt was prefilled: they end alike
    fork_parent_.erase(fork);
    finish_request(fork, seq, now);
  }
}

void EngineCore::finish_request(RequestId id, const sched::Sequence& seq, SteadyClock::time_point now) {
  if (spec_) spec_->release(id);
  const auto it = states_.find(id);
  TM_CHECK(it != states_.end());
  FinalEvent final = it->second.make_final(seq, now);
  if (slo_) slo_->on_final(id, seq.max_tokens, final);
  if (final.reason == FinishReason::kRejected) metrics_.on_reject(final.reject);  // at add() or while queued
  metrics_.on_finish(final);
  update_gauges();  // the blocks are already freed: a reader woken by the final event sees them
  it->second.stream().push_final(std::move(final));
  states_.erase(it);
}

// The five beats of a step (see the top of engine_core.h); `meter` is the
// metrics observer each beat reports to.
bool EngineCore::step() {
  StepMeter meter(config_.parallel.get());
  const sched::ScheduledBatch batch = schedule(meter);
  if (!batch.empty()) {
    const std::vector<model::LogitRows> rows = logit_rows(batch, meter.stats());
    if (const std::optional<runner::StepLogits> logits = run(batch, rows, meter)) {
      const SampledTokens sampled = sample(batch, rows, *logits, meter);
      const std::vector<std::unique_ptr<sched::Sequence>> finished = commit(batch, sampled, meter.stats());
      emit(sampled.step, finished, sampled.at);
    }
    observe_step(meter.finish());
  }
  update_gauges();
  return !batch.empty() || !batch.finished.empty();  // progress: something ran or finished
}

// schedule: speculation's drafts and the SLO admission's refusals first
// (both change what the scheduler sees), then the batch; the requests the
// scheduler finished there (cancelled, timed out, rejected) end now.
sched::ScheduledBatch EngineCore::schedule(StepMeter& meter) {
  const SteadyClock::time_point start = meter.start();
  if (spec_) spec_->propose(*scheduler_, meter.stats());
  refuse_unattainable_queued(start);
  sched::ScheduledBatch batch = scheduler_->schedule(start);
  for (const std::unique_ptr<sched::Sequence>& seq : batch.finished) finish_sequence(*seq, start);
  for (const sched::PrefixLookup& p : batch.prefix_lookups)
    metrics_.on_prefix_lookup(p.tenant, p.adapter, p.hit_tokens, p.miss_tokens);
  return batch;
}

void EngineCore::refuse_unattainable_queued(SteadyClock::time_point now) {
  if (!slo_ || scheduler_->num_waiting() == 0) return;
  for (auto& [id, refusal] : slo_->unattainable(scheduler_->ranked(now), now))
    scheduler_->reject_queued(id, RejectReason::kSloUnattainable, std::move(refusal.message));
}

// run: one runner call does the block copies, then the drafts from a model
// (they read the step's blocks, so they run inside it), then the forward
// pass. A failed pass fails the batch: nullopt.
std::optional<runner::StepLogits> EngineCore::run(const sched::ScheduledBatch& batch,
                                                  std::span<const model::LogitRows> rows, StepMeter& meter) {
  const size_t num_copies = batch.num_copies();
  if (num_copies > 0) metrics_.on_cow_copies(num_copies);
  try {
    const auto before_forward = [&] {
      if (spec_) spec_->draft(batch, meter.stats());
      meter.forward_begins();
    };
    std::optional<runner::StepLogits> logits = runner_->run(batch, rows, hidden_rows(batch), before_forward);
    meter.forward_ends(*model_);
    if (spec_) spec_->observe_forward(batch, meter.stats());
    return logits;
  } catch (const std::exception& e) {
    const std::string message = fmt::format("forward pass failed: {}", e.what());
    for (auto& seq : scheduler_->fail_batch(batch, message, SteadyClock::now()))
      finish_sequence(*seq, SteadyClock::now());
    return std::nullopt;
  }
}

// sample: a token per sampling entry (verified drafts included), then the
// stop decision of each.
EngineCore::SampledTokens EngineCore::sample(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows,
                                             const runner::StepLogits& logits, StepMeter& meter) {
  meter.sampling_begins();
  SampledTokens sampled{sample_tokens(batch, rows, logits, meter.stats()), {}};
  sampled.at = SteadyClock::now();
  check_stops(batch, sampled.step, sampled.at);
  meter.sampling_ends();
  return sampled;
}

// commit: each request is charged the forward pass it took part in (its
// `timings` report compute and communication apart), then the scheduler
// appends the tokens and hands back what finished.
std::vector<std::unique_ptr<sched::Sequence>> EngineCore::commit(const sched::ScheduledBatch& batch,
                                                                 const SampledTokens& sampled, const StepStats& stats) {
  const double compute_ms = stats.forward_ms - stats.forward_comm_ms;
  for (const sched::ScheduledSeq& s : batch.seqs) {
    const auto it = states_.find(s.seq->id);
    if (it != states_.end()) it->second.charge_forward(compute_ms, stats.forward_comm_ms);
  }
  return scheduler_->commit(batch, sampled.step, sampled.at);
}

// The step's metrics observers: the step's stats to the metrics and to the
// SLO admission's cost model.
void EngineCore::observe_step(const StepStats& stats) {
  metrics_.on_step(stats);
  if (slo_) slo_->observe_step(stats);
  ++num_steps_;
}

// Which logits rows each entry needs: the last where it samples, every row
// of a prefill chunk whose prompt log-probabilities are asked for, else
// none. Also records when each request was first scheduled.
std::vector<model::LogitRows> EngineCore::logit_rows(const sched::ScheduledBatch& batch, StepStats& stats) {
  std::vector<model::LogitRows> rows(batch.seqs.size());
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = batch.seqs[i];
    RequestState& state = states_.at(s.seq->id);
    state.note_scheduled(*s.seq, num_steps_);
    rows[i] = s.samples && !state.is_embedding() ? model::LogitRows::kLast : model::LogitRows::kNone;
    if (s.num_draft > 0 || state.wants_prompt_logits(s.start_pos, s.num_tokens)) rows[i] = model::LogitRows::kAll;
    (s.is_decode ? stats.decode_tokens : stats.prefill_tokens) += s.num_tokens - s.num_draft;
    stats.draft_tokens += s.num_draft;
  }
  stats.num_seqs = static_cast<int64_t>(batch.seqs.size());
  return rows;
}

std::vector<uint8_t> EngineCore::hidden_rows(const sched::ScheduledBatch& batch) {
  std::vector<uint8_t> hidden(batch.seqs.size(), 0);
  bool any = false;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = batch.seqs[i];
    hidden[i] = states_.at(s.seq->id).wants_hidden(s.start_pos, s.num_tokens);
    any = any || hidden[i] != 0;
  }
  if (!any) hidden.clear();
  return hidden;
}

// Records prompt log-probabilities from kAll rows and samples each sampling
// entry's next token from its last row; a sequence whose prefill completes
// here also samples the first token of each pending fork (parallel sample)
// from that row, by the fork's own state (its own seed).
sched::SampledStep EngineCore::sample_tokens(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows,
                                             const runner::StepLogits& logits, StepStats& stats) {
  sched::SampledStep sampled;
  sampled.entries.resize(batch.seqs.size());
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = batch.seqs[i];
    RequestState& state = states_.at(s.seq->id);
    if (rows[i] == model::LogitRows::kAll && s.num_draft == 0) {
      for (size_t j = 0; j < logits.num_rows(i); ++j)
        state.record_prompt_logprob(*s.seq, s.start_pos + static_cast<int64_t>(j), logits.row(i, j));
    }
    if (const std::span<const float> hidden = logits.hidden(i); !hidden.empty())
      state.record_hidden(s.start_pos, hidden);
    if (!s.samples) continue;
    sched::SampledEntry& entry = sampled.entries[i];
    if (state.is_embedding()) {
      // Nothing is generated: a placeholder token ends the request
      // (accept_token: kLength, as for max_tokens 0).
      entry.token = sched::SampledToken{s.seq->id, 0};
      continue;
    }
    if (s.num_draft > 0) {
      spec_->verify(s, logits, i, entry, stats);
      continue;
    }
    const std::span<const float> row = logits.last_row(i);
    entry.token = sched::SampledToken{s.seq->id, state.sample(row, sampler_scratch_)};
    for (uint64_t fork : s.seq->fork_ids) {
      RequestState& fork_state = states_.at(fork);
      fork_state.inherit_prefill(state);
      entry.forks.push_back(sched::SampledToken{fork, fork_state.sample(row, sampler_scratch_)});
      fork_parent_.erase(fork);
    }
    stats.sampled_tokens += 1 + static_cast<int64_t>(entry.forks.size());
  }
  return sampled;
}

// The stop decision of every sampled token (EOS, stop strings, sampler
// failure), made by its request's state; the scheduler adds max_tokens.
// verify() already decided those of entries with a draft.
void EngineCore::check_stops(const sched::ScheduledBatch& batch, sched::SampledStep& sampled,
                             SteadyClock::time_point now) {
  for (size_t i = 0; i < sampled.entries.size(); ++i) {
    sched::SampledEntry& e = sampled.entries[i];
    if (batch.seqs[i].num_draft > 0) continue;
    for (sched::SampledToken& f : e.forks) f.stop = states_.at(f.seq_id).accept_token(f.token, now, metrics_);
    if (e.token) e.token->stop = states_.at(e.token->seq_id).accept_token(e.token->token, now, metrics_);
  }
}

// Token events first, so that a finished request's final event follows its
// last token.
void EngineCore::emit(const sched::SampledStep& sampled, std::span<const std::unique_ptr<sched::Sequence>> finished,
                      SteadyClock::time_point now) {
  sampled.for_each_token([&](const sched::SampledToken& t) { states_.at(t.seq_id).emit_token(); });
  for (const std::unique_ptr<sched::Sequence>& seq : finished) finish_sequence(*seq, now);
}

void EngineCore::update_gauges() {
  const sched::SchedulerStats s = scheduler_->stats();
  SchedulerGauges g;
  g.running = s.num_running;
  g.waiting = s.num_waiting;
  g.paused = s.num_paused;
  g.free_seq_slots = s.free_seq_slots;
  g.kv_blocks_total = s.kv_blocks_total;
  g.kv_blocks_used = s.kv_blocks_used;
  g.kv_blocks_free = s.kv_blocks_free;
  g.kv_blocks_evictable = s.kv_blocks_evictable;
  g.kv_blocks_high_water = s.kv_blocks_high_water;
  g.kv_window_blocks_total = s.kv_window_blocks_total;
  g.kv_window_blocks_used = s.kv_window_blocks_used;
  g.prefix_cache_blocks = s.prefix_cache.blocks_held;
  g.preemptions = static_cast<uint64_t>(s.num_preemptions);
  g.kv_evicted_tokens = static_cast<uint64_t>(s.kv_evicted_tokens);
  g.prefix_cache_lookups = static_cast<uint64_t>(s.prefix_cache.lookups);
  g.prefix_cache_hit_tokens = static_cast<uint64_t>(s.prefix_cache.hit_tokens);
  g.prefix_cache_miss_tokens = static_cast<uint64_t>(s.prefix_cache.miss_tokens);
  g.prefix_cache_evictions = static_cast<uint64_t>(s.prefix_cache.evictions);
  metrics_.set_scheduler_gauges(g);
}

}  // namespace tokenmill::engine
