// JSON parsing with a budget, for documents a stranger sends (request
// bodies, schemas inside them, uploaded tickets). nlohmann's own parser
// builds the whole tree before anyone can look at it, and its
// insertion-ordered object (ordered_json) looks every new key up by a
// linear scan: an object of n keys costs O(n^2) (100 000 keys: 10 s), and a
// body of small values costs 30-45x its size in memory. This parser builds
// the same tree through nlohmann's SAX interface in linear time (a hash
// index per open object finds duplicate keys) and checks the budget on
// every event, so a hostile document is refused after the first key or
// byte past the limit, not after it has been built.
//
// Duplicate keys keep the first position and the last value, as
// nlohmann's DOM parser does.
//
// Thread-safety: parse_bounded is reentrant; a SharedByteBudget may be shared
// by any number of threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tokenmill::util {

// Bytes that several threads draw from at once (the server-wide bound on
// memory held by request parsing). Lock-free; never blocks.
class SharedByteBudget {
 public:
  explicit SharedByteBudget(size_t capacity) : capacity_(capacity) {}
  // Takes `n` bytes when they fit, else nothing; true when taken.
  bool try_acquire(size_t n);
  void release(size_t n);
  size_t capacity() const { return capacity_; }
  size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

 private:
  const size_t capacity_;
  std::atomic<size_t> in_use_{0};
};

struct JsonLimits {
  int max_depth = 1024;                 // nesting of arrays and objects
  size_t max_object_keys = 4096;        // members of one object
  size_t max_bytes = size_t{64} << 20;  // estimated memory of the tree being built
  // Optional: the document's own bytes and its tree's estimated memory are
  // also drawn from here while it is parsed (the document's size and 1 MiB
  // at once, then in 1 MiB steps) and given back when parse_bounded
  // returns. Must outlive the call.
  SharedByteBudget* shared = nullptr;
};

// Why a document was refused.
enum class JsonRefusal {
  kSyntax,       // not JSON; message names the byte offset
  kTooDeep,      // nesting past max_depth
  kTooManyKeys,  // an object past max_object_keys
  kTooLarge,     // the tree past max_bytes
  kBusy,         // the shared budget is spent (other documents hold it)
};

class JsonLimitError : public std::runtime_error {
 public:
  JsonLimitError(JsonRefusal why, const std::string& message) : std::runtime_error(message), why_(why) {}
  JsonRefusal why() const { return why_; }

 private:
  JsonRefusal why_;
};

// Parses `text` into a tree of type Json (nlohmann::json or
// nlohmann::ordered_json). Throws JsonLimitError with a message that says
// what was over which limit. Cost: O(text.size()) time; memory about the
// tree's (which max_bytes bounds) plus one hash entry per key of the open
// objects.
template <typename Json>
Json parse_bounded(std::string_view text, const JsonLimits& limits);

// The estimate parse_bounded charges for a tree (a test's yardstick).
template <typename Json>
size_t estimated_json_bytes(const Json& value);

}  // namespace tokenmill::util
