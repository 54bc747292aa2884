#include "eval/evaluator.h"

#include <cstring>
#include <functional>
#include <memory>

#include "eval/logit_math.h"
#include "eval/windows.h"
#include "gguf/writer.h"
#include "model/single_sequence.h"
#include "util/clock.h"
#include "util/error.h"

namespace tokenmill::eval {
namespace {

// One model stepping through a window in batches.
class Runner {
 public:
  Runner(const ModelUnderTest& m, int64_t length, int64_t batch, ThreadPool& pool)
      : m_(m), seq_(*m.model, length, m.kv_dtype, m.kv_policy, batch, &pool) {
    seq_.set_adapter(m.adapter);
  }
  // Feeds input[pos, pos + n); logits rows of all n tokens when `rows`.
  const std::vector<float>& step(std::span<const int32_t> input, bool rows, ThreadPool& pool) {
    m_.model->set_matmul_hook(m_.hook);
    seq_.forward(input, rows ? model::LogitRows::kAll : model::LogitRows::kNone, logits_, pool);
    m_.model->set_matmul_hook(nullptr);
    return logits_;
  }

 private:
  ModelUnderTest m_;
  model::SingleSequence seq_;
  std::vector<float> logits_;
};

void check_model(const ModelUnderTest& m, int64_t n_vocab, int64_t ctx, const Sequences& seqs) {
  const model::ModelConfig& c = m.model->config();
  if (c.n_vocab != n_vocab) fail("the models' vocabularies differ ({} vs {} tokens)", c.n_vocab, n_vocab);
  // A re-rotating policy keeps positions below its own bound (checked by
  // SingleSequence), so its windows may be longer than the training context.
  if (ctx > c.n_ctx_train && !m.kv_policy.bounds_positions())
    fail(
        "--ctx {} exceeds the model's training context {} (only a KV policy with --kv-positions rerotate runs past it)",
        ctx, c.n_ctx_train);
  if (seqs.empty()) fail("no sequences to evaluate");
  for (const std::vector<int32_t>& s : seqs) {
    for (int32_t t : s) {
      if (t < 0 || t >= n_vocab) fail("token id {} is outside the vocabulary [0, {})", t, n_vocab);
    }
  }
}

// Scores one row: target, model logits, optional base logits.
void score(PositionBuckets& b, int64_t position, int32_t target, const float* logits, const float* base, int64_t n) {
  const double nll = negative_log_likelihood(logits, n, target);
  if (base == nullptr) {
    b.add(position, nll, 0.0, -1.0, false);
    return;
  }
  b.add(position, nll, negative_log_likelihood(base, n, target), kl_divergence(base, logits, n),
        argmax(base, n) == argmax(logits, n));
}

std::vector<int32_t> window_input(std::span<const int32_t> tokens, const Window& w) {
  std::vector<int32_t> in = {tokens[0]};
  in.insert(in.end(), tokens.begin() + w.begin, tokens.begin() + w.end - 1);
  return in;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Runs one window through `m` (and `base`, in lockstep) and calls
// on_row(row, model_logits, base_logits_or_null) for every scored row.
void run_window(const ModelUnderTest& m, const ModelUnderTest* base, std::span<const int32_t> tokens, const Window& w,
                int64_t batch, ThreadPool& pool,
                const std::function<void(int64_t, const float*, const float*)>& on_row) {
  const std::vector<int32_t> in = window_input(tokens, w);
  const int64_t len = static_cast<int64_t>(in.size()), first = w.first_scored_row();
  const int64_t n_vocab = m.model->config().n_vocab;
  Runner run(m, len, batch, pool);
  std::unique_ptr<Runner> run_base = base ? std::make_unique<Runner>(*base, len, batch, pool) : nullptr;
  for (int64_t pos = 0; pos < len; pos += batch) {
    const int64_t n = std::min(batch, len - pos);
    const bool rows = pos + n > first;  // logits only for batches that hold scored rows
    const std::span<const int32_t> chunk(in.data() + pos, static_cast<size_t>(n));
    const std::vector<float>& lm = run.step(chunk, rows, pool);
    const std::vector<float>* lb = run_base ? &run_base->step(chunk, rows, pool) : nullptr;
    if (!rows) continue;
    for (int64_t row = std::max(pos, first); row < pos + n; ++row) {
      on_row(row, lm.data() + (row - pos) * n_vocab, lb ? lb->data() + (row - pos) * n_vocab : nullptr);
    }
  }
}

void write_saved(const std::string& path, const Sequences& seqs, const EvalSpec& spec, int64_t n_vocab, int64_t rows,
                 std::vector<uint8_t> logits) {
  gguf::GgufWriter w;
  w.set("general.type", gguf::Value::str("tokenmill.logits"));
  w.set("tokenmill.eval.ctx", gguf::Value::u32(static_cast<uint32_t>(spec.ctx)));
  w.set("tokenmill.eval.stride", gguf::Value::u32(static_cast<uint32_t>(spec.effective_stride())));
  std::vector<float> ids, lengths;  // ids as floats: exact below 2^24
  for (const std::vector<int32_t>& s : seqs) {
    lengths.push_back(static_cast<float>(s.size()));
    for (int32_t t : s) ids.push_back(static_cast<float>(t));
  }
  w.add_tensor("tokens", gguf::TensorType::F32, {static_cast<int64_t>(ids.size())}, f32_bytes(ids));
  w.add_tensor("lengths", gguf::TensorType::F32, {static_cast<int64_t>(lengths.size())}, f32_bytes(lengths));
  w.add_tensor("logits", gguf::TensorType::F32, {n_vocab, rows}, std::move(logits));
  w.write(path);
}

}  // namespace

EvalResult evaluate(const ModelUnderTest& m, const ModelUnderTest* base, const Sequences& seqs, const EvalSpec& spec,
                    ThreadPool& pool, const std::string& save_path) {
  const SteadyClock::time_point start = SteadyClock::now();
  const int64_t n_vocab = m.model->config().n_vocab;
  check_model(m, n_vocab, spec.ctx, seqs);
  if (base != nullptr) check_model(*base, n_vocab, spec.ctx, seqs);
  if (!save_path.empty() && base == nullptr) fail("saving base logits needs a base model");
  if (spec.batch < 1) fail("--batch must be >= 1");
  EvalResult r;
  r.buckets = PositionBuckets(spec.ctx);
  std::vector<uint8_t> saved;
  for (const std::vector<int32_t>& tokens : seqs) {
    for (const Window& w : plan_windows(static_cast<int64_t>(tokens.size()), spec.ctx, spec.effective_stride())) {
      run_window(m, base, tokens, w, spec.batch, pool, [&](int64_t row, const float* lm, const float* lb) {
        score(r.buckets, row, tokens[w.begin + row], lm, lb, n_vocab);
        if (!save_path.empty()) {
          const auto* bytes = reinterpret_cast<const uint8_t*>(lb);
          saved.insert(saved.end(), bytes, bytes + n_vocab * sizeof(float));
        }
        ++r.num_scored;
      });
      ++r.num_windows;
    }
  }
  if (!save_path.empty()) write_saved(save_path, seqs, spec, n_vocab, r.num_scored, std::move(saved));
  r.seconds = seconds_since(start);
  return r;
}

SavedLogits SavedLogits::open(const std::string& path) {
  SavedLogits s(gguf::GgufFile::open(path));
  const gguf::GgufFile& f = s.file_;
  if (f.get_string_or("general.type", "") != "tokenmill.logits") fail("{}: not a saved-logits file", path);
  s.ctx_ = f.get_int("tokenmill.eval.ctx");
  s.stride_ = f.get_int("tokenmill.eval.stride");
  const gguf::TensorInfo& tok = f.tensor("tokens");
  const gguf::TensorInfo& len = f.tensor("lengths");
  const gguf::TensorInfo& lg = f.tensor("logits");
  if (tok.type != gguf::TensorType::F32 || len.type != gguf::TensorType::F32 || lg.type != gguf::TensorType::F32 ||
      lg.num_dims != 2)
    fail("{}: tensors 'tokens', 'lengths' and 'logits' must be F32 (logits 2-D)", path);
  const auto* ids = reinterpret_cast<const float*>(tok.data);
  const auto* lengths = reinterpret_cast<const float*>(len.data);
  int64_t at = 0;
  for (int64_t i = 0; i < len.num_elements(); ++i) {
    const int64_t n = static_cast<int64_t>(lengths[i]);
    if (n < 0 || at + n > tok.num_elements()) fail("{}: sequence lengths exceed the tokens", path);
    std::vector<int32_t> seq;
    for (int64_t k = at; k < at + n; ++k) seq.push_back(static_cast<int32_t>(ids[k]));
    s.sequences_.push_back(std::move(seq));
    at += n;
  }
  s.n_vocab_ = lg.dims[0];
  s.num_rows_ = lg.dims[1];
  s.logits_ = reinterpret_cast<const float*>(lg.data);
  return s;
}

EvalResult evaluate_saved(const ModelUnderTest& m, const SavedLogits& base, int64_t batch, ThreadPool& pool) {
  const SteadyClock::time_point start = SteadyClock::now();
  const int64_t n_vocab = m.model->config().n_vocab;
  if (base.n_vocab() != n_vocab) fail("saved logits have {} columns, the model {} tokens", base.n_vocab(), n_vocab);
  if (batch < 1) fail("--batch must be >= 1");
  check_model(m, n_vocab, base.ctx(), base.sequences());
  EvalResult r;
  r.buckets = PositionBuckets(base.ctx());
  for (const std::vector<int32_t>& tokens : base.sequences()) {
    for (const Window& w : plan_windows(static_cast<int64_t>(tokens.size()), base.ctx(), base.stride())) {
      run_window(m, nullptr, tokens, w, batch, pool, [&](int64_t row, const float* lm, const float*) {
        if (r.num_scored >= base.num_rows()) fail("saved logits hold fewer rows than their windows score");
        score(r.buckets, row, tokens[w.begin + row], lm, base.row(r.num_scored), n_vocab);
        ++r.num_scored;
      });
      ++r.num_windows;
    }
  }
  if (r.num_scored != base.num_rows())
    fail("saved logits hold {} rows, the windows score {}", base.num_rows(), r.num_scored);
  r.seconds = seconds_since(start);
  return r;
}

}  // namespace tokenmill::eval
