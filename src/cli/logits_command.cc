// `tokenmill logits`: next-token logits at every prompt position, written as a
// NumPy .npy float32 array [num_tokens, n_vocab]. A tool for checking the
// forward pass against other implementations.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/lora_flags.h"
#include "kv/kv_dtype.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct LogitsOptions {
  std::string model_path;
  std::string prompt_ids;
  std::string text_file;
  std::string out_path;
  int64_t batch = 128;
  std::string kv_dtype = "f32";  // exact by default: this command checks the maths
  std::string runtime = "auto";
  int threads = 0;
  int64_t ctx_size = 0;  // 0: the model's context
  RopeFlags rope;
  LoraFlags lora;
};

// NumPy format version 1.0: magic, header length, a Python dict literal
// padded with spaces to a multiple of 64 bytes, ending in '\n'.
void write_npy_header(std::FILE* f, int64_t rows, int64_t cols) {
  std::string dict = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  const size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  const uint16_t len = static_cast<uint16_t>(dict.size());
  std::fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  std::fwrite(&len, 2, 1, f);
  std::fwrite(dict.data(), 1, dict.size(), f);
}

void run(const LogitsOptions& o) {
  const kv::KvDtype kv_dtype = parse_kv_dtype(o.kv_dtype);
  const std::unique_ptr<RuntimeModel> loaded =
      load_runtime_model(o.model_path, o.runtime, rope_overrides(o.rope, o.ctx_size));
  model::Model* m = &loaded->model();
  const model::ModelConfig& c = m->config();
  std::vector<int32_t> tokens;
  if (o.prompt_ids.empty() == o.text_file.empty()) fail("give exactly one of --prompt-ids or -f FILE");
  if (!o.prompt_ids.empty()) {
    tokens = parse_id_list(o.prompt_ids);
  } else {
    if (!tokenizer::Tokenizer::present_in(m->file())) fail("{}: no tokenizer; use --prompt-ids", o.model_path);
    tokens = tokenizer::Tokenizer::from_gguf(m->file()).encode(read_text_file(o.text_file), true, false);
  }
  if (tokens.empty()) fail("no tokens to evaluate");
  if (o.batch < 1) fail("--batch must be >= 1");
  model::SingleSequence seq(*m, static_cast<int64_t>(tokens.size()), kv_dtype);
  const std::shared_ptr<const model::LoraAdapter> adapter = load_lora(o.lora, *m);
  seq.set_adapter(adapter.get());

  std::FILE* f = std::fopen((o.out_path + ".tmp").c_str(), "wb");
  if (!f) fail("cannot write '{}'", o.out_path);
  write_npy_header(f, static_cast<int64_t>(tokens.size()), c.n_vocab);
  ThreadPool pool(o.threads);
  std::vector<float> logits;
  for (size_t pos = 0; pos < tokens.size(); pos += static_cast<size_t>(o.batch)) {
    const size_t n = std::min(tokens.size() - pos, static_cast<size_t>(o.batch));
    seq.forward({tokens.data() + pos, n}, /*all_logits=*/true, logits, pool);
    std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  }
  const bool ok = std::ferror(f) == 0;
  std::fclose(f);
  if (!ok || std::rename((o.out_path + ".tmp").c_str(), o.out_path.c_str()) != 0) {
    std::remove((o.out_path + ".tmp").c_str());
    fail("failed writing '{}'", o.out_path);
  }
  std::fprintf(stderr, "wrote logits [%zu, %lld] to %s\n", tokens.size(), static_cast<long long>(c.n_vocab),
               o.out_path.c_str());
}

}  // namespace

void add_logits_command(CLI::App& app) {
  auto opts = std::make_shared<LogitsOptions>();
  CLI::App* cmd = app.add_subcommand("logits", "Write next-token logits at every prompt position (.npy)");
  cmd->add_option("-m,--model", opts->model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Token ids, e.g. 2,818,5279");
  cmd->add_option("-f,--file", opts->text_file, "Text file to tokenize")->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", opts->out_path, "Output .npy path")->required();
  cmd->add_option("-b,--batch", opts->batch, "Tokens per forward step")->capture_default_str();
  cmd->add_option("-t,--threads", opts->threads, "Threads (default: all cores)");
  cmd->add_option("-c,--ctx-size", opts->ctx_size,
                  "Context (default: the model's; beyond it warns unless RoPE is scaled)");
  add_rope_flags(*cmd, opts->rope);
  add_lora_options(*cmd, opts->lora);
  add_kv_dtype_option(*cmd, opts->kv_dtype);
  add_runtime_option(*cmd, opts->runtime);
  cmd->callback([opts] { run(*opts); });
}

}  // namespace tokenmill::cli
