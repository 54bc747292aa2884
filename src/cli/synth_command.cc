// `tokenmill synth`: writes a synthetic model (random weights, real layout)
// of a given architecture, shape and weight format. Deterministic: the same
// flags and --seed give a byte-identical file.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "model/synth.h"
#include "util/clock.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct SynthFlags {
  std::string arch = "llama";
  std::string preset = "tiny";
  std::string type = "F32";
  uint64_t seed = 0;
  std::string vocab_from;
  std::string output;
  int threads = 0;
  std::string rope_scaling = "none";  // --rope-scaling; the factor etc. in `rope`
  model::SynthRope rope;
  // Shape overrides: the value and whether the flag was given.
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_kv_head = 0, n_ff = 0, vocab = 0, head_dim = 0, ctx = 0;
  CLI::Option *n_embd_opt = nullptr, *n_layer_opt = nullptr, *n_head_opt = nullptr, *n_kv_head_opt = nullptr,
              *n_ff_opt = nullptr, *vocab_opt = nullptr, *head_dim_opt = nullptr, *ctx_opt = nullptr;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
  CLI::Option *n_expert_opt = nullptr, *n_expert_used_opt = nullptr, *n_ff_exp_opt = nullptr, *n_ff_shexp_opt = nullptr;
};

std::optional<int64_t> given(const CLI::Option* opt, int64_t value) {
  return opt->count() > 0 ? std::optional<int64_t>(value) : std::nullopt;
}

std::string shared_dir() {
  const char* env = std::getenv("TOKENMILL_SHARED");
  return env != nullptr ? std::string(env) : std::string("../shared");
}

void run_synth(const SynthFlags& f) {
  model::SynthOptions o;
  o.arch = *model::parse_synth_arch(f.arch);  // CLI11 checked the name
  o.preset = f.preset;
  const std::optional<model::WeightFormat> format = model::parse_weight_format(f.type);
  if (!format) fail("--type {}: unknown type (one of {})", f.type, model::weight_format_choices());
  o.format = *format;
  o.seed = f.seed;
  if (!f.vocab_from.empty()) o.vocab_from = f.vocab_from;
  o.shared_dir = shared_dir();
  o.num_threads = f.threads;
  o.rope = f.rope;
  o.rope.type = *model::parse_rope_scaling_type(f.rope_scaling);  // CLI11 checked the name
  o.overrides = {given(f.n_embd_opt, f.n_embd),     given(f.n_layer_opt, f.n_layer),
                 given(f.n_head_opt, f.n_head),     given(f.n_kv_head_opt, f.n_kv_head),
                 given(f.n_ff_opt, f.n_ff),         given(f.vocab_opt, f.vocab),
                 given(f.head_dim_opt, f.head_dim), given(f.ctx_opt, f.ctx),
                 given(f.n_expert_opt, f.n_expert), given(f.n_expert_used_opt, f.n_expert_used),
                 given(f.n_ff_exp_opt, f.n_ff_exp), given(f.n_ff_shexp_opt, f.n_ff_shexp)};
  const SteadyClock::time_point start = SteadyClock::now();
  model::write_synth_model(o, f.output);
  std::fprintf(stderr, "wrote %s: synthetic %s %s, %s, seed %llu, %.1f MB in %.1f s\n", f.output.c_str(),
               f.arch.c_str(), f.preset.c_str(), model::weight_format_name(o.format).c_str(),
               static_cast<unsigned long long>(f.seed), static_cast<double>(std::filesystem::file_size(f.output)) / 1e6,
               seconds_since(start));
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto f = std::make_shared<SynthFlags>();
  CLI::App* cmd =
      app.add_subcommand("synth", "Write a synthetic GGUF model: real layout, deterministic random weights");
  cmd->add_option("--arch", f->arch,
                  "llama|qwen2|gemma3|qwen3|olmo2|granite|phi3|gemma2|qwen2moe|qwen3moe|olmoe (llama with "
                  "--n-expert: Mixtral's layout)")
      ->check(CLI::IsMember(
          {"llama", "qwen2", "gemma3", "qwen3", "olmo2", "granite", "phi3", "gemma2", "qwen2moe", "qwen3moe", "olmoe"}))
      ->capture_default_str();
  cmd->add_option("--preset", f->preset, "Base shape; the shape flags below override it")
      ->check(CLI::IsMember(model::synth_preset_names()))
      ->capture_default_str();
  cmd->add_option("--type", f->type, "Weight format: " + model::weight_format_choices())->capture_default_str();
  cmd->add_option("--seed", f->seed, "PRNG seed")->capture_default_str();
  cmd->add_option("--vocab-from", f->vocab_from, "Copy the tokenizer of this GGUF (sets --vocab)")
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", f->output, "Output GGUF file")->required();
  cmd->add_option("-t,--threads", f->threads, "Threads (default: all cores)");
  f->n_embd_opt = cmd->add_option("--n-embd", f->n_embd, "Embedding width");
  f->n_layer_opt = cmd->add_option("--n-layer", f->n_layer, "Number of layers");
  f->n_head_opt = cmd->add_option("--n-head", f->n_head, "Attention heads");
  f->n_kv_head_opt = cmd->add_option("--n-kv-head", f->n_kv_head, "Key/value heads");
  f->n_ff_opt = cmd->add_option("--n-ff", f->n_ff, "Feed-forward width");
  f->vocab_opt = cmd->add_option("--vocab", f->vocab, "Vocabulary size");
  f->head_dim_opt = cmd->add_option("--head-dim", f->head_dim, "Head size (default n_embd / n_head)");
  f->ctx_opt = cmd->add_option("--ctx", f->ctx, "Training context length");
  f->n_expert_opt = cmd->add_option("--n-expert", f->n_expert, "Experts per layer (mixture of experts)");
  f->n_expert_used_opt = cmd->add_option("--n-expert-used", f->n_expert_used, "Experts each token runs through");
  f->n_ff_exp_opt = cmd->add_option("--n-ff-exp", f->n_ff_exp, "Each expert's feed-forward width");
  f->n_ff_shexp_opt = cmd->add_option("--n-ff-shexp", f->n_ff_shexp, "The shared expert's width (qwen2moe)");
  cmd->add_option("--rope-scaling", f->rope_scaling, "RoPE scaling keys to write: none|linear|yarn|llama3|longrope")
      ->check(CLI::IsMember({"none", "linear", "yarn", "llama3", "longrope"}))
      ->capture_default_str();
  cmd->add_option("--rope-factor", f->rope.factor, "Context extension factor of the scaling")->capture_default_str();
  cmd->add_option("--rope-orig-ctx", f->rope.orig_ctx, "Original context of yarn/llama3 (default: --ctx)");
  cmd->add_option("--rope-attn-factor", f->rope.attn_factor, "rope.scaling.attn_factor (written when not 1)")
      ->capture_default_str();
  cmd->callback([f] { run_synth(*f); });
}

}  // namespace tokenmill::cli
