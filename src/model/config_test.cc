// ModelConfig::from_gguf on hand-built metadata: values a file may hold in
// any type must be rejected with tokenmill::Error, never a CHECK abort.
#include "model/config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

using gguf::Value;

// The smallest llama metadata from_gguf reads before the vocabulary size.
gguf::GgufWriter llama_metadata() {
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.set("llama.embedding_length", Value::u32(64));
  w.set("llama.block_count", Value::u32(1));
  w.set("llama.feed_forward_length", Value::u32(128));
  w.set("llama.attention.head_count", Value::u32(4));
  return w;
}

std::string error_of(const gguf::GgufWriter& w) {
  const std::vector<uint8_t> bytes = w.to_bytes();
  try {
    const gguf::GgufFile f = gguf::GgufFile::parse(bytes, "bad.gguf");
    ModelConfig::from_gguf(f);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Found by review after fuzzing found the same mistake in the tokenizer: the
// vocabulary size was read with Value::as_int, which aborts on a uint64
// above INT64_MAX and on a string.
TEST(ModelConfig, VocabSizeOfAnyTypeOrValueIsAnErrorNotAnAbort) {
  gguf::GgufWriter huge = llama_metadata();
  huge.set("llama.vocab_size", Value::u64(UINT64_MAX));
  EXPECT_NE(error_of(huge).find("llama.vocab_size"), std::string::npos) << error_of(huge);
  gguf::GgufWriter text = llama_metadata();
  text.set("llama.vocab_size", Value::str("many"));
  EXPECT_NE(error_of(text).find("llama.vocab_size"), std::string::npos) << error_of(text);
}

}  // namespace
}  // namespace tokenmill::model
