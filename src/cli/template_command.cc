// `tokenmill template`: renders a chat template (a file, or the GGUF's
// tokenizer.chat_template) over a conversation with the sandboxed Jinja
// engine and prints the prompt text exactly, with no newline added. The
// conformance harness compares this output with Python jinja2's.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "gguf/reader.h"
#include "jinja/template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct TemplateFlags {
  std::string template_file;
  std::string messages_file;
  std::string tools_file;
  std::string bos_token;
  std::string eos_token;
  std::string kwargs;
  std::string model;
  bool no_generation_prompt = false;
};

nlohmann::ordered_json parse_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", what, e.what());
  }
}

// The template source and BOS/EOS texts from the model file, for flags not given.
void read_model_defaults(const TemplateFlags& f, std::string& source, std::string& bos, std::string& eos) {
  const gguf::GgufFile file = gguf::GgufFile::open(f.model);
  if (source.empty()) {
    if (!file.has("tokenizer.chat_template")) fail("{}: the file has no tokenizer.chat_template", f.model);
    source = file.get_string("tokenizer.chat_template");
  }
  if (!tokenizer::Tokenizer::present_in(file)) return;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  if (bos.empty() && tok.bos_id() >= 0) bos = tok.token_text(tok.bos_id());
  if (eos.empty() && tok.eos_id() >= 0) eos = tok.token_text(tok.eos_id());
}

int run_template(const TemplateFlags& f) {
  std::string source = f.template_file.empty() ? "" : read_text_file(f.template_file);
  std::string bos = f.bos_token, eos = f.eos_token;
  if (!f.model.empty()) read_model_defaults(f, source, bos, eos);
  if (f.template_file.empty() && f.model.empty()) fail("give --chat-template-file or --model");
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = parse_json(read_text_file(f.messages_file), f.messages_file);
  if (!f.tools_file.empty()) context["tools"] = parse_json(read_text_file(f.tools_file), f.tools_file);
  context["add_generation_prompt"] = !f.no_generation_prompt;
  context["bos_token"] = bos;
  context["eos_token"] = eos;
  if (!f.kwargs.empty()) {
    const nlohmann::ordered_json extra = parse_json(f.kwargs, "--chat-template-kwargs");
    if (!extra.is_object()) fail("--chat-template-kwargs must be a JSON object");
    for (const auto& [k, v] : extra.items()) context[k] = v;
  }
  try {
    const jinja::Template tmpl = jinja::Template::parse(source);
    const std::string text = tmpl.render(context);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } catch (const jinja::TemplateError& e) {
    std::fprintf(stderr, "tokenmill: template error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

void add_template_command(CLI::App& app) {
  auto flags = std::make_shared<TemplateFlags>();
  CLI::App* cmd = app.add_subcommand("template", "Render a chat template over a conversation (as Hugging Face does)");
  cmd->add_option("--chat-template-file", flags->template_file, "Jinja chat template file");
  cmd->add_option("--messages-file", flags->messages_file, "JSON array of messages")->required();
  cmd->add_option("--tools-file", flags->tools_file, "JSON array of tools (the `tools` variable)");
  cmd->add_option("--bos-token", flags->bos_token, "Text of bos_token (default: the model's, else empty)");
  cmd->add_option("--eos-token", flags->eos_token, "Text of eos_token (default: the model's, else empty)");
  cmd->add_flag("--no-generation-prompt", flags->no_generation_prompt, "Set add_generation_prompt to false");
  cmd->add_option("--chat-template-kwargs", flags->kwargs, "JSON object of extra template variables");
  cmd->add_option("--model", flags->model, "GGUF file: its chat template and BOS/EOS texts");
  cmd->callback([flags] {
    const int code = run_template(*flags);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace tokenmill::cli
