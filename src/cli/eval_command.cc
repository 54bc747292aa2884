// `tokenmill eval ppl|kld|tasks|bench`: quality and speed measurements of a
// model as tokenmill runs it (weights runtime and KV type included). See
// eval/evaluator.h for the window scheme and docs/quantization.md for how
// the card uses them.
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "eval/evaluator.h"
#include "eval/loaded_model.h"
#include "eval/logit_math.h"
#include "eval/report.h"
#include "eval/tasks.h"
#include "model/single_sequence.h"
#include "tokenizer/tokenizer.h"
#include "util/clock.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

using eval::LoadedModel;

void add_load_options(CLI::App* cmd, eval::LoadOptions& o) {
  cmd->add_option("-m,--model", o.model_path, "GGUF model")->required()->check(CLI::ExistingFile);
  add_kv_dtype_option(*cmd, o.kv_dtype);
  add_runtime_option(*cmd, o.runtime);
  cmd->add_option("-t,--threads", o.threads, "Threads (default: all cores)");
  cmd->add_option("--lora", o.lora_path, "LoRA adapter GGUF applied to the model (not to --base)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--lora-scale", o.lora_scale, "Multiplier of the adapter's deltas")->capture_default_str();
  // The serving engine's definitions (engine_flags.h); each --batch is
  // one step of the policy.
  add_kv_policy_flags(*cmd, {o.kv_policy, o.kv_sinks, o.kv_window, o.kv_budget, o.kv_positions},
                      /*older_spelling=*/false);
}

struct EvalFlags {
  eval::LoadOptions load;
  std::string text_file;
  std::string tokens_file;
  int64_t max_tokens = 0;
  int64_t ctx = 512;
  int64_t stride = 0;
  int64_t batch = 64;
  std::string json_path;
  // kld only
  std::string base_path;
  std::string base_logits;
  std::string base_kv_dtype = "f32";
  std::string save_base_logits;
};

// The sequences to evaluate, at most max_tokens tokens in all.
eval::Sequences load_tokens(const EvalFlags& f, const model::Model& m) {
  if (f.text_file.empty() == f.tokens_file.empty()) fail("give exactly one of --text FILE or --tokens FILE");
  eval::Sequences seqs = f.text_file.empty() ? eval::parse_token_file(f.tokens_file)
                                             : eval::Sequences{eval::tokenize_text(m, read_text_file(f.text_file))};
  if (f.max_tokens <= 0) return seqs;
  eval::Sequences out;
  int64_t left = f.max_tokens;
  for (std::vector<int32_t>& s : seqs) {
    if (left < 2) break;
    if (static_cast<int64_t>(s.size()) > left) s.resize(static_cast<size_t>(left));
    left -= static_cast<int64_t>(s.size());
    out.push_back(std::move(s));
  }
  return out;
}

eval::EvalSpec spec_of(const EvalFlags& f) {
  eval::EvalSpec s;
  s.ctx = f.ctx;
  s.stride = f.stride;
  s.batch = f.batch;
  return s;
}

void finish(const EvalFlags& f, const eval::EvalResult& r, nlohmann::json info) {
  std::fputs(eval::format_result(r).c_str(), stdout);
  if (f.json_path.empty()) return;
  info["result"] = eval::result_json(r);
  eval::write_json_file(f.json_path, info);
}

void run_ppl(const EvalFlags& f) {
  LoadedModel m = eval::load_model(f.load);
  const eval::Sequences tokens = load_tokens(f, *m.model);
  ThreadPool pool(f.load.threads);
  const eval::EvalResult r = eval::evaluate(m.under_test(), nullptr, tokens, spec_of(f), pool);
  finish(f, r, {{"model", m.info()}});
}

void run_kld(const EvalFlags& f) {
  if (f.base_path.empty() == f.base_logits.empty()) fail("give exactly one of --base MODEL or --base-logits FILE");
  LoadedModel m = eval::load_model(f.load);
  ThreadPool pool(f.load.threads);
  if (!f.base_logits.empty()) {
    const eval::SavedLogits saved = eval::SavedLogits::open(f.base_logits);
    std::fprintf(stderr, "base: saved logits %s (%lld rows)\n", f.base_logits.c_str(),
                 static_cast<long long>(saved.num_rows()));
    const eval::EvalResult r = eval::evaluate_saved(m.under_test(), saved, f.batch, pool);
    finish(f, r, {{"model", m.info()}, {"base", f.base_logits}});
    return;
  }
  eval::LoadOptions bo;
  bo.model_path = f.base_path;
  bo.kv_dtype = f.base_kv_dtype;
  LoadedModel base = eval::load_model(bo, "base");
  const eval::Sequences tokens = load_tokens(f, *m.model);
  const eval::ModelUnderTest b = base.under_test();
  const eval::EvalResult r = eval::evaluate(m.under_test(), &b, tokens, spec_of(f), pool, f.save_base_logits);
  finish(f, r, {{"model", m.info()}, {"base", base.info()}});
}

void add_eval_options(CLI::App* cmd, EvalFlags& f) {
  add_load_options(cmd, f.load);
  cmd->add_option("--text", f.text_file, "Text file, tokenized with the model's tokenizer (BOS first)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokens", f.tokens_file,
                  "Token ids, one sequence per line (commas or spaces); each line's first id acts as BOS")
      ->check(CLI::ExistingFile);
  cmd->add_option("--max-tokens", f.max_tokens, "Use only the first N tokens");
  cmd->add_option("--ctx", f.ctx, "Window length")->capture_default_str();
  cmd->add_option("--stride", f.stride, "Window stride (default ctx/2)");
  cmd->add_option("-b,--batch", f.batch, "Tokens per forward call")->capture_default_str();
  cmd->add_option("--json", f.json_path, "Also write the results as JSON here");
}

struct TasksFlags {
  eval::LoadOptions load;
  std::string json_path;
};

void run_tasks(const TasksFlags& f) {
  LoadedModel m = eval::load_model(f.load);
  if (!tokenizer::Tokenizer::present_in(m.model->file())) fail("{}: the task sets need a tokenizer", f.load.model_path);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m.model->file());
  ThreadPool pool(f.load.threads);
  const std::vector<eval::TaskItem> items = eval::builtin_task_set();
  const eval::TaskResult r = eval::run_tasks(m.under_test(), tok, items, pool);
  nlohmann::json slices = nlohmann::json::array(), tasks = nlohmann::json::object();
  std::printf("%-12s %-18s %7s %7s\n", "task", "slice", "correct", "score");
  for (const eval::SliceScore& s : r.slices) {
    std::printf("%-12s %-18s %3lld/%-3lld %6.1f%%\n", s.task.c_str(), s.slice.c_str(),
                static_cast<long long>(s.correct), static_cast<long long>(s.total), 100.0 * s.score());
    slices.push_back({{"task", s.task}, {"slice", s.slice}, {"correct", s.correct}, {"total", s.total}});
  }
  for (const eval::SliceScore& s : r.tasks) tasks[s.task] = s.score();
  std::printf("(%zu items, %lld prompt and %lld generated tokens, %.1f s)\n", items.size(),
              static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.generated_tokens), r.seconds);
  if (f.json_path.empty()) return;
  nlohmann::json answers = nlohmann::json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    answers.push_back({{"task", items[i].task},
                       {"slice", items[i].slice},
                       {"expected", items[i].expected},
                       {"answer", r.answers[i]}});
  }
  eval::write_json_file(
      f.json_path,
      {{"model", m.info()}, {"tasks", tasks}, {"slices", slices}, {"answers", answers}, {"seconds", r.seconds}});
}

struct BenchFlags {
  eval::LoadOptions load;
  int64_t prompt_len = 128;
  int64_t gen = 32;
  int repeats = 2;
  std::string json_path;
};

// One prefill of prompt_len tokens (one forward call) then gen single-token
// decode steps; the best of `repeats` runs of each (least disturbed by the
// other processes of a shared machine).
void run_bench(const BenchFlags& f) {
  if (f.prompt_len < 1 || f.gen < 1 || f.repeats < 1) fail("--prompt-len, --gen and --repeats must be >= 1");
  LoadedModel m = eval::load_model(f.load);
  ThreadPool pool(f.load.threads);
  const int64_t n_vocab = m.model->config().n_vocab;
  std::vector<int32_t> prompt(static_cast<size_t>(f.prompt_len));
  for (int64_t i = 0; i < f.prompt_len; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>(1 + (i * 7919) % (n_vocab - 1));
  double best_prefill = 0, best_decode = 0;
  m.model->set_matmul_hook(m.hook.get());
  for (int rep = 0; rep < f.repeats; ++rep) {
    model::SingleSequence seq(*m.model, f.prompt_len + f.gen, m.kv_dtype);
    std::vector<float> logits;
    SteadyClock::time_point t0 = SteadyClock::now();
    seq.forward(prompt, false, logits, pool);
    best_prefill = std::max(best_prefill, static_cast<double>(f.prompt_len) / seconds_since(t0));
    t0 = SteadyClock::now();
    for (int64_t i = 0; i < f.gen; ++i) {
      const int32_t next = eval::argmax(logits.data(), n_vocab);
      seq.forward({&next, 1}, false, logits, pool);
    }
    best_decode = std::max(best_decode, static_cast<double>(f.gen) / seconds_since(t0));
  }
  m.model->set_matmul_hook(nullptr);
  std::printf("prefill %.1f tok/s (%lld tokens), decode %.2f tok/s (%lld tokens), %d threads, best of %d\n",
              best_prefill, static_cast<long long>(f.prompt_len), best_decode, static_cast<long long>(f.gen),
              pool.num_threads(), f.repeats);
  if (!f.json_path.empty()) {
    eval::write_json_file(f.json_path, {{"model", m.info()},
                                        {"prefill_tok_s", best_prefill},
                                        {"decode_tok_s", best_decode},
                                        {"prompt_len", f.prompt_len},
                                        {"gen", f.gen},
                                        {"threads", pool.num_threads()}});
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  CLI::App* eval = app.add_subcommand("eval", "Measure quality: perplexity, KL divergence, task sets, speed");
  eval->require_subcommand(1);

  auto ppl = std::make_shared<EvalFlags>();
  CLI::App* p = eval->add_subcommand("ppl", "Perplexity with a sliding window");
  add_eval_options(p, *ppl);
  p->callback([ppl] { run_ppl(*ppl); });

  auto kld = std::make_shared<EvalFlags>();
  CLI::App* k = eval->add_subcommand("kld", "KL divergence, top-1 agreement and delta PPL against a base");
  add_eval_options(k, *kld);
  k->add_option("--base", kld->base_path, "Base model (e.g. the F32/F16 original)")->check(CLI::ExistingFile);
  k->add_option("--base-logits", kld->base_logits, "Saved base logits (from --save-base-logits)")
      ->check(CLI::ExistingFile);
  k->add_option("--base-kv-dtype", kld->base_kv_dtype, "KV type of the base")->capture_default_str();
  k->add_option("--save-base-logits", kld->save_base_logits,
                "Save the base's scored logits here (n_scored x n_vocab floats)");
  k->callback([kld] { run_kld(*kld); });

  auto tasks = std::make_shared<TasksFlags>();
  CLI::App* t = eval->add_subcommand("tasks", "Fixed regression task sets: arithmetic, JSON, needle retrieval");
  add_load_options(t, tasks->load);
  t->add_option("--json", tasks->json_path, "Also write the scores and answers as JSON here");
  t->callback([tasks] { run_tasks(*tasks); });

  auto bench = std::make_shared<BenchFlags>();
  CLI::App* b = eval->add_subcommand("bench", "Prefill and decode speed of one sequence");
  add_load_options(b, bench->load);
  b->add_option("--prompt-len", bench->prompt_len, "Prompt tokens (one prefill call)")->capture_default_str();
  b->add_option("--gen", bench->gen, "Decode steps")->capture_default_str();
  b->add_option("--repeats", bench->repeats, "Runs; the best is reported")->capture_default_str();
  b->add_option("--json", bench->json_path, "Also write the figures as JSON here");
  b->callback([bench] { run_bench(*bench); });
}

}  // namespace tokenmill::cli
