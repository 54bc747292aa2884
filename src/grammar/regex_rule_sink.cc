#include "grammar/regex_rule_sink.h"

#include <algorithm>
#include <cctype>

#include "grammar/regex_charset.h"
#include "util/error.h"

namespace tokenmill::grammar {
namespace {

// Alternatives nest at most this deep inside one rule body before the rest
// moves to a helper rule.
constexpr int kMaxNesting = 12;

bool valid_rule_name(std::string_view name) {
  if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
}

// Hints become letter-led [A-Za-z0-9]+ segments joined by '-', and
// numbered duplicates end in -rN: no name of ours ends in -DIGITS, the form
// the GBNF parser gives the helper rules it synthesises (owner-N), and none
// holds '_', which llama.cpp's GBNF does not allow in names.
std::string sanitize_hint(std::string_view hint) {
  std::string out;
  bool segment_start = true;
  for (char c : hint) {
    if (out.size() >= 24) break;
    if (std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80) {
      if (segment_start && std::isdigit(static_cast<unsigned char>(c))) out += 'n';
      out += c;
      segment_start = false;
    } else if (!out.empty() && !segment_start) {
      out += '-';
      segment_start = true;
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "r" : out;
}

}  // namespace

RuleSink::RuleSink(std::string prefix, const GrammarLimits& limits)
    : prefix_(std::move(prefix)), max_bytes_(limits.max_gbnf_bytes) {
  if (!valid_rule_name(prefix_)) fail("rule name '{}' must match [A-Za-z][A-Za-z0-9_-]*", prefix_);
  used_.insert(prefix_);
  rules_.push_back({prefix_, ""});
}

std::string RuleSink::fresh_name(std::string_view hint) {
  const std::string base = prefix_ + "-" + sanitize_hint(hint);
  std::string name = base;
  for (int n = 2; used_.count(name) != 0; ++n) name = base + "-r" + std::to_string(n);
  used_.insert(name);
  return name;
}

void RuleSink::define(const std::string& name, std::string body) {
  check_size(name.size() + body.size() + 6);
  bytes_ += name.size() + body.size() + 6;
  if (name == prefix_) {
    rules_[0].second = std::move(body);
  } else {
    rules_.push_back({name, std::move(body)});
  }
}

std::string RuleSink::add(std::string_view hint, std::string body) {
  std::string name = fresh_name(hint);
  define(name, std::move(body));
  return name;
}

void RuleSink::check_size(size_t bytes) const {
  if (bytes_ + bytes > max_bytes_) {
    fail("the generated grammar is larger than max_gbnf_bytes ({} bytes); simplify the constraint", max_bytes_);
  }
}

std::string RuleSink::text() const {
  std::string out;
  out.reserve(bytes_);
  for (const auto& [name, body] : rules_) {
    out += name;
    out += " ::= ";
    out += body;
    out += '\n';
  }
  return out;
}

void LiteralTrie::insert(std::u32string_view text) {
  uint32_t id = 0;
  for (char32_t c : text) {
    auto& next = nodes_[id].next;
    auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, uint32_t{0}),
                               [](const auto& a, const auto& b) { return a.first < b.first; });
    if (it != next.end() && it->first == c) {
      id = it->second;
      continue;
    }
    const auto child = static_cast<uint32_t>(nodes_.size());
    next.insert(it, {c, child});
    nodes_.emplace_back();  // invalidates `next`; not used after this
    id = child;
  }
  nodes_[id].terminal = true;
}

std::string LiteralTrie::emit(RuleSink& sink, std::string_view hint, const Deadline& deadline) const {
  return emit_all(sink, hint, deadline, false);
}

std::string LiteralTrie::emit_other_keys(RuleSink& sink, std::string_view hint, const Deadline& deadline) const {
  return emit_all(sink, hint, deadline, true);
}

std::string LiteralTrie::emit_all(RuleSink& sink, std::string_view hint, const Deadline& deadline, bool keys) const {
  // Rules for deep nodes are emitted from a work list rather than by
  // recursion, so a string of any length costs no stack.
  std::vector<std::pair<std::string, uint32_t>> pending;
  std::string top = emit_node(0, 0, keys, sink, hint, pending);
  while (!pending.empty()) {
    deadline.check("literal alternatives");
    auto [name, id] = pending.back();
    pending.pop_back();
    sink.define(name, emit_node(id, 0, keys, sink, hint, pending));
  }
  return top;
}

std::string LiteralTrie::emit_node(uint32_t id, int depth, bool keys, RuleSink& sink, std::string_view hint,
                                   std::vector<std::pair<std::string, uint32_t>>& pending) const {
  const Node& node = nodes_[id];
  std::vector<std::string> alts;
  size_t bytes = 0;
  for (const auto& [c, first_child] : node.next) {
    std::u32string lit(1, c);
    uint32_t n = first_child;
    // Keys need an exit at every node, so only plain literals fold chains.
    while (!keys && !nodes_[n].terminal && nodes_[n].next.size() == 1) {
      lit += nodes_[n].next[0].first;
      n = nodes_[n].next[0].second;
    }
    std::string rest;
    const bool leaf = !keys && nodes_[n].next.empty();
    if (!leaf) {
      if (depth + 1 >= kMaxNesting) {
        rest = sink.fresh_name(hint);
        pending.push_back({rest, n});
      } else {
        rest = emit_node(n, depth + 1, keys, sink, hint, pending);
      }
    }
    std::string alt = gbnf_literal(lit);
    if (!rest.empty()) alt += " " + rest;
    bytes += alt.size();
    sink.check_size(bytes);
    alts.push_back(std::move(alt));
  }
  if (keys) {
    CharSet other = json_raw_chars();
    for (const auto& child : node.next) other = other.minus(CharSet::of(child.first));
    if (!other.empty()) alts.push_back(gbnf_set(other) + " " + gbnf_class(json_raw_chars()) + "* \"\\\"\"");
    if (!node.terminal) alts.push_back("\"\\\"\"");
  } else if (node.terminal && !node.next.empty()) {
    alts.push_back("");  // the string may end here
  }
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) {
    if (i > 0) out += alts[i].empty() ? " |" : " | ";
    out += alts[i];
  }
  return out + ")";
}

}  // namespace tokenmill::grammar
