// Building blocks for GBNF text produced by the regex and JSON Schema
// converters: a RuleSink that names and collects rules under one prefix and
// enforces max_gbnf_bytes, and a LiteralTrie that turns a set of literal
// strings into nested alternatives factored by common prefix, so that the
// matcher keeps a single parse stack however many strings there are.
// Thread-safety: neither type is shared between threads.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grammar/grammar_limits.h"

namespace tokenmill::grammar {

class RuleSink {
 public:
  // prefix: the main rule's name, [A-Za-z][A-Za-z0-9-]*; helpers are named
  // prefix-hint[-N]. Throws tokenmill::Error on a malformed prefix.
  RuleSink(std::string prefix, const GrammarLimits& limits);

  const std::string& prefix() const { return prefix_; }
  // A name no rule of this sink uses yet, derived from `hint`.
  std::string fresh_name(std::string_view hint);
  // Defines `name` (the prefix or a name from fresh_name). Throws
  // tokenmill::Error once the text passes max_gbnf_bytes.
  void define(const std::string& name, std::string body);
  std::string add(std::string_view hint, std::string body);
  // For expressions still being assembled: throws when `bytes` more would
  // pass the limit, so a huge expression fails before it is built further.
  void check_size(size_t bytes) const;
  // Every rule, the prefix rule first, one per line.
  std::string text() const;

 private:
  std::string prefix_;
  size_t max_bytes_;
  size_t bytes_ = 0;
  std::unordered_set<std::string> used_;
  std::vector<std::pair<std::string, std::string>> rules_;
};

class LiteralTrie {
 public:
  LiteralTrie() : nodes_(1) {}
  void insert(std::u32string_view text);
  bool empty() const { return nodes_.size() == 1 && !nodes_[0].terminal; }

  // An expression matching exactly the inserted strings (at least one).
  // Alternatives at every node begin with distinct characters; nodes nested
  // deeper than a few levels become helper rules of `sink`, which keeps
  // the text and every recursive parser shallow.
  std::string emit(RuleSink& sink, std::string_view hint, const Deadline& deadline) const;

  // For JSON object keys: an expression matching the rest of a key after
  // its opening quote, closing quote included, for every key made of
  // unescaped JSON string characters that is NOT one of the inserted
  // strings (which must themselves be made of such characters).
  std::string emit_other_keys(RuleSink& sink, std::string_view hint, const Deadline& deadline) const;

 private:
  struct Node {
    std::vector<std::pair<char32_t, uint32_t>> next;  // sorted by character
    bool terminal = false;
  };
  std::string emit_all(RuleSink& sink, std::string_view hint, const Deadline& deadline, bool keys) const;
  std::string emit_node(uint32_t id, int depth, bool keys, RuleSink& sink, std::string_view hint,
                        std::vector<std::pair<std::string, uint32_t>>& pending) const;

  std::vector<Node> nodes_;
};

}  // namespace tokenmill::grammar
