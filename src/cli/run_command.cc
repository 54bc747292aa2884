// `tokenmill run`: generate from one prompt, streaming text to stdout, then a
// one-line timing summary on stderr. A client of the serving engine with one
// sequence: the same scheduler, sampler and text stream as the server, so
// the same request gives the same text.
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/lora_flags.h"
#include "engine/engine.h"
#include "gguf/reader.h"
#include "kv/kv_dtype.h"
#include "model/config.h"
#include "sched/admission.h"
#include "server/chat_prompt.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct RunOptions {
  std::string model_path;
  std::string prompt;
  std::string prompt_file;
  std::string prompt_ids;
  std::string system_prompt;
  std::string chat_template;
  bool chat = false;
  bool print_ids = false;
  int64_t n_predict = 128;
  int64_t batch = 0;  // -b: the prefill chunk and the step's tokens; 0 = the engine flags' (512 when neither is given)
  std::optional<uint64_t> seed;
  std::vector<std::string> logit_bias;
  sample::SamplingParams sampling;
  LoraFlags lora;
  // The serving engine's flags, as serve and bench engine take them
  // (engine_flags.h); -c is the context (0: prompt + n_predict).
  EngineFlags engine;
  // Which of them the command line gave (run picks its own defaults for
  // the others: one sequence, a KV pool of exactly its context).
  bool kv_size_given = false;
  bool batch_given = false;
  bool step_given = false;
  bool positions_given = false;
};

std::vector<std::pair<int32_t, float>> parse_logit_bias(const std::vector<std::string>& items) {
  std::vector<std::pair<int32_t, float>> out;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) fail("--logit-bias '{}': expected ID=VALUE (e.g. 15=-inf)", item);
    const std::vector<int32_t> id = parse_id_list(item.substr(0, eq));
    const std::string value = item.substr(eq + 1);
    float v = 0.0f;
    try {
      v = std::stof(value);  // accepts "-inf"
    } catch (const std::exception&) {
      fail("--logit-bias '{}': '{}' is not a number", item, value);
    }
    out.emplace_back(id.at(0), v);
  }
  return out;
}

std::vector<int32_t> prompt_tokens(const RunOptions& o, const tokenizer::Tokenizer* tok, const gguf::GgufFile& file) {
  const int given = !o.prompt.empty() + !o.prompt_file.empty() + !o.prompt_ids.empty();
  if (given != 1) fail("give exactly one of -p PROMPT, -f FILE or --prompt-ids IDS");
  if (!o.prompt_ids.empty()) {
    if (o.chat) fail("--chat needs a text prompt, not --prompt-ids");
    return parse_id_list(o.prompt_ids);
  }
  if (tok == nullptr) fail("{}: the model has no tokenizer; use --prompt-ids", file.name());
  const std::string text = o.prompt_file.empty() ? o.prompt : read_text_file(o.prompt_file);
  if (!o.chat) return tok->encode(text, /*add_special=*/true, /*parse_special=*/false);
  // The server's template choice and rendering, so that `run --chat` and
  // /v1/chat/completions see the same prompt.
  const std::optional<server::ChatFormat> format = server::select_chat_format(o.chat_template, file, tok);
  if (!format) fail("{}: no recognisable chat template; pass --chat-template NAME", file.name());
  std::vector<tokenizer::ChatMessage> messages;
  if (!o.system_prompt.empty()) messages.push_back({"system", o.system_prompt});
  messages.push_back({"user", text});
  return server::chat_prompt_tokens(*format, *tok, server::plain_conversation(messages), server::ChatRenderOptions{});
}

// Past the trained context a KV policy that evicts must re-rotate, and
// the positions it spans (sinks, window and one step) must fit the trained
// context: picks rerotate and the largest fitting step unless the command
// line chose them, and says in one line what to change when they cannot.
void fit_policy_past_context(RunOptions& o, int64_t context, int64_t n_ctx_train) {
  EngineFlags& f = o.engine;
  const kv::KvPolicy probe = kv_policy(f);
  if (!probe.evicts() || context <= n_ctx_train) return;
  if (f.kv_positions != "rerotate") {
    if (o.positions_given)
      fail(
          "{} tokens run past the model's trained context of {}: --kv-positions preserve stops there; use "
          "--kv-positions rerotate",
          context, n_ctx_train);
    f.kv_positions = "rerotate";
    std::fprintf(stderr, "[--kv-policy %s past the trained context of %lld tokens: --kv-positions rerotate]\n",
                 f.kv_policy.c_str(), static_cast<long long>(n_ctx_train));
  }
  const int64_t bs = f.block_size;
  auto span = [&](int64_t step) { return kv_policy(f).max_blocks(bs, step) * bs; };
  int64_t step = sched::max_step_tokens(f.max_batch_tokens, f.prefill_chunk);
  if (span(step) <= n_ctx_train) return;
  if (o.step_given)
    fail(
        "--kv-policy {} with steps of {} tokens spans {} positions, more than the trained context of {}: use a "
        "smaller -b or --kv-window",
        f.kv_policy, step, span(step), n_ctx_train);
  while (step > 1 && span(step) > n_ctx_train) step = std::max<int64_t>(step / 2, 1);
  if (span(step) > n_ctx_train)
    fail(
        "--kv-policy {} keeps {} positions, more than the trained context of {}: use a smaller --kv-window or "
        "--kv-sinks{}",
        f.kv_policy, span(step), n_ctx_train, f.kv_policy == "h2o" ? " or --kv-budget" : "");
  f.prefill_chunk = step;
  f.max_batch_tokens = step;
}

// One sequence on the serving engine, sized for it: one sequence, a KV
// pool of exactly the blocks it can hold (unless --kv-memory or
// --kv-fraction says otherwise), prefill chunks of -b tokens; every other
// engine flag as given.
engine::EngineConfig run_engine_config(RunOptions& o, int64_t context, int64_t n_ctx_train) {
  EngineFlags& f = o.engine;
  if (o.batch_given) {
    f.prefill_chunk = o.batch;
    f.max_batch_tokens = o.batch;
  } else if (!o.step_given) {
    f.prefill_chunk = 512;
    f.max_batch_tokens = 512;
  }
  fit_policy_past_context(o, context, n_ctx_train);
  // -c beyond the model's context extends it (with a warning unless RoPE is
  // scaled); the context of this one request is the sequence's limit.
  engine::EngineConfig c = engine_config(o.model_path, f);
  c.max_model_len = context;
  c.max_seqs = 1;
  c.prefix_cache = false;
  if (!o.kv_size_given) {
    int64_t blocks = (context + c.block_size - 1) / c.block_size;
    if (c.kv_policy.evicts())
      blocks = std::min(
          blocks, c.kv_policy.max_blocks(c.block_size, sched::max_step_tokens(c.max_batch_tokens, c.prefill_chunk)));
    c.kv_num_blocks = blocks;
  }
  c.validate();
  return c;
}

// The timing line (and the speculation line) on stderr.
void print_summary(const engine::Engine& engine, const engine::FinalEvent& final, int64_t prompt_len,
                   int64_t num_generated, uint64_t seed, SteadyClock::time_point start) {
  const engine::Timings& t = final.timings;
  // Decode rate counts the forward steps after the first token.
  const double decode_steps = static_cast<double>(std::max<int64_t>(num_generated - 1, 0));
  std::fprintf(stderr,
               "prompt %lld tokens | prefill %.1f tok/s | TTFT %.1f ms | generated %lld tokens | "
               "decode %.1f tok/s | threads %d | runtime %s | KV %s | seed %llu | total %.2f s\n",
               static_cast<long long>(prompt_len), prompt_len / std::max(t.prefill_ms * 1e-3, 1e-9), t.ttft_ms,
               static_cast<long long>(num_generated), decode_steps / std::max(t.decode_ms * 1e-3, 1e-9),
               engine.num_threads(), runtime_name(engine.matmul_hook()).c_str(),
               std::string(kv::kv_dtype_name(engine.config().kv_dtype)).c_str(), static_cast<unsigned long long>(seed),
               seconds_since(start));
  if (engine.config().spec.enabled()) {
    const engine::SpecStats& sp = final.spec;
    std::fprintf(stderr, "speculative %s: %lld draft tokens, %lld accepted (%.1f %%)\n",
                 std::string(spec::spec_method_name(engine.config().spec.method)).c_str(),
                 static_cast<long long>(sp.draft_tokens), static_cast<long long>(sp.accepted_tokens),
                 sp.draft_tokens > 0 ? 100.0 * static_cast<double>(sp.accepted_tokens) / sp.draft_tokens : 0.0);
  }
}

// Streams the request's tokens (as text while they come, or their ids at
// the end) and returns the ids generated and the final event; a refused or
// failed request is an Error.
std::pair<std::vector<int32_t>, engine::FinalEvent> stream_output(engine::RequestHandle& handle, const RunOptions& o,
                                                                  bool show_text) {
  std::vector<int32_t> generated;
  std::optional<engine::FinalEvent> final;
  while (std::optional<engine::StreamEvent> e = handle.next()) {
    if (e->final) {
      final = std::move(e->final);
      break;
    }
    if (o.n_predict == 0) continue;
    generated.push_back(e->token->token);
    if (show_text) {
      std::fputs(e->token->text.c_str(), stdout);
      std::fflush(stdout);
    }
  }
  TM_CHECK(final.has_value());
  if (final->reason == engine::FinishReason::kRejected || final->reason == engine::FinishReason::kError)
    fail("{}", final->error);
  if (o.print_ids) {
    std::printf("%s\n", format_id_list(generated).c_str());
  } else if (show_text) {
    std::fputs(final->text.c_str(), stdout);
    std::fputs("\n", stdout);
  }
  std::fflush(stdout);
  return {std::move(generated), std::move(*final)};
}

void run(RunOptions o) {
  const SteadyClock::time_point start = SteadyClock::now();
  if (o.n_predict < 0) fail("-n must be >= 0, got {}", o.n_predict);
  if (o.batch_given && o.batch < 1) fail("--batch must be >= 1, got {}", o.batch);
  std::vector<int32_t> prompt;
  std::shared_ptr<const tokenizer::Tokenizer> tok;
  int64_t n_ctx_train = 0;
  {
    // The prompt decides the context (and so the KV pool) the engine is
    // built with: tokenize from the file's metadata before loading weights;
    // the engine reuses the tokenizer.
    const gguf::GgufFile file = gguf::GgufFile::open(o.model_path);
    if (tokenizer::Tokenizer::present_in(file))
      tok = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(file));
    prompt = prompt_tokens(o, tok.get(), file);
    n_ctx_train = model::ModelConfig::from_gguf(file).n_ctx_train;
  }
  if (prompt.empty()) fail("the prompt is empty");
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  // -n 0 still runs the prefill (and samples one token, not shown).
  const int64_t wanted = std::max<int64_t>(o.n_predict, 1);
  const int64_t context = o.engine.max_model_len > 0 ? o.engine.max_model_len : prompt_len + wanted;
  engine::EngineConfig config = run_engine_config(o, context, n_ctx_train);
  warn_about_rope(o.model_path, config.rope);
  config.tokenizer = std::move(tok);
  engine::Engine engine(config);
  // The context, capped by the model's; a policy that re-rotates runs past it.
  const int64_t max_len =
      sched::runs_past_context(engine.limits().capacity) ? context : engine.limits().max_model_len();
  if (prompt_len >= max_len) fail("the prompt has {} tokens but the context holds {}", prompt_len, max_len);

  engine::GenerateRequest request;
  request.prompt = std::move(prompt);
  request.max_tokens = std::min(wanted, max_len - prompt_len);
  request.sampling = o.sampling;
  request.sampling.seed = o.seed ? *o.seed : std::random_device{}();
  request.sampling.logit_bias = parse_logit_bias(o.logit_bias);
  request.adapter = load_lora(o.lora, engine.model());
  engine::RequestHandle handle = engine.submit(request);

  const bool show_text = o.n_predict > 0 && !o.print_ids && engine.tokenizer() != nullptr;
  const auto [generated, final] = stream_output(handle, o, show_text);
  if (final.reason == engine::FinishReason::kLength && request.max_tokens < wanted)
    std::fprintf(stderr, "[context full at %lld tokens]\n", static_cast<long long>(max_len));

  print_summary(engine, final, prompt_len, static_cast<int64_t>(generated.size()), request.sampling.seed, start);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt with a GGUF model");
  cmd->add_option("-m,--model", opts->model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--prompt", opts->prompt, "Prompt text");
  cmd->add_option("-f,--file", opts->prompt_file, "Read the prompt from a file")->check(CLI::ExistingFile);
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Prompt as token ids, e.g. 1,403,407");
  cmd->add_flag("--print-ids", opts->print_ids, "Print generated token ids (comma-separated) instead of text");
  cmd->add_flag("--chat", opts->chat, "Wrap the prompt in the model's chat template");
  cmd->add_option("--system", opts->system_prompt, "System message for --chat");
  cmd->add_option("--chat-template,--chat-template-file", opts->chat_template,
                  "A Jinja chat template file, or a preset: gemma|llama2|llama3|chatml|mistral|phi3 "
                  "(default: the GGUF's own template)");
  cmd->add_option("-n,--n-predict", opts->n_predict, "Tokens to generate")->capture_default_str();
  add_engine_flags(*cmd, opts->engine, EngineFlagSet::kRun);
  add_lora_options(*cmd, opts->lora);
  cmd->add_option("-b,--batch", opts->batch,
                  "Prefill chunk and step size in tokens (default 512; sets --prefill-chunk and --max-batch-tokens)");
  cmd->add_option("-s,--seed", opts->seed, "Sampling seed (default: random, printed)");
  auto& s = opts->sampling;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.top_p = 0.95f;
  s.min_p = 0.05f;
  cmd->add_option("--temp", s.temperature, "Temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "Top-k; 0 = off")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "Top-p; 1 = off")->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "Min-p; 0 = off")->capture_default_str();
  cmd->add_option("--repeat-penalty", s.repetition_penalty, "Repetition penalty; 1 = off")->capture_default_str();
  cmd->add_option("--repeat-last-n", s.penalty_last_n, "Penalty window; -1 = all")->capture_default_str();
  cmd->add_option("--frequency-penalty", s.frequency_penalty)->capture_default_str();
  cmd->add_option("--presence-penalty", s.presence_penalty)->capture_default_str();
  cmd->add_option("--logit-bias", opts->logit_bias, "ID=VALUE, repeatable; -inf bans a token");
  cmd->add_option("--stop", s.stop, "Stop string, repeatable");
  cmd->add_flag("--ignore-eos", s.ignore_eos, "Keep generating past end-of-generation tokens");
  cmd->callback([opts, cmd] {
    opts->kv_size_given = cmd->count("--kv-memory") > 0 || cmd->count("--kv-fraction") > 0;
    opts->step_given =
        cmd->count("--batch") > 0 || cmd->count("--prefill-chunk") > 0 || cmd->count("--max-batch-tokens") > 0;
    opts->positions_given = cmd->count("--kv-positions") > 0;
    run(*opts);
  });
}

}  // namespace tokenmill::cli
