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
#include "eval/evaluator.h"
#include "eval/loaded_model.h"
#include "eval/report.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

using eval::LoadedModel;

void add_load_options(CLI::App* cmd, eval::LoadOptions& o) {
  cmd->add_option("-m,--model", o.model_path, "GGUF model")->required()->check(CLI::ExistingFile);
  cmd->add_option("--kv-dtype", o.kv_dtype, "KV cache type: " + kv::kv_dtype_choices())->capture_default_str();
  cmd->add_option("--runtime", o.runtime, "Weights runtime: auto (the file's) | dense | w8a8 | fp8_e4m3")
      ->capture_default_str();
  cmd->add_option("-t,--threads", o.threads, "Threads (default: all cores)");
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
  cmd->add_option("--tokens", f.tokens_file, "Token ids, one sequence per line (commas or spaces); each line's first id acts as BOS")
      ->check(CLI::ExistingFile);
  cmd->add_option("--max-tokens", f.max_tokens, "Use only the first N tokens");
  cmd->add_option("--ctx", f.ctx, "Window length")->capture_default_str();
  cmd->add_option("--stride", f.stride, "Window stride (default ctx/2)");
  cmd->add_option("-b,--batch", f.batch, "Tokens per forward call")->capture_default_str();
  cmd->add_option("--json", f.json_path, "Also write the results as JSON here");
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
}

}  // namespace tokenmill::cli
