// Test helpers for the scheduler: a deterministic fake "model" that keeps
// one token id per KV slot and predicts the next token from what it reads
// back through the block table, and a driver for the
// schedule -> run -> commit loop on a virtual clock.
//
// Because predictions are computed from the fake KV contents (not from the
// Sequence's own token list), any mistake in block tables, copy-on-write,
// prefix-cache hits or preemption/recompute changes the generated tokens,
// and the tests compare against reference_generate().
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "sched/scheduler.h"

namespace tokenmill::sched::sched_test {

// The fake model's next-token function: depends on every token and its
// position. Values in [1, 1000).
inline int32_t next_token(std::span<const int32_t> tokens) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < tokens.size(); ++i) {
    h ^= static_cast<uint64_t>(tokens[i]) * 31 + i;
    h *= 1099511628211ull;
  }
  return static_cast<int32_t>(h % 999) + 1;
}

// The first token of fork k (k >= 1) of a sequence whose own first token is
// `first`: a different value, so that forks diverge from their first write.
inline int32_t fork_token(int32_t first, size_t k) { return static_cast<int32_t>((first + 97 * k) % 999) + 1; }

// What an ideal engine produces: n tokens continuing `prompt`.
inline std::vector<int32_t> reference_generate(std::vector<int32_t> tokens, int64_t n) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = next_token(tokens);
    out.push_back(t);
    tokens.push_back(t);
  }
  return out;
}

// With two KV groups (window > 0) it keeps a second slot array for the
// window pool, writes every token to both, and reads the positions the
// chunk's first query attends (from start_pos - window + 1 on) back through
// the window table, the older ones through the full table.
//
// Under a KV policy that evicts (each sequence's own, Sequence::policy()),
// a token lives at cache index p - kv_evicted, and what a step reads back
// must be kept tokens in their order: for streaming exactly the sinks and
// then the recent run; for h2o any subsequence that keeps the sinks and
// the newest positions. Each slot also records the true position written
// there and the RoPE position its key was "rotated" at: the true
// position (kPreserve), or the cache index, moved by the batch's key
// shifts (kRerotate); every read checks it, so a shift applied to a shared
// block or a missed one shows. For h2o it plays the attention kernels'
// part: each step adds to its attention-mass table (which, like the model
// runner's, the Scheduler is handed), for every cached position, a weight of
// its token (3 for multiples of 5, else 0.1), so some blocks are heavy.
class FakeModel {
 public:
  FakeModel(int32_t num_blocks, int32_t block_size, int32_t num_window_blocks = 0, int64_t window = 0)
      : block_size_(block_size),
        window_(window),
        slots_(static_cast<size_t>(num_blocks) * block_size, -1),
        window_slots_(static_cast<size_t>(num_window_blocks) * block_size, -1),
        rope_(slots_.size(), -1),
        window_rope_(window_slots_.size(), -1),
        true_pos_(slots_.size(), -1),
        window_true_pos_(window_slots_.size(), -1) {}

  static float mass_weight(int32_t token) { return token % 5 == 0 ? 3.0f : 0.1f; }

  SampledStep run(const ScheduledBatch& batch) {
    apply(batch.copies.at(0), slots_, rope_, true_pos_);
    if (window_ > 0) apply(batch.copies.at(1), window_slots_, window_rope_, window_true_pos_);
    if (!batch.key_shifts.empty()) shift(batch.key_shifts.at(0), rope_);
    if (window_ > 0 && batch.key_shifts.size() > 1) shift(batch.key_shifts.at(1), window_rope_);
    for (const ScheduledSeq& s : batch.seqs) write(s);
    SampledStep sampled;
    sampled.entries.resize(batch.seqs.size());
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      if (batch.seqs[i].samples) predict(batch.seqs[i], sampled.entries[i]);
    }
    return sampled;
  }

  // The entry's K/V (and, for h2o, its attention mass).
  void write(const ScheduledSeq& s) {
    const std::vector<int32_t> tokens = s.tokens();
    const bool rerotate = rerotates(*s.seq);
    for (int64_t p = s.start_pos; p < s.start_pos + s.num_tokens; ++p) {
      const int64_t c = p - s.seq->kv_evicted;
      const int64_t rope = rerotate ? c : p;
      slot(*s.seq, c) = tokens[static_cast<size_t>(p - s.start_pos)];
      rope_[slot_index(*s.seq, c)] = rope;
      true_pos_[slot_index(*s.seq, c)] = p;
      if (window_ > 0) {
        window_slot(*s.seq, c) = tokens[static_cast<size_t>(p - s.start_pos)];
        window_rope_[window_slot_index(*s.seq, c)] = rope;
        window_true_pos_[window_slot_index(*s.seq, c)] = p;
      }
    }
    if (s.seq->policy().needs_attention_mass()) {
      const int64_t end = s.start_pos - s.seq->kv_evicted + s.num_tokens;
      const std::span<float> mass = mass_.resize(s.seq->id, end);
      for (int64_t c = 0; c < end; ++c) mass[static_cast<size_t>(c)] += mass_weight(slot(*s.seq, c));
    }
  }

  // Checks what the entry reads (contents, positions, key rotations), then
  // predicts its token(s) from it, verifying its draft.
  void predict(const ScheduledSeq& s, SampledEntry& e) {
    const kv::KvPolicy& policy = s.seq->policy();
    const int64_t evicted = s.seq->kv_evicted;
    const int64_t sinks = policy.evicts() ? policy.sink_blocks(block_size_) * block_size_ : 0;
    std::vector<int32_t> all = s.seq->all_tokens();
    all.insert(all.end(), s.seq->draft.begin(), s.seq->draft.begin() + s.num_draft);
    const int64_t start = s.start_pos - evicted;
    const int64_t window_start = window_ > 0 ? std::max<int64_t>(0, start - window_ + 1) : INT64_MAX;
    std::vector<int32_t> seen, known;
    std::vector<int64_t> rope_seen, rope_expected, pos_seen;
    for (int64_t c = 0; c < start + s.num_tokens; ++c) {
      const bool in_window = c >= window_start;
      const size_t i = in_window ? window_slot_index(*s.seq, c) : slot_index(*s.seq, c);
      seen.push_back(in_window ? window_slots_[i] : slots_[i]);
      rope_seen.push_back(in_window ? window_rope_[i] : rope_[i]);
      const int64_t p = in_window ? window_true_pos_[i] : true_pos_[i];
      pos_seen.push_back(p);
      known.push_back(p >= 0 && p < std::ssize(all) ? all[static_cast<size_t>(p)] : -1);
      rope_expected.push_back(rerotates(*s.seq) ? c : p);
    }
    // The kept positions: streaming keeps the sinks, then one run up to
    // the newest; h2o any increasing subsequence with the sinks and the
    // step's own positions.
    std::vector<int64_t> pos_expected;
    if (policy.kind == kv::KvPolicyKind::kHeavyHitter) {
      pos_expected = pos_seen;
      EXPECT_TRUE(std::is_sorted(pos_seen.begin(), pos_seen.end()) &&
                  std::adjacent_find(pos_seen.begin(), pos_seen.end()) == pos_seen.end())
          << "kept positions out of order in request " << s.seq->id;
      for (int64_t j = 0; j < s.num_tokens; ++j)
        EXPECT_EQ(pos_seen[static_cast<size_t>(start + j)], s.start_pos + j) << "request " << s.seq->id;
      EXPECT_EQ(std::ssize(pos_seen), s.start_pos + s.num_tokens - evicted);
    } else {
      for (int64_t c = 0; c < start + s.num_tokens; ++c) pos_expected.push_back(c < sinks ? c : c + evicted);
    }
    for (int64_t c = 0; c < std::min<int64_t>(sinks, std::ssize(pos_seen)); ++c)
      EXPECT_EQ(pos_seen[static_cast<size_t>(c)], c) << "sink " << c << " of request " << s.seq->id;
    EXPECT_EQ(pos_seen, pos_expected) << "kept positions of request " << s.seq->id;
    EXPECT_EQ(seen, known) << "KV contents of request " << s.seq->id;
    EXPECT_EQ(rope_seen, rope_expected) << "key positions of request " << s.seq->id;
    for (int64_t j = 0; j <= s.num_draft; ++j) {
      const int64_t end = start + s.num_tokens - s.num_draft + j;  // positions the prediction reads
      const int32_t t = next_token(std::span<const int32_t>(seen).first(static_cast<size_t>(end)));
      if (j == s.num_draft || t != s.seq->draft[static_cast<size_t>(j)]) {
        e.token = SampledToken{s.seq->id, t};
        break;
      }
      e.accepted.push_back(SampledToken{s.seq->id, t});
    }
  }

  // The attention mass its steps add to (the Scheduler's, through Driver).
  AttentionMass& mass() { return mass_; }

 private:
  static bool rerotates(const Sequence& seq) {
    return seq.policy().evicts() && seq.policy().positions == kv::KvPositions::kRerotate;
  }
  void apply(const std::vector<kv::BlockCopy>& copies, std::vector<int32_t>& slots, std::vector<int64_t>& rope,
             std::vector<int64_t>& true_pos) const {
    for (const kv::BlockCopy& c : copies) {
      std::copy_n(slots.begin() + c.src * block_size_, block_size_, slots.begin() + c.dst * block_size_);
      std::copy_n(rope.begin() + c.src * block_size_, block_size_, rope.begin() + c.dst * block_size_);
      std::copy_n(true_pos.begin() + c.src * block_size_, block_size_, true_pos.begin() + c.dst * block_size_);
    }
  }
  void shift(const std::vector<kv::KeyShift>& shifts, std::vector<int64_t>& rope) const {
    for (const kv::KeyShift& k : shifts) {
      for (int32_t r = 0; r < block_size_; ++r) rope[static_cast<size_t>(k.block) * block_size_ + r] += k.delta;
    }
  }
  size_t slot_index(const Sequence& seq, int64_t pos) const {
    const kv::BlockId b = seq.table(0).blocks().at(static_cast<size_t>(pos / block_size_));
    return static_cast<size_t>(b) * block_size_ + pos % block_size_;
  }
  int32_t& slot(const Sequence& seq, int64_t pos) { return slots_[slot_index(seq, pos)]; }
  // .at() fails loudly when the position is not held (dropped too early).
  size_t window_slot_index(const Sequence& seq, int64_t pos) const {
    const int64_t i = pos / block_size_ - seq.table(1).first_block();
    EXPECT_GE(i, 0) << "window position " << pos << " of request " << seq.id << " was dropped";
    const kv::BlockId b = seq.table(1).blocks().at(static_cast<size_t>(std::max<int64_t>(0, i)));
    return static_cast<size_t>(b) * block_size_ + pos % block_size_;
  }
  int32_t& window_slot(const Sequence& seq, int64_t pos) { return window_slots_[window_slot_index(seq, pos)]; }

  int32_t block_size_;
  int64_t window_;
  AttentionMass mass_;
  std::vector<int32_t> slots_;
  std::vector<int32_t> window_slots_;
  std::vector<int64_t> rope_;
  std::vector<int64_t> window_rope_;
  std::vector<int64_t> true_pos_;
  std::vector<int64_t> window_true_pos_;
};

// One scheduled entry, copied out of a batch (the Sequence may be gone).
struct Entry {
  uint64_t id;
  int64_t start;
  int64_t n;
  bool samples;
  bool decode;
  bool operator==(const Entry&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const Entry& e) {
  return os << "{id " << e.id << " start " << e.start << " n " << e.n << (e.samples ? " S" : "")
            << (e.decode ? " D" : "") << "}";
}

inline std::unique_ptr<Sequence> make_seq(uint64_t id, int64_t prompt_len, int64_t max_tokens, int priority = 1,
                                          int32_t first_token = -1) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->max_tokens = max_tokens;
  s->priority = priority;
  for (int64_t i = 0; i < prompt_len; ++i) {
    s->prompt.push_back(first_token >= 0 ? first_token + static_cast<int32_t>(i)
                                         : static_cast<int32_t>((id * 7919 + i * 13) % 1000));
  }
  return s;
}

class Driver {
 public:
  explicit Driver(const SchedulerConfig& config)
      : model(config.kv_groups.at(0).num_blocks, config.block_size,
              config.kv_groups.size() > 1 ? config.kv_groups[1].num_blocks : 0,
              config.kv_groups.size() > 1 ? config.kv_groups[1].window : 0),
        sched(config, &model.mass()),
        now(TimePoint{} + std::chrono::seconds(1000)) {}

  // add(); expects acceptance.
  void add(std::unique_ptr<Sequence> seq) {
    const uint64_t id = seq->id;
    std::unique_ptr<Sequence> rejected = sched.add(std::move(seq), now);
    ASSERT_EQ(rejected, nullptr) << "request " << id << " rejected: " << rejected->error;
  }

  // One engine step; advances the clock by `dt` afterwards. Returns what ran.
  std::vector<Entry> step(std::chrono::milliseconds dt = std::chrono::milliseconds(1)) {
    if (propose) {
      sched.for_each_running([&](Sequence& s) { s.draft = s.is_decoding() ? propose(s) : std::vector<int32_t>(); });
    }
    ScheduledBatch batch = sched.schedule(now);
    EXPECT_LE(batch.num_tokens(), sched.config().max_batch_tokens);
    EXPECT_LE(static_cast<int64_t>(batch.seqs.size()), sched.config().max_seqs);
    EXPECT_LE(sched.num_running(), sched.config().max_seqs);
    num_preempted += static_cast<int64_t>(batch.preempted.size());
    num_copies += static_cast<int64_t>(batch.num_copies());
    for (const auto& group : batch.key_shifts) num_key_shifts += std::ssize(group);
    for (auto& f : batch.finished) finished.push_back(std::move(f));
    for (PrefixLookup& p : batch.prefix_lookups) prefix_lookups.push_back(std::move(p));
    std::vector<Entry> ran;
    for (const ScheduledSeq& s : batch.seqs) {
      ran.push_back({s.seq->id, s.start_pos, s.num_tokens, s.samples, s.is_decode});
      num_draft_tokens += s.num_draft;
    }
    if (!batch.empty()) {
      SampledStep sampled = model.run(batch);
      // Forks: each gets its own first token (fork_token), as the engine
      // samples each from the same row with its own seed.
      for (size_t i = 0; i < batch.seqs.size(); ++i) {
        const Sequence& s = *batch.seqs[i].seq;
        SampledEntry& e = sampled.entries[i];
        if (!e.token) continue;
        for (size_t k = 0; k < s.fork_ids.size(); ++k) {
          e.forks.push_back({s.fork_ids[k], fork_token(e.token->token, k + 1)});
          forked.push_back(s.fork_ids[k]);
        }
      }
      if (stop) {
        for (SampledEntry& e : sampled.entries) {
          for (SampledToken& f : e.forks) f.stop = stop(f);
          if (e.token) e.token->stop = stop(*e.token);
        }
      }
      for (const SampledEntry& e : sampled.entries) num_accepted_tokens += static_cast<int64_t>(e.accepted.size());
      for (auto& f : sched.commit(batch, sampled, now)) finished.push_back(std::move(f));
    }
    now += dt;
    ++steps;
    return ran;
  }

  // Steps until no work is left (or max_steps). Returns the steps taken.
  int run_to_completion(int max_steps = 10000) {
    int n = 0;
    while (sched.has_work() && n < max_steps) {
      step();
      ++n;
    }
    return n;
  }

  bool is_fork(uint64_t id) const { return std::find(forked.begin(), forked.end(), id) != forked.end(); }

  // A finished sequence's output is the reference's continuation; a fork's
  // after its own first token.
  void expect_reference(const Sequence& s) const {
    if (!is_fork(s.id) || s.output.empty()) {
      EXPECT_EQ(s.output, reference_generate(s.prompt, s.num_output_tokens())) << "request " << s.id;
      return;
    }
    std::vector<int32_t> head = s.prompt;
    head.push_back(s.output[0]);
    const std::vector<int32_t> tail(s.output.begin() + 1, s.output.end());
    EXPECT_EQ(tail, reference_generate(head, s.num_output_tokens() - 1)) << "fork " << s.id;
  }

  const Sequence* finished_seq(uint64_t id) const {
    for (const auto& f : finished) {
      if (f->id == id) return f.get();
    }
    return nullptr;
  }

  FakeModel model;  // before sched: it owns the attention mass the scheduler is handed
  Scheduler sched;
  // The engine's stop decision per sampled token (EOS, stop strings); none
  // when empty.
  std::function<FinishReason(const SampledToken&)> stop;
  // Speculative decoding: a draft for each decoding sequence before each
  // step (the engine's propose phase); none when empty.
  std::function<std::vector<int32_t>(const Sequence&)> propose;
  int64_t num_draft_tokens = 0;
  int64_t num_copies = 0;      // block copies the steps asked for
  int64_t num_key_shifts = 0;  // key shifts (KV policy kRerotate)
  int64_t num_accepted_tokens = 0;
  TimePoint now;
  std::vector<std::unique_ptr<Sequence>> finished;
  std::vector<uint64_t> forked;              // ids of the sequences made by forks
  std::vector<PrefixLookup> prefix_lookups;  // every batch's, in order
  int64_t num_preempted = 0;
  int steps = 0;
};

}  // namespace tokenmill::sched::sched_test

namespace tokenmill::sched::sched_test {

// A SampledStep of plain tokens (no forks, no stops), one per entry of
// `batch`: tokens[i] must be set exactly where batch.seqs[i].samples.
inline SampledStep sampled_tokens(const ScheduledBatch& batch, const std::vector<std::optional<int32_t>>& tokens) {
  SampledStep step;
  step.entries.resize(batch.seqs.size());
  for (size_t i = 0; i < batch.seqs.size() && i < tokens.size(); ++i) {
    if (tokens[i]) step.entries[i].token = SampledToken{batch.seqs[i].seq->id, *tokens[i]};
  }
  return step;
}

// One pool without a window, no prefix cache: the configuration most
// scheduler tests start from.
inline SchedulerConfig config(int32_t num_blocks, int32_t block_size, int64_t max_batch_tokens, int32_t max_seqs,
                              int64_t prefill_chunk = 0) {
  SchedulerConfig c;
  c.kv_groups = {{num_blocks, 0}};
  c.block_size = block_size;
  c.max_batch_tokens = max_batch_tokens;
  c.max_seqs = max_seqs;
  c.prefill_chunk = prefill_chunk;
  c.enable_prefix_cache = false;
  return c;
}

// The finished request `id` produced reference_generate's n tokens.
inline void expect_reference_output(const Driver& d, uint64_t id, int64_t n) {
  const Sequence* s = d.finished_seq(id);
  ASSERT_NE(s, nullptr) << "request " << id << " did not finish";
  EXPECT_EQ(s->output, reference_generate(s->prompt, n)) << "request " << id;
}

}  // namespace tokenmill::sched::sched_test
