// Conformance with llama.cpp's tokenizer test vectors (../shared/vocab):
// NAME.gguf holds a vocabulary, NAME.gguf.inp the test strings, each one
// followed by "\n__ggml_vocab_test__\n", and NAME.gguf.out one line of
// expected ids per string. The ids are those of llama.cpp's test-tokenizer-0:
// encode(text, add_special=false, parse_special=false).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "gguf/reader.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/test_dependency.h"

namespace tokenmill::tokenizer {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string text;
  std::vector<int32_t> expected;
};

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<Case> load_cases(const fs::path& gguf_path) {
  const std::string inp = read_all(gguf_path.string() + ".inp");
  const std::string out = read_all(gguf_path.string() + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0; pos < inp.size();) {
    size_t end = inp.find(sep, pos);
    if (end == std::string::npos) break;  // every string is followed by the separator
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (Case& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.expected.push_back(id);
  }
  return cases;
}

fs::path vocab_path(const std::string& name) {
  return testing::shared_dir() / "vocab" / ("ggml-vocab-" + name + ".gguf");
}

class VocabConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = vocab_path(GetParam());
    if (!fs::exists(path_)) {
      TM_MISSING_DEPENDENCY(path_ << " is absent (set TOKENMILL_SHARED to the shared/ folder)");
    }
    cases_ = load_cases(path_);
    ASSERT_EQ(cases_.size(), 46u) << "unexpected number of test strings in " << path_;
  }
  fs::path path_;
  std::vector<Case> cases_;
};

TEST_P(VocabConformance, EncodeMatchesLlamaCpp) {
  gguf::GgufFile file = gguf::GgufFile::open(path_.string());
  ASSERT_TRUE(Tokenizer::present_in(file));
  Tokenizer t = Tokenizer::from_gguf(file);
  for (const Case& c : cases_) {
    EXPECT_EQ(t.encode(c.text, false, false), c.expected) << "text: \"" << c.text << "\"";
  }
}

TEST_P(VocabConformance, DecodeRoundTrips) {
  Tokenizer t = Tokenizer::from_gguf(gguf::GgufFile::open(path_.string()));
  for (const Case& c : cases_) {
    EXPECT_EQ(t.decode(t.encode(c.text, false, false), true), c.text);
    EXPECT_EQ(t.decode(t.encode(c.text, true, false), true), c.text);
  }
}

TEST_P(VocabConformance, IncrementalDetokenizerMatchesDecode) {
  Tokenizer t = Tokenizer::from_gguf(gguf::GgufFile::open(path_.string()));
  for (const Case& c : cases_) {
    const std::vector<int32_t> ids = t.encode(c.text, true, false);
    IncrementalDetokenizer d(t);
    std::string joined;
    for (int32_t id : ids) {
      std::string chunk = d.push(id);
      ASSERT_TRUE(is_valid_utf8(chunk)) << "text: \"" << c.text << "\"";
      joined += chunk;
    }
    joined += d.flush();
    EXPECT_EQ(joined, t.decode(ids, true));
  }
}

TEST_P(VocabConformance, RandomBytesRoundTrip) {
  // Mixed ASCII, multi-byte characters and bytes that are not UTF-8 at all:
  // every vocabulary here is lossless on them (byte fallback or byte-level).
  Tokenizer t = Tokenizer::from_gguf(gguf::GgufFile::open(path_.string()));
  const std::vector<std::string> atoms = {"a",    "Z",    " ",    "  ",       "\n",           "\t",
                                          "7",    "'s",   "!",    "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\xA6\x99",
                                          "\xFF", "\x80", "\xC3", "\xE2\x96"};
  // Some byte-level vocabularies have no plain token for bytes that never
  // occur in UTF-8 (falcon and starcoder lack 0xFF; deepseek-coder has them
  // as user-defined tokens, which decode as their text): valid text only.
  bool every_byte = true;
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    const bool spm = t.kind() == TokenizerKind::kSpm;
    std::optional<int32_t> id =
        t.find_token(spm ? std::string(hex) : byte_level_encode(std::string(1, static_cast<char>(b))));
    every_byte &= id.has_value() && t.token_type(*id) == (spm ? TokenType::kByte : TokenType::kNormal);
  }
  const size_t num_atoms = every_byte ? atoms.size() : atoms.size() - 4;
  std::mt19937 rng(42);
  for (int trial = 0; trial < 100; ++trial) {
    std::string text;
    for (int i = static_cast<int>(rng() % 40); i > 0; --i) text += atoms[rng() % num_atoms];
    EXPECT_EQ(t.decode(t.encode(text, false, false), true), text);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabConformance,
                         ::testing::Values("llama-spm", "gpt-2", "falcon", "starcoder", "deepseek-coder"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Any other vocabulary dropped into shared/vocab must pass too.
TEST(VocabConformanceAll, EveryVocabFileInSharedPasses) {
  const fs::path dir = testing::shared_dir() / "vocab";
  if (!fs::exists(dir)) TM_MISSING_DEPENDENCY(dir << " is absent");
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file_name = entry.path().filename().string();
    if (!file_name.starts_with("ggml-vocab-") || entry.path().extension() != ".gguf") continue;
    if (!fs::exists(entry.path().string() + ".inp")) continue;
    SCOPED_TRACE(file_name);
    Tokenizer t = Tokenizer::from_gguf(gguf::GgufFile::open(entry.path().string()));
    for (const Case& c : load_cases(entry.path())) {
      EXPECT_EQ(t.encode(c.text, false, false), c.expected) << "text: \"" << c.text << "\"";
    }
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

TEST(VocabConformanceSpm, ByteFallbackCharactersStreamWhole) {
  const fs::path path = vocab_path("llama-spm");
  if (!fs::exists(path)) TM_MISSING_DEPENDENCY(path << " is absent");
  Tokenizer t = Tokenizer::from_gguf(gguf::GgufFile::open(path.string()));
  // U+1F999 (llama) is not in the Llama vocabulary: four byte tokens.
  const std::vector<int32_t> ids = t.encode("\xF0\x9F\xA6\x99", false, false);
  ASSERT_EQ(ids, (std::vector<int32_t>{29871, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99}));
  IncrementalDetokenizer d(t, true, /*at_text_start=*/false);
  std::vector<std::string> chunks;
  for (int32_t id : ids) chunks.push_back(d.push(id));
  EXPECT_EQ(chunks, (std::vector<std::string>{" ", "", "", "", "\xF0\x9F\xA6\x99"}));
  EXPECT_EQ(d.flush(), "");
}

}  // namespace
}  // namespace tokenmill::tokenizer
