// `tokenmill bench model`: llama-bench-style throughput of one model file.
//
//   pp<P>  prefill: P tokens in one forward step into an empty cache (the
//          prompt phase), rate = P / seconds.
//   tg<N>  decode: N forward steps of one token each from an empty cache,
//          rate = N / seconds.
// Each test runs one warm-up repetition (excluded) and then -r timed ones;
// the table shows mean ± sample stddev of the per-repetition rates, as
// llama-bench does, and the median. It also measures the machine's memory
// read bandwidth (a STREAM-like sum over a buffer much larger than the last
// level cache, one contiguous share per thread) and prints the decode
// roofline: tg rate x weight bytes read per token / bandwidth.
//
// On a machine shared with other jobs the wall clock also counts time the
// threads waited to be scheduled, so the command prints "cpu-normalised"
// rates too: tokens / (process CPU seconds / threads). They are an upper
// bound of what an idle machine would give, not a replacement for it.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "gguf/tensor_type.h"
#include "kernels/dispatch.h"
#include "kv/kv_dtype.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace tokenmill::cli {
namespace {

struct BenchModelOptions {
  std::string model_path;
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int threads = 0;
  int reps = 5;
  std::string kv_dtype = "f16";
  std::string runtime = "auto";
  RopeFlags rope;
  int64_t ctx_size = 0;          // 0: the model's context
  int64_t bandwidth_mib = 1024;  // 0: skip the bandwidth measurement
};

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Stats {
  double mean = 0, stddev = 0, median = 0;
};

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(v.size() - 1)) : 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

// Bytes of weights one decode step reads: every matrix and vector of every
// layer, the output norm and matrix, and one embedding row; of a
// mixture-of-experts layer the router, the shared expert and the
// n_expert_used experts one token runs through.
int64_t weight_bytes_per_token(const model::ModelWeights& w, int64_t experts_per_token) {
  const auto matrix = [](const kernels::WeightView& m) {
    return m.data == nullptr ? int64_t{0} : m.rows * gguf::row_bytes(m.type, m.cols);
  };
  const auto vec = [](const model::VectorView& v) { return v.size * static_cast<int64_t>(sizeof(float)); };
  int64_t total = matrix(w.output) + vec(w.output_norm) + gguf::row_bytes(w.tok_embd.type, w.tok_embd.cols);
  for (const model::LayerWeights& l : w.layers) {
    total += matrix(l.wq) + matrix(l.wk) + matrix(l.wv) + matrix(l.wo) + matrix(l.w_gate) + matrix(l.w_up) +
             matrix(l.w_down) + matrix(l.router) + matrix(l.gate_shexp) + matrix(l.up_shexp) + matrix(l.down_shexp) +
             vec(l.shexp_gate);
    if (!l.gate_exps.empty())
      total += experts_per_token * (matrix(l.gate_exps[0]) + matrix(l.up_exps[0]) + matrix(l.down_exps[0]));
    for (const model::VectorView* v :
         {&l.attn_norm, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm, &l.post_attn_norm, &l.ffn_norm, &l.post_ffn_norm}) {
      total += vec(*v);
    }
  }
  return total;
}

// weight_bytes_per_token with the matrices a runtime holds counted as it
// holds them (packed FP8 is ~1.03 bytes per weight, not BF16's 2): the
// hook's weight_bytes() covers every matrix the forward multiplies by.
int64_t runtime_bytes_per_token(const model::ModelWeights& w, int64_t experts_per_token,
                                const quant::WeightRuntimeHook* hook) {
  const int64_t total = weight_bytes_per_token(w, experts_per_token);
  if (hook == nullptr) return total;
  int64_t matrices = w.output.data == nullptr ? 0 : w.output.rows * gguf::row_bytes(w.output.type, w.output.cols);
  for (const model::LayerWeights& l : w.layers) {
    for (const kernels::WeightView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      matrices += m->data == nullptr ? 0 : m->rows * gguf::row_bytes(m->type, m->cols);
    }
  }
  return total - matrices + hook->weight_bytes();
}

// The type most of the weight bytes are in, for the table ("Q4_0").
std::string main_type(const gguf::GgufFile& file) {
  std::vector<int64_t> bytes(64, 0);
  for (const gguf::TensorInfo& t : file.tensors()) {
    const auto i = static_cast<size_t>(t.type);
    if (i < bytes.size()) bytes[i] += static_cast<int64_t>(t.num_bytes);
  }
  const auto it = std::max_element(bytes.begin(), bytes.end());
  return std::string(gguf::tensor_type_name(static_cast<gguf::TensorType>(it - bytes.begin())));
}

// Read bandwidth in GB/s: best of `reps` passes of all threads summing their
// contiguous share of a `bytes` buffer (8 independent accumulators, so the
// loop is bound by memory, not by add latency).
double read_bandwidth_gbs(int64_t bytes, ThreadPool& pool, int reps) {
  const int64_t words = bytes / 8;
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(64, static_cast<size_t>(words * 8)));
  if (buf == nullptr) fail("cannot allocate {} MiB for the bandwidth test", bytes >> 20);
  std::unique_ptr<uint64_t, decltype(&std::free)> owner(buf, &std::free);
  pool.parallel_for(pool.num_threads(), [&](int, int64_t b, int64_t e) {
    const int64_t w0 = words * b / pool.num_threads(), w1 = words * e / pool.num_threads();
    for (int64_t i = w0; i < w1; ++i) buf[i] = static_cast<uint64_t>(i);  // each thread faults its own pages
  });
  std::vector<uint64_t> sums(static_cast<size_t>(pool.num_threads()));
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const SteadyClock::time_point start = SteadyClock::now();
    pool.parallel_for(pool.num_threads(), [&](int, int64_t b, int64_t e) {
      const int64_t w0 = words * b / pool.num_threads() / 8 * 8, w1 = words * e / pool.num_threads() / 8 * 8;
      uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t i = w0; i < w1; i += 8) {
        for (int k = 0; k < 8; ++k) acc[k] += buf[i + k];
      }
      uint64_t s = 0;
      for (uint64_t a : acc) s += a;
      sums[static_cast<size_t>(b)] = s;
    });
    best = std::max(best, static_cast<double>(words / 8 * 8 * 8) / seconds_since(start) * 1e-9);
  }
  static volatile uint64_t sink;  // keeps the sums, so the reads are not optimised away
  for (uint64_t s : sums) sink = sink + s;
  return best;
}

struct TestResult {
  Stats rate, cpu_rate;
};

// One test: fresh cache per repetition; `steps` forward calls of `chunk`
// tokens each. Rates in tokens per second.
TestResult run_test(model::Model& m, kv::KvDtype dtype, int64_t chunk, int64_t steps, int reps, ThreadPool& pool) {
  const int64_t n_vocab = m.config().n_vocab;
  std::vector<int32_t> tokens(static_cast<size_t>(chunk * steps));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(1 + (i * 7919) % (n_vocab - 1));
  std::vector<float> logits;
  std::vector<double> rates, cpu_rates;
  for (int r = 0; r <= reps; ++r) {  // r == 0: warm-up
    model::SingleSequence seq(m, chunk * steps, dtype);
    const double cpu0 = process_cpu_seconds();
    const SteadyClock::time_point start = SteadyClock::now();
    for (int64_t s = 0; s < steps; ++s) {
      seq.forward({tokens.data() + s * chunk, static_cast<size_t>(chunk)}, model::LogitRows::kLast, logits, pool);
    }
    const double wall = seconds_since(start);
    const double cpu = (process_cpu_seconds() - cpu0) / pool.num_threads();
    if (r == 0) continue;
    rates.push_back(static_cast<double>(chunk * steps) / wall);
    cpu_rates.push_back(static_cast<double>(chunk * steps) / std::max(cpu, 1e-9));
  }
  return {stats_of(rates), stats_of(cpu_rates)};
}

void print_row(const std::string& name, const std::string& type, double gib, double params_b, int threads,
               const std::string& test, const TestResult& r) {
  std::printf("| %-24s | %-7s | %8.2f GiB | %7.2f B | %7d | %6s | %9.2f ± %-6.2f | %9.2f | %9.2f |\n", name.c_str(),
              type.c_str(), gib, params_b, threads, test.c_str(), r.rate.mean, r.rate.stddev, r.rate.median,
              r.cpu_rate.median);
}

void bench_model(const BenchModelOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0) fail("-p and -n must be >= 0");
  if (o.reps < 1) fail("-r must be >= 1, got {}", o.reps);
  if (o.bandwidth_mib < 0) fail("--bandwidth-mib must be >= 0");
  const kv::KvDtype dtype = parse_kv_dtype(o.kv_dtype);
  const std::unique_ptr<RuntimeModel> loaded =
      load_runtime_model(o.model_path, o.runtime, rope_overrides(o.rope, o.ctx_size));
  model::Model* m = &loaded->model();
  const int64_t ctx = std::max(o.n_prompt, o.n_gen);
  if (ctx > m->config().n_ctx_train) fail("-p/-n {} exceed the model's context of {}", ctx, m->config().n_ctx_train);
  ThreadPool pool(o.threads);

  int64_t file_bytes = 0, params = 0;
  for (const gguf::TensorInfo& t : m->file().tensors()) {
    file_bytes += static_cast<int64_t>(t.num_bytes);
    params += t.num_elements();
  }
  std::string name = o.model_path.substr(o.model_path.find_last_of('/') + 1);
  const std::string type = main_type(m->file());
  const double gib = static_cast<double>(file_bytes) / (1 << 30);
  std::printf(
      "kernels: %s | weights runtime: %s | threads: %d | kv cache: %s, %lld bytes/token | repetitions: %d "
      "(+1 warm-up)\n",
      std::string(kernels::isa_name(kernels::active_kernels().isa)).c_str(), loaded->runtime_name().c_str(),
      pool.num_threads(), std::string(kv::kv_dtype_name(dtype)).c_str(),
      static_cast<long long>(m->kv_geometry(16, dtype).bytes_per_token()), o.reps);
  std::printf("| %-24s | %-7s | %12s | %9s | %7s | %6s | %18s | %9s | %9s |\n", "model", "type", "size", "params",
              "threads", "test", "t/s (mean ± sd)", "median", "cpu-norm");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(26, '-').c_str(), std::string(9, '-').c_str(),
              std::string(14, '-').c_str(), std::string(11, '-').c_str(), std::string(9, '-').c_str(),
              std::string(8, '-').c_str(), std::string(20, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str());
  const double pb = static_cast<double>(params) * 1e-9;
  if (o.n_prompt > 0) {
    print_row(name, type, gib, pb, pool.num_threads(), "pp" + std::to_string(o.n_prompt),
              run_test(*m, dtype, o.n_prompt, 1, o.reps, pool));
  }
  TestResult tg;
  if (o.n_gen > 0) {
    tg = run_test(*m, dtype, 1, o.n_gen, o.reps, pool);
    print_row(name, type, gib, pb, pool.num_threads(), "tg" + std::to_string(o.n_gen), tg);
  }
  std::fflush(stdout);
  const int64_t per_token = runtime_bytes_per_token(m->weights(), m->config().n_expert_used, loaded->hook());
  std::printf("weights read per decoded token: %.1f MB\n", static_cast<double>(per_token) * 1e-6);
  if (o.bandwidth_mib > 0) {
    const double bw = read_bandwidth_gbs(o.bandwidth_mib << 20, pool, 5);
    std::printf("memory read bandwidth (%d threads, %lld MiB buffer, best of 5): %.1f GB/s\n", pool.num_threads(),
                static_cast<long long>(o.bandwidth_mib), bw);
    if (o.n_gen > 0) {
      const double roofline = bw * 1e9 / static_cast<double>(per_token);
      std::printf("decode roofline %.1f tok/s; tg at %.0f %% of it (median %.0f %%)\n", roofline,
                  100.0 * tg.rate.mean / roofline, 100.0 * tg.rate.median / roofline);
    }
  }
}

}  // namespace

void add_bench_model_command(CLI::App& app) {
  CLI::App* bench = nullptr;
  for (CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return s->get_name() == "bench"; })) bench = sub;
  if (bench == nullptr) {
    bench = app.add_subcommand("bench", "Benchmarks");
    bench->require_subcommand(1);
  }
  auto o = std::make_shared<BenchModelOptions>();
  CLI::App* cmd =
      bench->add_subcommand("model", "Prefill (pp) and decode (tg) throughput of a model, llama-bench style");
  cmd->add_option("-m,--model", o->model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens of the pp test (0: skip)")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n_gen, "Generated tokens of the tg test (0: skip)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: all cores)");
  cmd->add_option("-c,--ctx-size", o->ctx_size,
                  "Context (default: the model's; beyond it warns unless RoPE is scaled)");
  add_rope_flags(*cmd, o->rope);
  cmd->add_option("-r,--repetitions", o->reps, "Timed repetitions per test")->capture_default_str();
  add_kv_dtype_option(*cmd, o->kv_dtype);
  add_runtime_option(*cmd, o->runtime);
  cmd->add_option("--bandwidth-mib", o->bandwidth_mib, "Buffer of the bandwidth test in MiB (0: skip)")
      ->capture_default_str();
  cmd->callback([o] { bench_model(*o); });
}

}  // namespace tokenmill::cli
