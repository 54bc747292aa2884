#include "util/bounded_json.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tokenmill::util {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

JsonLimitError refusal_of(std::string_view text, const JsonLimits& limits) {
  try {
    parse_bounded<ordered_json>(text, limits);
  } catch (const JsonLimitError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << text.substr(0, 80);
  return JsonLimitError(JsonRefusal::kSyntax, "");
}

// A random document: every JSON type, nesting, escapes, duplicate-free keys.
template <typename Json>
Json random_document(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 4 ? 5 : 7);
  switch (kind(rng)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng()) - (int64_t{1} << 31);
    case 3: return static_cast<double>(rng()) / 7.0;
    case 4: return static_cast<uint64_t>(rng()) << 32 | rng();
    case 5: {
      std::string s;
      const char* pieces[] = {"a", "b", "\"", "\\", "\n", "\x01", "\xc3\xa9", " ", "z", "\xf0\x9f\x99\x82"};
      for (int n = static_cast<int>(rng() % 40); n > 0; --n) s += pieces[rng() % 10];
      return s;
    }
    case 6: {
      Json a = Json::array();
      for (int n = static_cast<int>(rng() % 6); n > 0; --n) a.push_back(random_document<Json>(rng, depth + 1));
      return a;
    }
    default: {
      Json o = Json::object();
      for (int n = static_cast<int>(rng() % 6); n > 0; --n)
        o["k" + std::to_string(rng() % 1000)] = random_document<Json>(rng, depth + 1);
      return o;
    }
  }
}

TEST(BoundedJson, RandomDocumentsParseAsNlohmannParsesThem) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const ordered_json doc = random_document<ordered_json>(rng, 0);
    const std::string text = doc.dump(i % 2 == 0 ? -1 : 2);
    const ordered_json ours = parse_bounded<ordered_json>(text, JsonLimits{});
    EXPECT_EQ(ours, ordered_json::parse(text)) << text;
    EXPECT_EQ(ours.dump(), doc.dump()) << "key order must be kept: " << text;
    EXPECT_EQ(parse_bounded<json>(text, JsonLimits{}), json::parse(text)) << text;
  }
}

TEST(BoundedJson, DuplicateKeysKeepTheFirstPlaceAndTheLastValue) {
  const std::string text = R"({"b": 1, "a": [1], "b": {"x": 2}, "c": 3, "a": null})";
  const ordered_json ours = parse_bounded<ordered_json>(text, JsonLimits{});
  EXPECT_EQ(ours, ordered_json::parse(text));
  EXPECT_EQ(ours.dump(), R"({"b":{"x":2},"a":null,"c":3})");
  EXPECT_EQ(parse_bounded<json>(text, JsonLimits{}), json::parse(text));
}

TEST(BoundedJson, ScalarsAtTheRoot) {
  for (const char* text : {"null", "true", "-0.5e3", "18446744073709551615", "\"\\u00e9\"", "[]", "{}"})
    EXPECT_EQ(parse_bounded<ordered_json>(text, JsonLimits{}), ordered_json::parse(text)) << text;
}

TEST(BoundedJson, SyntaxErrorsSayWhere) {
  const JsonLimitError e = refusal_of(R"({"a": 1,})", JsonLimits{});
  EXPECT_EQ(e.why(), JsonRefusal::kSyntax);
  EXPECT_NE(std::string(e.what()).find("column 9"), std::string::npos) << e.what();
  EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
  EXPECT_EQ(refusal_of(R"({"t": 1e999})", JsonLimits{}).why(), JsonRefusal::kSyntax);  // overflow
  EXPECT_EQ(refusal_of("", JsonLimits{}).why(), JsonRefusal::kSyntax);
  EXPECT_EQ(refusal_of("[1] [2]", JsonLimits{}).why(), JsonRefusal::kSyntax);
}

TEST(BoundedJson, DepthIsBoundedAtTheFirstLevelPastIt) {
  JsonLimits limits;
  limits.max_depth = 8;
  const std::string ok = std::string(8, '[') + std::string(8, ']');
  EXPECT_EQ(parse_bounded<ordered_json>(ok, limits), ordered_json::parse(ok));
  // Unterminated: refused for depth before the missing brackets matter.
  const JsonLimitError e = refusal_of(std::string(100000, '['), limits);
  EXPECT_EQ(e.why(), JsonRefusal::kTooDeep);
  EXPECT_NE(std::string(e.what()).find("deeper than 8 levels"), std::string::npos) << e.what();
}

std::string object_of(size_t n_keys, const std::string& value = "1") {
  std::string text = "{";
  for (size_t i = 0; i < n_keys; ++i) text += (i ? ",\"" : "\"") + std::to_string(i) + "\":" + value;
  return text + "}";
}

TEST(BoundedJson, KeysPerObjectAreBounded) {
  JsonLimits limits;
  limits.max_object_keys = 100;
  EXPECT_EQ(parse_bounded<ordered_json>(object_of(100), limits).size(), 100u);
  const JsonLimitError e = refusal_of(object_of(101), limits);
  EXPECT_EQ(e.why(), JsonRefusal::kTooManyKeys);
  EXPECT_NE(std::string(e.what()).find("more than 100 keys"), std::string::npos) << e.what();
  // Duplicates count too: a flood of one key is refused the same way.
  std::string dup = "{";
  for (int i = 0; i < 101; ++i) dup += std::string(i ? "," : "") + "\"a\":1";
  EXPECT_EQ(refusal_of(dup + "}", limits).why(), JsonRefusal::kTooManyKeys);
}

TEST(BoundedJson, ManyKeysKeepTheirOrder) {
  // 100 000 keys: a linear search per key (ordered_json's own parser)
  // would compare 5e9 strings; this one hashes.
  JsonLimits limits;
  limits.max_object_keys = 200000;
  const ordered_json o = parse_bounded<ordered_json>(object_of(100000), limits);
  ASSERT_EQ(o.size(), 100000u);
  size_t i = 0;
  for (auto it = o.begin(); it != o.end(); ++it, ++i) ASSERT_EQ(it.key(), std::to_string(i));
}

TEST(BoundedJson, MemoryIsBoundedWhileBuilding) {
  JsonLimits limits;
  limits.max_bytes = 1 << 20;
  std::string many = "[";
  for (int i = 0; i < 100000; ++i) many += i ? ",[]" : "[]";
  many += "]";
  const JsonLimitError e = refusal_of(many, limits);
  EXPECT_EQ(e.why(), JsonRefusal::kTooLarge);
  EXPECT_NE(std::string(e.what()).find("1.0 MiB"), std::string::npos) << e.what();
  // A document within the bound parses, and its estimate is what was charged.
  const std::string small = R"({"prompt": "a long enough string to leave the small buffer", "ids": [1, 2, 3]})";
  const ordered_json doc = parse_bounded<ordered_json>(small, limits);
  EXPECT_LT(estimated_json_bytes(doc), limits.max_bytes);
  EXPECT_GT(estimated_json_bytes(doc), small.size());
}

// The estimate must not undercount what the allocator really hands out, or
// the bound would not bound memory.
TEST(BoundedJson, EstimateCoversTheHeapTheTreeTakes) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's allocator keeps its own books; mallinfo2 does not see them";
  std::string arrays = "[", ints = "[", strings = "[", keys = "{";
  for (int i = 0; i < 20000; ++i) {
    const std::string sep = i ? "," : "";
    arrays += sep + "[[],{}]";
    ints += sep + std::to_string(i % 10);
    strings += sep + "\"" + std::string(20 + i % 50, 'x') + "\"";
    keys += sep + "\"key number " + std::to_string(i) + " of many\": [" + std::to_string(i) + "]";
  }
  for (const std::string& text : {arrays + "]", ints + "]", strings + "]", keys + "}"}) {
    JsonLimits limits;
    limits.max_object_keys = 1 << 20;
    // Small chunks from the heap, large ones (a big vector) mapped apart.
    auto heap = [] {
      const struct mallinfo2 m = mallinfo2();
      return m.uordblks + m.hblkhd;
    };
    const size_t before = heap();
    const ordered_json doc = parse_bounded<ordered_json>(text, limits);
    const size_t used = heap() - before;
    EXPECT_GE(estimated_json_bytes(doc), used) << text.substr(0, 40);
    EXPECT_LE(estimated_json_bytes(doc), 4 * used + 4096) << "an estimate far above the heap refuses real requests";
  }
}

TEST(BoundedJson, SharedBudgetIsDrawnAndGivenBack) {
  SharedByteBudget shared(4 << 20);
  JsonLimits limits;
  limits.shared = &shared;
  const std::string doc = object_of(1000);
  EXPECT_EQ(parse_bounded<ordered_json>(doc, limits).size(), 1000u);
  EXPECT_EQ(shared.in_use(), 0u);
  // A refusal gives back what it drew, too.
  limits.max_object_keys = 10;
  EXPECT_EQ(refusal_of(doc, limits).why(), JsonRefusal::kTooManyKeys);
  EXPECT_EQ(shared.in_use(), 0u);
}

TEST(BoundedJson, SharedBudgetSpentRefusesAtOnce) {
  SharedByteBudget shared(4 << 20);
  ASSERT_TRUE(shared.try_acquire(3 << 20));  // someone else's parse
  JsonLimits limits;
  limits.shared = &shared;
  // The text's size is drawn before any byte is read.
  const std::string big = "[" + std::string(2 << 20, ' ') + "]";
  const JsonLimitError e = refusal_of(big, limits);
  EXPECT_EQ(e.why(), JsonRefusal::kBusy);
  EXPECT_NE(std::string(e.what()).find("retry"), std::string::npos) << e.what();
  EXPECT_EQ(shared.in_use(), size_t{3} << 20);
  shared.release(3 << 20);
  EXPECT_EQ(parse_bounded<ordered_json>(big, limits), ordered_json::array());
  EXPECT_EQ(shared.in_use(), 0u);
}

TEST(BoundedJson, SharedBudgetHoldsUnderConcurrentParses) {
  // Eight threads parse documents of ~1.5 MiB estimated against a 4 MiB
  // budget: some are refused as busy, none overdraws, all is given back.
  SharedByteBudget shared(4 << 20);
  JsonLimits limits;
  limits.shared = &shared;
  std::string doc = "[";
  for (int i = 0; i < 40000; ++i) doc += i ? ",1" : "1";
  doc += "]";
  std::atomic<int> parsed{0}, busy{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        try {
          parse_bounded<ordered_json>(doc, limits);
          ++parsed;
        } catch (const JsonLimitError& e) {
          EXPECT_EQ(e.why(), JsonRefusal::kBusy);
          ++busy;
        }
        EXPECT_LE(shared.in_use(), shared.capacity());
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(parsed + busy, 160);
  EXPECT_GT(parsed.load(), 0);
  EXPECT_EQ(shared.in_use(), 0u);
}

TEST(SharedByteBudget, NeverOverdraws) {
  SharedByteBudget b(10);
  EXPECT_TRUE(b.try_acquire(6));
  EXPECT_FALSE(b.try_acquire(5));
  EXPECT_TRUE(b.try_acquire(4));
  EXPECT_FALSE(b.try_acquire(1));
  EXPECT_FALSE(b.try_acquire(SIZE_MAX));
  b.release(10);
  EXPECT_EQ(b.in_use(), 0u);
}

}  // namespace
}  // namespace tokenmill::util
