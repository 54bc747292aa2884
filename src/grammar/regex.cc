#include "grammar/regex.h"

#include <algorithm>
#include <optional>

#include "grammar/regex_parser.h"
#include "util/error.h"

namespace tokenmill::grammar {
namespace {

// Saturating lengths: anything this large counts as unbounded.
constexpr int64_t kHuge = int64_t{1} << 40;

int64_t sat_add(int64_t a, int64_t b) { return (a < 0 || b < 0) ? -1 : std::min(a + b, kHuge); }
int64_t sat_mul(int64_t a, int64_t n) {
  if (a == 0 || n == 0) return 0;
  if (a < 0 || n < 0) return -1;
  return a > kHuge / n ? kHuge : a * n;
}

// Turns the tree into GBNF. The matcher refuses repetition of anything that
// can match the empty string, so a nullable repeated node X is replaced by
// X' (X without the empty string) repeated from zero: X{m,n} and X'{0,n}
// have the same language when X matches empty.
class Emitter {
 public:
  Emitter(RegexTree& tree, RuleSink& sink, const RegexOptions& options, const Deadline& deadline)
      : tree_(tree), sink_(sink), options_(options), deadline_(deadline) {}

  std::string body() {
    std::vector<std::string> alts;
    for (const RegexBranch& b : tree_.branches) alts.push_back(branch(b));
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) {
      if (i > 0) out += alts[i].empty() ? " |" : " | ";
      out += alts[i];
    }
    return out;
  }

  bool nullable(uint32_t id) {
    if (memo_.size() < tree_.nodes.size()) memo_.resize(tree_.nodes.size(), -1);
    if (memo_[id] >= 0) return memo_[id] == 1;
    const RegexNode& n = tree_.nodes[id];
    bool result = false;
    switch (n.kind) {
      case RegexKind::kEmpty: result = true; break;
      case RegexKind::kSet: result = false; break;
      case RegexKind::kSeq:
        result = std::all_of(n.items.begin(), n.items.end(), [&](uint32_t c) { return nullable(c); });
        break;
      case RegexKind::kAlt:
        result = std::any_of(n.items.begin(), n.items.end(), [&](uint32_t c) { return nullable(c); });
        break;
      case RegexKind::kRepeat: result = n.min == 0 || n.max == 0 || nullable(n.items[0]); break;
    }
    memo_.resize(tree_.nodes.size(), -1);
    memo_[id] = result ? 1 : 0;
    return result;
  }

 private:
  std::string branch(const RegexBranch& b) {
    if (!options_.search || (b.anchored_start && b.anchored_end)) return seq(b.node);
    const std::string any = any_char_rule() + "*";
    // A pattern that can match empty text is found in every string unless
    // it is anchored at both ends.
    if (nullable(b.node)) return any;
    std::string out = b.anchored_start ? "" : any + " ";
    out += item(b.node);
    if (!b.anchored_end) out += " " + any;
    return out;
  }

  std::string any_char_rule() {
    if (any_.empty()) {
      any_ = sink_.add("char", options_.json_string ? gbnf_json_set(CharSet::all()) : gbnf_class(CharSet::all()));
    }
    return any_;
  }

  uint32_t add(RegexNode node) {
    if (tree_.nodes.size() >= kMaxRewriteNodes) fail("regex: the expression grows too large when rewritten");
    return tree_.add(std::move(node));
  }

  // X without the empty string; nullopt when X matches only the empty string.
  std::optional<uint32_t> nonempty(uint32_t id) {
    deadline_.check("regex");
    if (!nullable(id)) return id;
    const RegexNode n = tree_.nodes[id];  // a copy: add() may reallocate
    switch (n.kind) {
      case RegexKind::kEmpty:
      case RegexKind::kSet: return std::nullopt;
      case RegexKind::kAlt: {
        std::vector<uint32_t> alts;
        for (uint32_t c : n.items) {
          if (auto e = nonempty(c)) alts.push_back(*e);
        }
        if (alts.empty()) return std::nullopt;
        if (alts.size() == 1) return alts[0];
        return add(RegexNode{RegexKind::kAlt, {}, std::move(alts), 0, 0});
      }
      case RegexKind::kSeq: {
        // Every item is nullable: a non-empty match starts with a non-empty
        // match of item i, the items before it matching empty.
        std::vector<uint32_t> alts;
        for (size_t i = 0; i < n.items.size(); ++i) {
          auto first = nonempty(n.items[i]);
          if (!first) continue;
          std::vector<uint32_t> items{*first};
          items.insert(items.end(), n.items.begin() + static_cast<std::ptrdiff_t>(i) + 1, n.items.end());
          alts.push_back(items.size() == 1 ? items[0] : add(RegexNode{RegexKind::kSeq, {}, std::move(items), 0, 0}));
        }
        if (alts.empty()) return std::nullopt;
        if (alts.size() == 1) return alts[0];
        return add(RegexNode{RegexKind::kAlt, {}, std::move(alts), 0, 0});
      }
      case RegexKind::kRepeat: {
        auto inner = nonempty(n.items[0]);
        if (!inner || n.max == 0) return std::nullopt;
        return add(RegexNode{RegexKind::kRepeat, {}, {*inner}, 1, n.max});
      }
    }
    return std::nullopt;
  }

  // Appends the text of a fixed string node to `out`; false if not fixed.
  bool literal(uint32_t id, std::u32string& out) {
    const RegexNode& n = tree_.nodes[id];
    switch (n.kind) {
      case RegexKind::kEmpty: return true;
      case RegexKind::kSet: {
        auto c = n.set.single();
        if (!c) return false;
        if (options_.json_string) {
          append_json_char(out, *c);
        } else {
          out += *c;
        }
        return true;
      }
      case RegexKind::kSeq:
        for (uint32_t c : n.items) {
          if (!literal(c, out)) return false;
        }
        return true;
      default: return false;
    }
  }

  std::string set_text(const CharSet& set) { return options_.json_string ? gbnf_json_set(set) : gbnf_set(set); }

  // The node as a sequence of items, or alternatives separated by '|'.
  std::string seq(uint32_t id) {
    deadline_.check("regex");
    std::u32string text;
    if (literal(id, text)) return text.empty() ? "" : gbnf_literal(text);
    const RegexNode n = tree_.nodes[id];
    switch (n.kind) {
      case RegexKind::kSet: return set_text(n.set);
      case RegexKind::kSeq: return sequence(n.items);
      case RegexKind::kAlt: return alternatives(n.items);
      case RegexKind::kRepeat: return repeat(n);
      case RegexKind::kEmpty: return "";
    }
    return "";
  }

  // The node as one item that a postfix operator may follow.
  std::string item(uint32_t id) {
    std::u32string text;
    if (literal(id, text)) return text.empty() ? "" : gbnf_literal(text);
    const RegexNode& n = tree_.nodes[id];
    if (n.kind == RegexKind::kSet) return set_text(n.set);
    std::string s = seq(id);
    return s.empty() ? "" : "(" + s + ")";
  }

  std::string sequence(const std::vector<uint32_t>& items) {
    std::string out;
    std::u32string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (!out.empty()) out += ' ';
      out += gbnf_literal(pending);
      pending.clear();
    };
    for (uint32_t c : items) {
      if (literal(c, pending)) continue;
      flush();
      std::string s = item(c);
      if (s.empty()) continue;
      if (!out.empty()) out += ' ';
      out += s;
      sink_.check_size(out.size());
    }
    flush();
    return out;
  }

  std::string alternatives(const std::vector<uint32_t>& items) {
    // Fixed strings factor by common prefix, so the matcher stays on one stack.
    LiteralTrie trie;
    bool all_literal = true;
    for (uint32_t c : items) {
      std::u32string text;
      all_literal = all_literal && literal(c, text);
      if (all_literal) trie.insert(text);
    }
    if (all_literal) return trie.emit(sink_, "alt", deadline_);
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string alt = seq(items[i]);
      if (i > 0) out += alt.empty() ? " |" : " | ";
      out += alt;
      sink_.check_size(out.size());
    }
    return out;
  }

  std::string repeat(const RegexNode& n) {
    int min = n.min;
    uint32_t child = n.items[0];
    if (n.max == 0) return "";
    if (nullable(child)) {
      auto e = nonempty(child);
      if (!e) return "";
      child = *e;
      min = 0;
    }
    std::string body = item(child);
    if (tree_.nodes[child].kind == RegexKind::kRepeat) body = "(" + body + ")";
    const int max = n.max;
    if (min == 0 && max == 1) return body + "?";
    if (min == 0 && max == kUnbounded) return body + "*";
    if (min == 1 && max == kUnbounded) return body + "+";
    if (min == 1 && max == 1) return body;
    if (max == kUnbounded) return body + "{" + std::to_string(min) + ",}";
    if (min == max) return body + "{" + std::to_string(min) + "}";
    return body + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
  }

  static constexpr size_t kMaxRewriteNodes = size_t{1} << 22;

  RegexTree& tree_;
  RuleSink& sink_;
  const RegexOptions& options_;
  const Deadline& deadline_;
  std::vector<int8_t> memo_;
  std::string any_;
};

std::pair<int64_t, int64_t> lengths(const RegexTree& tree, uint32_t id) {
  const RegexNode& n = tree.nodes[id];
  switch (n.kind) {
    case RegexKind::kEmpty: return {0, 0};
    case RegexKind::kSet: return {1, 1};
    case RegexKind::kSeq: {
      int64_t lo = 0, hi = 0;
      for (uint32_t c : n.items) {
        auto [a, b] = lengths(tree, c);
        lo = sat_add(lo, a), hi = sat_add(hi, b);
      }
      return {lo, hi};
    }
    case RegexKind::kAlt: {
      int64_t lo = kHuge, hi = 0;
      for (uint32_t c : n.items) {
        auto [a, b] = lengths(tree, c);
        lo = std::min(lo, a);
        hi = (hi < 0 || b < 0) ? -1 : std::max(hi, b);
      }
      return {lo, hi};
    }
    case RegexKind::kRepeat: {
      auto [a, b] = lengths(tree, n.items[0]);
      const int64_t hi = n.max == kUnbounded ? (b == 0 ? 0 : -1) : sat_mul(b, n.max);
      return {sat_mul(a, n.min), hi};
    }
  }
  return {0, 0};
}

}  // namespace

std::string add_regex_rule(std::string_view regex, RuleSink& sink, std::string_view hint, const GrammarLimits& limits,
                           const Deadline& deadline, const RegexOptions& options) {
  RegexTree tree = parse_regex(regex, limits, deadline);
  const std::string name = sink.fresh_name(hint);
  Emitter emitter(tree, sink, options, deadline);
  sink.define(name, emitter.body());
  return name;
}

std::string regex_rules(std::string_view regex, std::string_view root_name, const GrammarLimits& limits,
                        const Deadline& deadline, const RegexOptions& options) {
  RegexTree tree = parse_regex(regex, limits, deadline);
  RuleSink sink(std::string(root_name), limits);
  Emitter emitter(tree, sink, options, deadline);
  sink.define(sink.prefix(), emitter.body());
  return sink.text();
}

std::string regex_rules(std::string_view regex, std::string_view root_name, const GrammarLimits& limits,
                        const Deadline& deadline) {
  return regex_rules(regex, root_name, limits, deadline, RegexOptions{});
}

std::string regex_to_gbnf(std::string_view regex, const GrammarLimits& limits, const Deadline& deadline) {
  return regex_rules(regex, "root", limits, deadline, RegexOptions{});
}

RegexLengthRange regex_length_range(std::string_view regex, const GrammarLimits& limits, const Deadline& deadline,
                                    const RegexOptions& options) {
  const RegexTree tree = parse_regex(regex, limits, deadline);
  RegexLengthRange out{kHuge, 0};
  for (const RegexBranch& b : tree.branches) {
    auto [lo, hi] = lengths(tree, b.node);
    if (options.search && !(b.anchored_start && b.anchored_end)) hi = -1;
    out.min = std::min(out.min, lo);
    out.max = (out.max < 0 || hi < 0) ? -1 : std::max(out.max, hi);
  }
  if (out.max >= kHuge) out.max = -1;
  return out;
}

}  // namespace tokenmill::grammar
