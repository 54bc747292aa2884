// `tokenmill run`: generate from one prompt, streaming text to stdout, then a
// one-line timing summary on stderr. Single sequence; the serving engine runs
// many at once.
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "kv/kv_dtype.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "sample/sampler.h"
#include "sample/stop_criteria.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
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
  int64_t ctx_size = 0;  // 0: prompt + n_predict, capped by the model's context
  int64_t batch = 512;
  std::string kv_dtype = "f16";
  std::string runtime = "auto";
  int threads = 0;
  std::optional<uint64_t> seed;
  std::vector<std::string> logit_bias;
  sample::SamplingParams sampling;
};

struct Timings {
  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  double prefill_s = 0;
  double decode_s = 0;
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

std::vector<int32_t> prompt_tokens(const RunOptions& o, const std::optional<tokenizer::Tokenizer>& tok,
                                   const gguf::GgufFile& file) {
  const int given = !o.prompt.empty() + !o.prompt_file.empty() + !o.prompt_ids.empty();
  if (given != 1) fail("give exactly one of -p PROMPT, -f FILE or --prompt-ids IDS");
  if (!o.prompt_ids.empty()) {
    if (o.chat) fail("--chat needs a text prompt, not --prompt-ids");
    return parse_id_list(o.prompt_ids);
  }
  if (!tok) fail("{}: the model has no tokenizer; use --prompt-ids", file.name());
  std::string text = o.prompt_file.empty() ? o.prompt : read_text_file(o.prompt_file);
  if (o.chat) {
    std::optional<tokenizer::ChatTemplateKind> kind;
    if (!o.chat_template.empty()) {
      kind = tokenizer::chat_template_from_name(o.chat_template);
    } else if (const gguf::Value* t = file.find("tokenizer.chat_template"); t && t->is_string()) {
      kind = tokenizer::detect_chat_template(t->as_string());
    } else if (file.get_string("general.architecture") == "gemma3") {
      kind = tokenizer::ChatTemplateKind::Gemma;  // Gemma files often ship without a template
    }
    if (!kind) fail("{}: no recognisable chat template; pass --chat-template NAME", file.name());
    std::vector<tokenizer::ChatMessage> messages;
    if (!o.system_prompt.empty()) messages.push_back({"system", o.system_prompt});
    messages.push_back({"user", text});
    text = tokenizer::render_chat(*kind, messages, /*add_generation_prompt=*/true, "");
  }
  return tok->encode(text, /*add_special=*/true, /*parse_special=*/o.chat);
}

void run(RunOptions o) {
  const SteadyClock::time_point start = SteadyClock::now();
  const kv::KvDtype kv_dtype = parse_kv_dtype(o.kv_dtype);
  const std::unique_ptr<RuntimeModel> loaded = load_runtime_model(o.model_path, o.runtime);
  model::Model* m = &loaded->model();
  const model::ModelConfig& c = m->config();
  std::optional<tokenizer::Tokenizer> tok;
  if (tokenizer::Tokenizer::present_in(m->file())) tok = tokenizer::Tokenizer::from_gguf(m->file());

  std::vector<int32_t> tokens = prompt_tokens(o, tok, m->file());
  if (tokens.empty()) fail("the prompt is empty");
  if (o.n_predict < 0) fail("-n must be >= 0, got {}", o.n_predict);
  if (o.batch < 1) fail("--batch must be >= 1, got {}", o.batch);
  const int64_t needed = static_cast<int64_t>(tokens.size()) + o.n_predict;
  const int64_t ctx = o.ctx_size > 0 ? o.ctx_size : std::min(needed, c.n_ctx_train);
  if (static_cast<int64_t>(tokens.size()) > ctx)
    fail("the prompt has {} tokens but the context holds {}", tokens.size(), ctx);

  o.sampling.seed = o.seed ? *o.seed : std::random_device{}();
  o.sampling.logit_bias = parse_logit_bias(o.logit_bias);
  sample::Sampler sampler(o.sampling, static_cast<int32_t>(c.n_vocab));
  sample::StopStringMatcher stops(o.sampling.stop);
  std::optional<tokenizer::IncrementalDetokenizer> detok;
  if (tok) detok.emplace(*tok);

  ThreadPool pool(o.threads);
  model::SingleSequence seq(*m, ctx, kv_dtype);
  std::vector<float> logits;
  Timings tm;
  tm.prompt_tokens = static_cast<int64_t>(tokens.size());

  // Prefill in chunks of --batch tokens; only the last chunk's logits matter.
  const SteadyClock::time_point prefill_start = SteadyClock::now();
  for (size_t pos = 0; pos < tokens.size(); pos += static_cast<size_t>(o.batch)) {
    const size_t n = std::min(tokens.size() - pos, static_cast<size_t>(o.batch));
    const bool last_chunk = pos + n == tokens.size();
    seq.forward({tokens.data() + pos, n}, last_chunk ? model::LogitRows::kLast : model::LogitRows::kNone, logits, pool);
  }
  tm.prefill_s = seconds_since(prefill_start);

  std::vector<int32_t> generated;
  const SteadyClock::time_point decode_start = SteadyClock::now();
  bool stopped = false;
  while (!stopped && static_cast<int64_t>(generated.size()) < o.n_predict) {
    const int32_t id = sampler.sample(logits, tokens);
    if (tok && tok->is_end_of_generation(id) && !o.sampling.ignore_eos) break;
    generated.push_back(id);
    tokens.push_back(id);
    if (!o.print_ids && detok) {
      const sample::StopResult r = stops.push(detok->push(id));
      std::fputs(r.emit.c_str(), stdout);
      std::fflush(stdout);
      stopped = r.stopped;
    }
    if (stopped || static_cast<int64_t>(generated.size()) >= o.n_predict) break;
    if (seq.size() >= seq.capacity()) {
      std::fprintf(stderr, "\n[context full at %lld tokens]\n", static_cast<long long>(seq.size()));
      break;
    }
    seq.forward({&tokens.back(), 1}, /*all_logits=*/false, logits, pool);
  }
  tm.decode_s = seconds_since(decode_start);
  tm.generated = static_cast<int64_t>(generated.size());
  if (o.print_ids) {
    std::printf("%s\n", format_id_list(generated).c_str());
  } else if (detok && !stopped) {
    std::fputs(stops.push(detok->flush()).emit.c_str(), stdout);
    std::fputs(stops.flush().c_str(), stdout);
    std::fputs("\n", stdout);
  }
  std::fflush(stdout);
  // Decode rate counts the forward steps after the first token.
  const double decode_steps = static_cast<double>(std::max<int64_t>(tm.generated - 1, 0));
  std::fprintf(stderr,
               "prompt %lld tokens | prefill %.1f tok/s | TTFT %.1f ms | generated %lld tokens | "
               "decode %.1f tok/s | threads %d | runtime %s | KV %s | seed %llu | total %.2f s\n",
               static_cast<long long>(tm.prompt_tokens), tm.prompt_tokens / std::max(tm.prefill_s, 1e-9),
               tm.prefill_s * 1e3, static_cast<long long>(tm.generated),
               decode_steps / std::max(tm.decode_s, 1e-9), pool.num_threads(), loaded->runtime_name().c_str(),
               std::string(kv::kv_dtype_name(kv_dtype)).c_str(), static_cast<unsigned long long>(o.sampling.seed),
               seconds_since(start));
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
  cmd->add_option("--chat-template", opts->chat_template, "gemma|llama2|llama3|chatml|mistral|phi3");
  cmd->add_option("-n,--n-predict", opts->n_predict, "Tokens to generate")->capture_default_str();
  cmd->add_option("-c,--ctx-size", opts->ctx_size, "Context size (default: prompt + n, capped)");
  cmd->add_option("-b,--batch", opts->batch, "Prefill chunk size in tokens")->capture_default_str();
  cmd->add_option("-t,--threads", opts->threads, "Threads (default: all cores)");
  add_kv_dtype_option(*cmd, opts->kv_dtype);
  add_runtime_option(*cmd, opts->runtime);
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
  cmd->callback([opts] { run(*opts); });
}

}  // namespace tokenmill::cli
