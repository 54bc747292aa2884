// `tokenmill bench engine`: drives the in-process serving engine (no HTTP)
// with synthetic traffic and prints a table per scenario:
//   throughput  N concurrent sequences -> prefill and aggregate decode tok/s
//   prefix      16 requests sharing a long prefix, one per --interval seconds
//               -> mean TTFT with the prefix cache vs without
//   chunked     decode inter-token latency of running requests while a long
//               prompt arrives -> chunked vs unchunked prefill
//   decay       one stream, consecutive requests -> decode tok/s must not
//               fall as finished requests leave cached blocks behind
// Prompts are random token ids from a fixed --seed; generation is greedy
// with ignore_eos, so every request produces exactly its --gen-len tokens.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/token_clock.h"
#include "engine/engine.h"
#include "engine/memory_budget.h"
#include "model/lora_adapter.h"
#include "spec/cost_model.h"
#include "util/clock.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

using engine::Engine;
using engine::GenerateRequest;
using engine::GenerationResult;
using engine::RequestHandle;

struct BenchOptions {
  std::string model_path;
  std::string concurrency = "1,4,8,16,32";
  int64_t prompt_len = 128;
  int64_t gen_len = 128;
  std::string scenario = "throughput";
  double interval_s = 1.0;
  int64_t prefix_len = 512;
  int64_t suffix_len = 32;
  int64_t prefix_requests = 16;
  int64_t long_prompt_len = 2048;
  int64_t running = 4;
  int64_t decay_requests = 8;
  uint64_t seed = 1;
  std::string prompt_file;  // throughput: every request's prompt is this text
  // throughput: LoRA adapters the requests are spread over, round-robin
  // (request i uses adapter i mod N); none: the base model.
  std::vector<std::string> lora_paths;
  EngineFlags engine;  // shared with `serve` (engine_flags.h)
};

engine::EngineConfig engine_config(const BenchOptions& o) { return cli::engine_config(o.model_path, o.engine); }

class PromptSource {
 public:
  PromptSource(uint64_t seed, int64_t vocab) : rng_(seed), vocab_(vocab) {}
  // Random ids in [3, vocab): skips the usual <unk>, <s>, </s>.
  std::vector<int32_t> next(int64_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = static_cast<int32_t>(3 + rng_() % static_cast<uint64_t>(vocab_ - 3));
    return ids;
  }

 private:
  std::mt19937_64 rng_;
  int64_t vocab_;
};

GenerateRequest bench_request(std::vector<int32_t> prompt, int64_t gen_len) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = gen_len;
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  return r;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Fails with a clear message when a request could never run.
void require_ok(const GenerationResult& r, const char* what) {
  if (r.final.reason != engine::FinishReason::kLength && r.final.reason != engine::FinishReason::kStop) {
    fail("{} request ended with '{}': {}", what, engine::finish_reason_name(r.final.reason), r.final.error);
  }
}

void print_engine(const Engine& e, const BenchOptions& o) {
  const model::ModelConfig& c = e.model_config();
  std::printf(
      "model %s (%s, %lld layers, n_embd %lld, ctx %lld) | threads %d | max_seqs %d | max_batch_tokens %lld | "
      "prefill_chunk %lld | prefix cache %s\n%s\n",
      o.model_path.c_str(), c.arch_name.c_str(), static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd),
      static_cast<long long>(e.limits().max_model_len()), e.num_threads(), e.config().max_seqs,
      static_cast<long long>(e.config().max_batch_tokens), static_cast<long long>(e.config().prefill_chunk),
      e.config().prefix_cache ? "on" : "off", kv_summary(e).c_str());
}

void warm_up(Engine& e, PromptSource& prompts) { e.submit(bench_request(prompts.next(8), 4)).wait(); }

// ---- throughput -----------------------------------------------------------

// --prompt-file's text as the model's tokenizer encodes it (BOS as the model
// asks).
std::vector<int32_t> file_prompt(const Engine& e, const std::string& path) {
  if (e.tokenizer() == nullptr) fail("--prompt-file needs a model with a tokenizer");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--prompt-file {}: cannot read it", path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<int32_t> ids = e.tokenizer()->encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (ids.empty()) fail("--prompt-file {} is empty", path);
  return ids;
}

// --lora's adapters loaded for the engine's model, with a line each.
std::vector<std::shared_ptr<const model::LoraAdapter>> load_adapters(const Engine& e, const BenchOptions& o) {
  std::vector<std::shared_ptr<const model::LoraAdapter>> adapters;
  for (const std::string& path : o.lora_paths) {
    adapters.push_back(model::LoraAdapter::load(path, e.model(), path));
    const model::LoraAdapter& a = *adapters.back();
    std::printf("lora %s: %lld matrices, rank %lld, %.2f MB\n", path.c_str(), static_cast<long long>(a.num_adapted()),
                static_cast<long long>(a.max_rank()), static_cast<double>(a.tensor_bytes()) / 1e6);
  }
  return adapters;
}

// Steady decode: the tokens that arrived after every request of a level had
// its first one, and that window.
struct SteadyDecode {
  double tokens = 0;
  double window_ms = 0;
};

SteadyDecode steady_decode(const std::vector<std::unique_ptr<TokenClock>>& clocks, SteadyClock::time_point t0) {
  SteadyClock::time_point all_started = t0, last = t0;
  for (auto& clock : clocks) {
    all_started = std::max(all_started, clock->times().front());
    last = std::max(last, clock->times().back());
  }
  SteadyDecode d;
  for (auto& clock : clocks) {
    for (SteadyClock::time_point t : clock->times()) d.tokens += t > all_started ? 1 : 0;
  }
  d.window_ms = std::chrono::duration<double, std::milli>(last - all_started).count();
  return d;
}

// A level's speculation columns: accepted / proposed draft tokens, drafts,
// and the mean accepted length (accepted draft tokens per verified draft,
// from the histogram before and after the level).
std::string acceptance_columns(int64_t drafted, int64_t accepted, const engine::Histogram& before,
                               const engine::Histogram& after) {
  const double verified = static_cast<double>(after.count - before.count);
  return fmt::format(" {:10.1f} {:7d} {:10.2f}", drafted > 0 ? 100.0 * static_cast<double>(accepted) / drafted : 0.0,
                     drafted, verified > 0 ? (after.sum - before.sum) / verified : 0.0);
}

// A level's mean expert imbalance per step (empty when no MoE step ran).
std::string imbalance_column(const engine::MetricsSnapshot& start, const engine::MetricsSnapshot& end) {
  const uint64_t moe_steps = end.expert_steps - start.expert_steps;
  if (moe_steps == 0) return std::string();
  return fmt::format(" {:10.2f}",
                     (end.expert_imbalance_sum - start.expert_imbalance_sum) / static_cast<double>(moe_steps));
}

// The decode-step cost fit of speculation, and the batch size from which
// drafting stops paying at a few acceptance rates.
void print_spec_fit(const Engine& e) {
  const engine::MetricsSnapshot m = e.metrics();
  const double a = m.spec_step_fixed_ms, b = m.spec_step_per_token_ms, d = m.spec_draft_ms_per_token;
  auto switch_off = [&](double alpha) {
    const double n = spec::switch_off_batch(a, b, d, alpha);
    return std::isfinite(n) ? fmt::format("{:.0f}", n) : std::string("never");
  };
  std::printf(
      "\nspeculation cost fit (decode steps): %.2f ms + %.3f ms/token; drafting %.3f ms/draft token. "
      "No draft pays from a batch of N* = alpha a / (b (1 - alpha) + c) sequences: %s at alpha 0.5, %s at 0.8, "
      "%s at 0.95.\n",
      a, b, d, switch_off(0.5).c_str(), switch_off(0.8).c_str(), switch_off(0.95).c_str());
}

void print_throughput_notes(bool moe, bool spec) {
  std::printf(
      "\nprefill tok/s: all prompt tokens / the last TTFT. decode tok/s: tokens of all requests that "
      "arrived after every request had its first token / that window (steady-state decode).%s%s\n",
      moe ? " imbalance: the experts' load per step (per layer the busiest expert's tokens over the mean, averaged "
            "over layers and the level's steps; 1 = even)."
          : "",
      spec ? " accept %: accepted / proposed draft tokens of all requests; acc/draft: accepted tokens per "
             "verified draft (mean accepted length)."
           : "");
}

void run_throughput(const BenchOptions& o) {
  Engine e(engine_config(o));
  print_engine(e, o);
  const std::vector<std::shared_ptr<const model::LoraAdapter>> adapters = load_adapters(e, o);
  // Request i of a level runs with adapter i mod N (none without --lora).
  const auto request = [&](std::vector<int32_t> prompt, int32_t i) {
    GenerateRequest r = bench_request(std::move(prompt), o.gen_len);
    if (!adapters.empty()) r.adapter = adapters[static_cast<size_t>(i) % adapters.size()];
    return r;
  };
  PromptSource prompts(o.seed, e.model_config().n_vocab);
  warm_up(e, prompts);
  const std::vector<int32_t> fixed = o.prompt_file.empty() ? std::vector<int32_t>() : file_prompt(e, o.prompt_file);
  const int64_t prompt_len = fixed.empty() ? o.prompt_len : static_cast<int64_t>(fixed.size());
  const bool spec = e.config().spec.enabled();
  const bool moe = e.model_config().is_moe();
  std::printf("\n%11s %10s %10s %14s %14s %10s %10s %10s %8s%s%s\n", "concurrency", "prompt", "gen", "prefill tok/s",
              "decode tok/s", "TPOT ms", "TTFT ms", "TTFT p99", "wall s", moe ? "  imbalance" : "",
              spec ? "   accept %  drafts  acc/draft" : "");
  for (int32_t c : parse_id_list(o.concurrency)) {
    if (c < 1) fail("--concurrency values must be >= 1, got {}", c);
    const engine::Histogram accepted_before = e.metrics().spec_accepted_length;
    const engine::MetricsSnapshot level_start = e.metrics();
    const SteadyClock::time_point t0 = SteadyClock::now();
    std::vector<std::unique_ptr<TokenClock>> clocks;
    for (int32_t i = 0; i < c; ++i)
      clocks.push_back(
          std::make_unique<TokenClock>(e.submit(request(fixed.empty() ? prompts.next(o.prompt_len) : fixed, i))));
    std::vector<double> ttft, tpot;
    int64_t drafted = 0, accepted = 0;
    for (auto& clock : clocks) {
      const engine::FinalEvent f = clock->wait_final();
      ttft.push_back(f.timings.ttft_ms);
      tpot.push_back(f.timings.tpot_ms);
      drafted += f.spec.draft_tokens;
      accepted += f.spec.accepted_tokens;
    }
    const SteadyDecode decode = steady_decode(clocks, t0);
    const double wall = seconds_since(t0);
    const double max_ttft_s = *std::max_element(ttft.begin(), ttft.end()) / 1e3;
    const std::string acceptance =
        spec ? acceptance_columns(drafted, accepted, accepted_before, e.metrics().spec_accepted_length) : std::string();
    const std::string imbalance = imbalance_column(level_start, e.metrics());
    std::printf(
        "%11d %10lld %10lld %14.1f %14.1f %10.2f %10.1f %10.1f %8.2f%s%s%s\n", c, static_cast<long long>(prompt_len),
        static_cast<long long>(o.gen_len), static_cast<double>(c * prompt_len) / std::max(max_ttft_s, 1e-9),
        decode.tokens / std::max(decode.window_ms / 1e3, 1e-9), mean(tpot), mean(ttft), bench::percentile(ttft, 0.99),
        wall, imbalance.c_str(), acceptance.c_str(), c > e.config().max_seqs ? "  (queued: > max_seqs)" : "");
    std::fflush(stdout);
  }
  if (spec) print_spec_fit(e);
  print_throughput_notes(moe, spec);
}

// ---- prefix ---------------------------------------------------------------

struct PrefixRun {
  std::vector<double> ttft;
  double cached = 0;
  double wall = 0;
};

PrefixRun prefix_pass(const BenchOptions& o, bool cache) {
  BenchOptions oo = o;
  oo.engine.no_prefix_cache = !cache;
  Engine e(engine_config(oo));
  PromptSource prompts(o.seed, e.model_config().n_vocab);
  warm_up(e, prompts);
  const std::vector<int32_t> prefix = prompts.next(o.prefix_len);
  std::vector<RequestHandle> handles;
  const SteadyClock::time_point t0 = SteadyClock::now();
  for (int64_t i = 0; i < o.prefix_requests; ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<SteadyClock::duration>(
                                           std::chrono::duration<double>(o.interval_s * static_cast<double>(i))));
    std::vector<int32_t> prompt = prefix;
    const std::vector<int32_t> suffix = prompts.next(o.suffix_len);
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    handles.push_back(e.submit(bench_request(std::move(prompt), o.gen_len)));
  }
  PrefixRun run;
  for (RequestHandle& h : handles) {
    const GenerationResult r = h.wait();
    require_ok(r, "prefix");
    run.ttft.push_back(r.final.timings.ttft_ms);
    run.cached += static_cast<double>(r.final.usage.cached_prompt_tokens) / static_cast<double>(handles.size());
  }
  run.wall = seconds_since(t0);
  return run;
}

void run_prefix(const BenchOptions& o) {
  {
    Engine probe(engine_config(o));
    print_engine(probe, o);
  }
  std::printf(
      "\n%lld requests: shared %lld-token prefix + distinct %lld-token suffix, %lld generated, one every "
      "%.2f s\n\n",
      static_cast<long long>(o.prefix_requests), static_cast<long long>(o.prefix_len),
      static_cast<long long>(o.suffix_len), static_cast<long long>(o.gen_len), o.interval_s);
  std::printf("%14s %14s %12s %12s %12s %8s\n", "prefix cache", "mean TTFT ms", "p50 ms", "p99 ms", "cached tok",
              "wall s");
  double with = 0, without = 0;
  for (bool cache : {true, false}) {
    const PrefixRun r = prefix_pass(o, cache);
    std::printf("%14s %14.1f %12.1f %12.1f %12.1f %8.2f\n", cache ? "on" : "off", mean(r.ttft),
                bench::percentile(r.ttft, 0.5), bench::percentile(r.ttft, 0.99), r.cached, r.wall);
    std::fflush(stdout);
    (cache ? with : without) = mean(r.ttft);
  }
  std::printf("\nTTFT speed-up from the prefix cache: %.2fx\n", without / std::max(with, 1e-9));
}

// ---- chunked --------------------------------------------------------------

struct ChunkedRun {
  std::vector<double> gaps_ms;  // inter-token gaps of running requests while the long prompt prefilled
  double long_ttft_ms = 0;
};

ChunkedRun chunked_pass(const BenchOptions& o, int64_t chunk) {
  BenchOptions oo = o;
  oo.engine.prefill_chunk = chunk;
  // Unchunked, the whole prompt must fit one step next to the running decodes
  // (the scheduler runs decodes first), or it would wait for them to finish.
  if (chunk == 0) {
    oo.engine.max_batch_tokens = std::max(o.engine.max_batch_tokens, o.long_prompt_len + o.engine.max_seqs);
  }
  Engine e(engine_config(oo));
  PromptSource prompts(o.seed, e.model_config().n_vocab);
  warm_up(e, prompts);
  const int64_t room = e.limits().max_model_len() - o.prompt_len;
  if (o.long_prompt_len + 1 > e.limits().max_model_len() || room < 16)
    fail("the model context ({}) is too short for --long-prompt-len {} / --prompt-len {}", e.limits().max_model_len(),
         o.long_prompt_len, o.prompt_len);
  std::vector<std::unique_ptr<TokenClock>> running;
  for (int64_t i = 0; i < o.running; ++i)
    running.push_back(std::make_unique<TokenClock>(e.submit(bench_request(prompts.next(o.prompt_len), room))));
  for (auto& r : running) {
    while (r->count() < 4 && !r->handle().done()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const SteadyClock::time_point t_long = SteadyClock::now();
  const GenerationResult long_result = e.submit(bench_request(prompts.next(o.long_prompt_len), 1)).wait();
  require_ok(long_result, "long-prompt");
  const SteadyClock::time_point t_done = SteadyClock::now();
  for (auto& r : running) r->handle().cancel();
  ChunkedRun run;
  run.long_ttft_ms = long_result.final.timings.ttft_ms;
  for (auto& r : running) {
    const std::vector<SteadyClock::time_point> t = r->times();
    for (size_t i = 1; i < t.size(); ++i) {
      if (t[i] > t_long && t[i] <= t_done)
        run.gaps_ms.push_back(std::chrono::duration<double, std::milli>(t[i] - t[i - 1]).count());
    }
  }
  running.clear();  // joins the readers (their streams end with the cancel)
  return run;
}

void run_chunked(const BenchOptions& o) {
  {
    Engine probe(engine_config(o));
    print_engine(probe, o);
  }
  const int64_t chunk = o.engine.prefill_chunk > 0 ? o.engine.prefill_chunk : 256;
  std::printf("\n%lld running requests (prompt %lld) decoding while a %lld-token prompt arrives\n\n",
              static_cast<long long>(o.running), static_cast<long long>(o.prompt_len),
              static_cast<long long>(o.long_prompt_len));
  std::printf("%16s %10s %12s %12s %12s %16s\n", "prefill", "gaps", "TPOT p50 ms", "TPOT p99 ms", "max ms",
              "long TTFT ms");
  for (int64_t c : {chunk, int64_t{0}}) {
    const ChunkedRun r = chunked_pass(o, c);
    const std::string name = c > 0 ? "chunked " + std::to_string(c) : "unchunked";
    const double max_gap = r.gaps_ms.empty() ? 0.0 : *std::max_element(r.gaps_ms.begin(), r.gaps_ms.end());
    std::printf("%16s %10zu %12.2f %12.2f %12.2f %16.1f\n", name.c_str(), r.gaps_ms.size(),
                bench::percentile(r.gaps_ms, 0.5), bench::percentile(r.gaps_ms, 0.99), max_gap, r.long_ttft_ms);
    std::fflush(stdout);
  }
  std::printf(
      "\nTPOT here: gaps between consecutive tokens of the running requests while the long prompt "
      "was being prefilled.\n");
}

// ---- decay ----------------------------------------------------------------

void run_decay(const BenchOptions& o) {
  Engine e(engine_config(o));
  print_engine(e, o);
  PromptSource prompts(o.seed, e.model_config().n_vocab);
  warm_up(e, prompts);
  std::printf("\n%8s %12s %14s %10s %14s %12s\n", "request", "TTFT ms", "decode tok/s", "TPOT ms", "KV evictable",
              "KV free");
  std::vector<double> rates;
  for (int64_t i = 0; i < o.decay_requests; ++i) {
    const GenerationResult r = e.submit(bench_request(prompts.next(o.prompt_len), o.gen_len)).wait();
    require_ok(r, "decay");
    const double rate = r.final.timings.tpot_ms > 0 ? 1e3 / r.final.timings.tpot_ms : 0.0;
    rates.push_back(rate);
    const engine::MetricsSnapshot m = e.metrics();
    std::printf("%8lld %12.1f %14.1f %10.2f %14lld %12lld\n", static_cast<long long>(i + 1), r.final.timings.ttft_ms,
                rate, r.final.timings.tpot_ms, static_cast<long long>(m.kv_blocks_evictable),
                static_cast<long long>(m.kv_blocks_free));
    std::fflush(stdout);
  }
  if (rates.size() >= 2 && rates.front() > 0) {
    std::printf("\nlast / first decode rate: %.3f (should stay near 1)\n", rates.back() / rates.front());
  }
}

void run(const BenchOptions& o) {
  if (o.prompt_len < 1 || o.gen_len < 2) fail("--prompt-len must be >= 1 and --gen-len >= 2");
  if (o.scenario == "throughput") return run_throughput(o);
  if (o.scenario == "prefix") return run_prefix(o);
  if (o.scenario == "chunked") return run_chunked(o);
  if (o.scenario == "decay") return run_decay(o);
  fail("--scenario '{}': use throughput, prefix, chunked or decay", o.scenario);
}

}  // namespace

void add_bench_engine_command(CLI::App& app) {
  // `bench` may already hold other benchmarks (e.g. the HTTP driver).
  const std::vector<CLI::App*> found =
      app.get_subcommands([](const CLI::App* sub) { return sub->get_name() == "bench"; });
  CLI::App* bench = found.empty() ? nullptr : found.front();
  if (bench == nullptr) {
    bench = app.add_subcommand("bench", "Benchmarks");
    bench->require_subcommand(1);
  }
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench->add_subcommand("engine", "Benchmark the in-process serving engine (no HTTP)");
  cmd->add_option("-m,--model", o->model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--scenario", o->scenario, "throughput|prefix|chunked|decay")->capture_default_str();
  cmd->add_option("--concurrency", o->concurrency, "throughput: concurrent requests, a list")->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens per request")->capture_default_str();
  cmd->add_option("--gen-len", o->gen_len, "Generated tokens per request")->capture_default_str();
  cmd->add_option("--interval", o->interval_s, "prefix: seconds between arrivals")->capture_default_str();
  cmd->add_option("--prefix-len", o->prefix_len, "prefix: shared prefix tokens")->capture_default_str();
  cmd->add_option("--suffix-len", o->suffix_len, "prefix: distinct suffix tokens")->capture_default_str();
  cmd->add_option("--prefix-requests", o->prefix_requests, "prefix: requests")->capture_default_str();
  cmd->add_option("--long-prompt-len", o->long_prompt_len, "chunked: the arriving prompt")->capture_default_str();
  cmd->add_option("--running", o->running, "chunked: requests decoding meanwhile")->capture_default_str();
  cmd->add_option("--decay-requests", o->decay_requests, "decay: consecutive requests")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_option("--prompt-file", o->prompt_file, "throughput: every request's prompt is this file's text")
      ->check(CLI::ExistingFile);
  cmd->add_option("--lora", o->lora_paths,
                  "throughput: LoRA adapter files; request i of each level uses adapter i mod N")
      ->check(CLI::ExistingFile);
  add_engine_flags(*cmd, o->engine, EngineFlagSet::kBench);
  cmd->callback([o] {
    if (!o->lora_paths.empty() && o->scenario != "throughput") fail("--lora is for --scenario throughput");
    run(*o);
  });
}

}  // namespace tokenmill::cli
