// `tokenmill tokenize -m MODEL`: reads all of stdin and prints its token ids,
// comma-separated on one line, with the model's own tokenizer (GGUF metadata).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct TokenizeFlags {
  std::string model;
  bool no_special = false;
  bool parse_special = false;
};

void run_tokenize(const TokenizeFlags& f) {
  const gguf::GgufFile file = gguf::GgufFile::open(f.model);
  if (!tokenizer::Tokenizer::present_in(file)) {
    fail("{}: the file has no tokenizer (tokenizer.ggml.model is absent or 'no_vocab')", f.model);
  }
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  std::ios::sync_with_stdio(false);
  const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (std::cin.bad()) fail("could not read standard input");
  const std::vector<int32_t> ids = tok.encode(text, !f.no_special, f.parse_special);
  std::printf("%s\n", format_id_list(ids).c_str());
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of standard input");
  cmd->add_option("-m,--model", flags->model, "GGUF file whose tokenizer to use")->required();
  cmd->add_flag("--no-special", flags->no_special, "Leave out the BOS/EOS tokens the model adds");
  cmd->add_flag("--parse-special", flags->parse_special,
                "Turn control-token texts in the input (e.g. <start_of_turn>) into those tokens");
  cmd->callback([flags] { run_tokenize(*flags); });
}

}  // namespace tokenmill::cli
