// A model's vocabulary as the grammar matcher sees it: the bytes each token
// adds to the output text, and a byte trie over those byte strings so that
// one walk checks every token sharing a prefix at once.
//
// Tokens that add no bytes (control tokens, BOS, padding) are never allowed
// by a grammar; the end-of-generation ids are allowed only where the grammar
// can end. Built once per tokenizer (GrammarCompiler); immutable and safe to
// share between threads afterwards.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tokenmill::grammar {

class TokenVocab {
 public:
  // Cost: O(total token bytes) time and ~20 bytes per trie node.
  static std::shared_ptr<const TokenVocab> build(const tokenizer::Tokenizer& tokenizer);
  // For tests: token i has bytes pieces[i]; "" marks a token never allowed.
  static std::shared_ptr<const TokenVocab> from_pieces(std::vector<std::string> pieces, std::vector<int32_t> eog_ids);

  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  std::string_view bytes(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  // Words of a token bitmask: bit (id % 32) of word id / 32.
  size_t mask_words() const { return (pieces_.size() + 31) / 32; }

  // The trie, in depth-first preorder: node 0 is the root (empty prefix),
  // a node's subtree is [node, subtree_end), its first child (if any) is
  // node + 1 and each child's next sibling starts at the child's subtree_end.
  struct Node {
    int32_t token = -1;        // the token whose bytes end here, or -1
    uint32_t subtree_end = 0;  // one past the last node of the subtree
    uint8_t byte = 0;          // the edge into this node
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  // Tokens whose byte strings are equal to another token's (the trie holds
  // one id per node): node -> the others, for the rare duplicates.
  const std::vector<std::pair<uint32_t, int32_t>>& duplicates() const { return duplicates_; }
  // An identity of the vocabulary for cache keys (hash of every piece).
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  void build_trie();

  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_ids_;
  std::vector<Node> nodes_;
  std::vector<std::pair<uint32_t, int32_t>> duplicates_;  // sorted by node
  uint64_t fingerprint_ = 0;
};

}  // namespace tokenmill::grammar
