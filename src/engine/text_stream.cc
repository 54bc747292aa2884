#include "engine/text_stream.h"

namespace tokenmill::engine {

TextStream::TextStream(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops)
    : detok_(tokenizer, /*skip_special=*/true, /*at_text_start=*/false), stops_(std::move(stops)) {}

TextStream::Piece TextStream::push(int32_t id) {
  if (stops_.stopped()) return {"", true};
  sample::StopResult r = stops_.push(detok_.push(id));
  return {std::move(r.emit), r.stopped};
}

std::string TextStream::finish() {
  if (stops_.stopped()) return {};
  std::string text = stops_.push(detok_.flush()).emit;
  if (!stops_.stopped()) text += stops_.flush();
  return text;
}

}  // namespace tokenmill::engine
