#include "engine/text_stream.h"

namespace tokenmill::engine {

namespace {

// The tokens whose text skip_special_tokens leaves out (the detokenizer's rule).
bool is_special_token(const tokenizer::Tokenizer& tok, int32_t id) {
  const tokenizer::TokenType type = tok.token_type(id);
  return type == tokenizer::TokenType::kControl || type == tokenizer::TokenType::kUnknown;
}

}  // namespace

TextStream::TextStream(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops, TextOptions options)
    : tokenizer_(&tokenizer),
      options_(options),
      detok_(tokenizer, options.skip_special_tokens, /*at_text_start=*/false),
      stops_(std::move(stops), options.include_stop_str) {}

std::string TextStream::detokenize(int32_t id) {
  std::string text = detok_.push(id);
  if (options_.skip_special_tokens || !options_.spaces_between_special_tokens || text.empty()) return text;
  // A special token's text is whole characters, so it comes out with the
  // push of its own id; the space goes in front of whatever that push returns.
  const bool special = is_special_token(*tokenizer_, id);
  if (any_text_ && (special || last_special_)) text.insert(0, 1, ' ');
  any_text_ = true;
  last_special_ = special;
  return text;
}

TextStream::Piece TextStream::push(int32_t id) {
  if (stops_.stopped()) return {"", true};
  ++num_pushed_;
  sample::StopResult r = stops_.push(detokenize(id), num_pushed_ >= options_.min_tokens);
  return {std::move(r.emit), r.stopped};
}

std::string TextStream::finish() {
  if (stops_.stopped()) return {};
  std::string text = stops_.push(detok_.flush()).emit;
  if (!stops_.stopped()) text += stops_.flush();
  return text;
}

}  // namespace tokenmill::engine
