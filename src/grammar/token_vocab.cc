#include "grammar/token_vocab.h"

#include <algorithm>
#include <numeric>

#include "util/check.h"

namespace tokenmill::grammar {

std::shared_ptr<const TokenVocab> TokenVocab::build(const tokenizer::Tokenizer& tokenizer) {
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const tokenizer::TokenType type = tokenizer.token_type(id);
    // Control, unknown and unused tokens stand for no output text: a
    // grammar never allows them (EOG ids are handled apart).
    if (type == tokenizer::TokenType::kControl || type == tokenizer::TokenType::kUnknown ||
        type == tokenizer::TokenType::kUnused) {
      continue;
    }
    std::string piece = tokenizer.token_to_piece(id, false);
    // User-defined tokens written as markup ("<start_of_image>", "<unused7>")
    // are special in all but name: never part of constrained text.
    if (type == tokenizer::TokenType::kUserDefined && piece.size() > 2 && piece.front() == '<' && piece.back() == '>') {
      continue;
    }
    pieces[static_cast<size_t>(id)] = std::move(piece);
  }
  return from_pieces(std::move(pieces), tokenizer.end_of_generation_ids());
}

std::shared_ptr<const TokenVocab> TokenVocab::from_pieces(std::vector<std::string> pieces,
                                                          std::vector<int32_t> eog_ids) {
  auto v = std::make_shared<TokenVocab>(TokenVocab());
  v->pieces_ = std::move(pieces);
  for (int32_t id : eog_ids) {
    TM_CHECK(id >= 0 && id < v->size());
    v->pieces_[static_cast<size_t>(id)].clear();
  }
  v->eog_ids_ = std::move(eog_ids);
  uint64_t h = 1469598103934665603ull;  // FNV-1a over lengths and bytes
  for (const std::string& p : v->pieces_) {
    for (char c : p) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    h = (h ^ (p.size() + 0x9e37)) * 1099511628211ull;
  }
  v->fingerprint_ = h;
  v->build_trie();
  return v;
}

// Sorting the ids by their bytes makes every trie subtree a contiguous run
// of the sorted list, so the preorder layout falls out of one pass with a
// stack of open nodes.
void TokenVocab::build_trie() {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < size(); ++id) {
    if (!pieces_[static_cast<size_t>(id)].empty()) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const std::string& pa = pieces_[static_cast<size_t>(a)];
    const std::string& pb = pieces_[static_cast<size_t>(b)];
    return pa != pb ? pa < pb : a < b;
  });
  nodes_.assign(1, Node{});
  std::vector<uint32_t> open = {0};  // open[d]: the node of the current prefix of length d
  std::string_view prev;
  for (int32_t id : ids) {
    const std::string_view piece = pieces_[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < prev.size() && common < piece.size() && prev[common] == piece[common]) ++common;
    while (open.size() > common + 1) {  // close the nodes below the shared prefix
      nodes_[open.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      open.pop_back();
    }
    for (size_t d = common; d < piece.size(); ++d) {
      open.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(Node{-1, 0, static_cast<uint8_t>(piece[d])});
    }
    Node& end = nodes_[open.back()];
    if (end.token < 0) {
      end.token = id;
    } else {
      duplicates_.emplace_back(open.back(), id);
    }
    prev = piece;
  }
  while (!open.empty()) {
    nodes_[open.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
    open.pop_back();
  }
}

}  // namespace tokenmill::grammar
