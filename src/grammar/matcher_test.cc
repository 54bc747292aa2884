#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/context_mask.h"
#include "grammar/gbnf_parser.h"
#include "grammar/parse_state.h"
#include "grammar/text_match.h"

namespace tokenmill::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::string& gbnf, std::shared_ptr<const TokenVocab> vocab) {
  GrammarLimits limits;
  return std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf, limits, Deadline(limits.max_compile_time)),
                                                 std::move(vocab), ConstraintSpec{ConstraintKind::kGbnf, gbnf});
}

// The reference: a token is allowed when the text with its bytes is still a
// prefix of some sentence (fed from scratch, no cache, no trie); an EOG id
// when the text is a whole sentence.
std::vector<uint32_t> reference_mask(const Grammar& g, const TokenVocab& vocab, const std::string& text) {
  std::vector<uint32_t> bits(vocab.mask_words(), 0);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.bytes(id).empty()) continue;
    StackArena arena(g);
    ParseState s;
    arena.start(s.tops);
    std::vector<int32_t> scratch;
    if (feed_bytes(arena, s, text, scratch) && feed_bytes(arena, s, vocab.bytes(id), scratch)) set_bit(bits, id);
  }
  if (grammar_accepts(g, text)) {
    for (int32_t id : vocab.eog_ids()) set_bit(bits, id);
  }
  return bits;
}

std::vector<int32_t> ids_of(const std::vector<uint32_t>& bits, int32_t n) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n; ++id) {
    if (test_bit(bits, id)) ids.push_back(id);
  }
  return ids;
}

// Every single byte, pieces of the grammar's own words, random ASCII runs,
// and multi-byte characters whole, split, and glued to ASCII.
std::shared_ptr<const TokenVocab> test_vocab(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> pieces = {""};  // id 0: EOG
  for (int b = 1; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  const std::vector<std::string> words = {"{\"",  "\":",  "\",",    "\"}",  "true",     "null", ", \"", "name",
                                          "é",    "\xc3", "\xa9\"", "中文", "\xe4\xb8", "[1,",  "]}",   "\\n",
                                          "\\\"", "12.5", "}\n",    " {",   "\"a\"",    "-0",   "e+7",  "false"};
  pieces.insert(pieces.end(), words.begin(), words.end());
  const std::string alphabet = "ab{}[]\":, 0123456789.-e\\n";
  for (int i = 0; i < 300; ++i) {
    std::string p;
    const int len = 2 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
    pieces.push_back(p);
  }
  pieces.push_back("ab");  // a duplicate of a random piece is likely; this one is certain
  pieces.push_back("ab");
  return TokenVocab::from_pieces(std::move(pieces), {0});
}

const char* kJsonLike = R"(
root ::= object ws
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,5} ) ( "." [0-9]{1,4} )? ( [eE] [+-]? [0-9]{1,2} )?
ws ::= [ \n]{0,3}
)";

void random_walks(const std::string& gbnf, int walks, int max_steps) {
  auto vocab = test_vocab(7);
  auto cg = compile(gbnf, vocab);
  std::mt19937 rng(11);
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(cg);
    std::string text;
    std::vector<uint32_t> bits(vocab->mask_words());
    for (int step = 0; step < max_steps; ++step) {
      m.fill_mask(bits);
      const std::vector<uint32_t> want = reference_mask(cg->grammar(), *vocab, text);
      ASSERT_EQ(ids_of(bits, vocab->size()), ids_of(want, vocab->size())) << "after text: " << text;
      const std::vector<int32_t> allowed = ids_of(bits, vocab->size());
      if (allowed.empty()) break;
      // Prefer ending late so that walks go deep.
      int32_t pick = allowed[rng() % allowed.size()];
      if (pick == 0 && allowed.size() > 1 && step < max_steps / 2) pick = allowed[1 + rng() % (allowed.size() - 1)];
      ASSERT_TRUE(m.accept_token(pick));
      if (pick == 0) {
        EXPECT_TRUE(grammar_accepts(cg->grammar(), text)) << text;
        break;
      }
      text += vocab->bytes(pick);
    }
  }
}

TEST(GrammarMatcher, MasksEqualTheReferenceOnJsonLikeWalks) { random_walks(kJsonLike, 12, 40); }

TEST(GrammarMatcher, MasksEqualTheReferenceWithUnicodeAndAmbiguity) {
  random_walks(R"(
root ::= ( "é" | "中" [^a]{0,3} | "a" x | "a" "b"+ | [0-9]+ "." )* "!"?
x ::= "b" | "bb" | "中文"
)",
               12, 30);
}

TEST(GrammarMatcher, RejectsTokensOutsideTheGrammarAndKeepsState) {
  auto vocab = TokenVocab::from_pieces({"", "a", "b", "ab", "\xc3", "\xa9"}, {0});
  auto cg = compile(R"(root ::= "a" "é")", vocab);
  GrammarMatcher m(cg);
  EXPECT_FALSE(m.accept_token(2));
  EXPECT_FALSE(m.accept_token(0));  // cannot end yet
  EXPECT_TRUE(m.accept_token(1));
  EXPECT_FALSE(m.accept_token(5));  // a continuation byte first
  EXPECT_TRUE(m.accept_token(4));   // half of é
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_token(5));
  EXPECT_TRUE(m.must_end());
  std::vector<uint32_t> bits(vocab->mask_words());
  m.fill_mask(bits);
  EXPECT_EQ(ids_of(bits, vocab->size()), std::vector<int32_t>{0});
  EXPECT_TRUE(m.accept_token(0));
  EXPECT_FALSE(m.accept_token(1));
}

TEST(GrammarMatcher, ContextMasksAreSharedThroughTheCache) {
  auto vocab = test_vocab(3);
  auto cg = compile(kJsonLike, vocab);
  GrammarMatcher m(cg);
  std::vector<uint32_t> bits(vocab->mask_words());
  auto id_of = [&](const char* piece) {
    for (int32_t t = 0; t < vocab->size(); ++t) {
      if (vocab->bytes(t) == piece) return t;
    }
    return -1;
  };
  for (const char* piece : {"{\"", "a"}) {
    ASSERT_TRUE(m.accept_token(id_of(piece))) << piece;
  }
  m.fill_mask(bits);  // inside a string
  ASSERT_TRUE(m.accept_token(id_of("b")));
  const auto before = cg->cache_stats();
  m.fill_mask(bits);  // still inside the string: the same contexts
  const auto after = cg->cache_stats();
  EXPECT_GT(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
}

TEST(TokenVocab, TrieHoldsEveryTokenOnce) {
  auto vocab = test_vocab(5);
  std::vector<int> seen(static_cast<size_t>(vocab->size()), 0);
  const auto& nodes = vocab->nodes();
  for (const auto& n : nodes) {
    if (n.token >= 0) ++seen[static_cast<size_t>(n.token)];
  }
  for (const auto& [node, id] : vocab->duplicates()) ++seen[static_cast<size_t>(id)];
  for (int32_t id = 0; id < vocab->size(); ++id)
    EXPECT_EQ(seen[static_cast<size_t>(id)], vocab->bytes(id).empty() ? 0 : 1);
  EXPECT_EQ(nodes[0].subtree_end, nodes.size());
}

}  // namespace
}  // namespace tokenmill::grammar
