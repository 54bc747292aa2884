#include "grammar/json_schema_number.h"

#include <charconv>
#include <cmath>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "grammar/json_schema_converter.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::grammar {
namespace {

// What follows an integer part: given whether it equals the lower and the
// upper bound's integer part, the fraction (or nothing) it may take.
using Tail = std::function<std::string(bool at_lo, bool at_hi)>;

// How a digit prefix relates to a bound of the same length: equal so far,
// already strictly inside, or already outside (that length is impossible).
enum class Side : uint8_t { kTight, kFree, kDead };

std::string join_alternatives(const std::vector<std::string>& alts) {
  std::vector<std::string> nonempty;
  bool has_empty = false;
  for (const auto& a : alts) {
    if (a.empty()) {
      has_empty = true;
    } else {
      nonempty.push_back(a);
    }
  }
  if (nonempty.empty()) return "";
  if (nonempty.size() == 1 && !has_empty) return nonempty[0];
  std::string out = "(";
  for (size_t i = 0; i < nonempty.size(); ++i) out += (i > 0 ? " | " : "") + nonempty[i];
  return out + (has_empty ? " |)" : ")");
}

std::string digits_text(int d1, int d2) {
  if (d1 == d2) return std::string("\"") + static_cast<char>('0' + d1) + "\"";
  return std::string("[") + static_cast<char>('0' + d1) + "-" + static_cast<char>('0' + d2) + "]";
}

std::string any_digits(int64_t min, int64_t max) {
  if (max == 0) return "";
  if (min == 1 && max == 1) return "[0-9]";
  if (min == max) return "[0-9]{" + std::to_string(min) + "}";
  return "[0-9]{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

std::string seq(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// Decimal strings without leading zeros of the integers in [a, b], 1 <= a
// <= b, as a walk over digit positions that tracks the prefix against a
// (for strings as long as a) and b (as long as b); lengths in between are
// unconstrained. Digits leading to the same state share one alternative.
class UintRange {
 public:
  // lo_matters / hi_matters: whether the tail depends on the integer part
  // equalling a / b; when it does not, a prefix of a followed only by zeros
  // (of b followed only by nines) already bounds nothing.
  UintRange(std::string a, std::string b, const Tail& tail, bool lo_matters, bool hi_matters)
      : a_(std::move(a)), b_(std::move(b)), tail_(tail), lo_matters_(lo_matters), hi_matters_(hi_matters) {}

  std::string expr(size_t k, Side lo, Side hi) const {
    std::vector<std::string> alts;
    if (k >= 1 && valid_length(k, lo, hi))
      alts.push_back(tail_(k == a_.size() && lo == Side::kTight, k == b_.size() && hi == Side::kTight));
    int group_start = -1;
    Side glo = Side::kDead, ghi = Side::kDead;
    auto flush = [&](int end) {
      if (group_start < 0) return;
      alts.push_back(seq(digits_text(group_start, end), next_expr(k + 1, glo, ghi)));
      group_start = -1;
    };
    for (int d = (k == 0 ? 1 : 0); d <= 9; ++d) {
      const Side nlo = next_lo(k, lo, d), nhi = next_hi(k, hi, d);
      if (!any_length(k + 1, nlo, nhi)) {
        flush(d - 1);
        continue;
      }
      if (group_start >= 0 && (nlo != glo || nhi != ghi)) flush(d - 1);
      if (group_start < 0) group_start = d, glo = nlo, ghi = nhi;
    }
    flush(9);
    return join_alternatives(alts);
  }

 private:
  // After k digits in state (lo, hi): free states end in a digit run.
  std::string next_expr(size_t k, Side lo, Side hi) const {
    if (lo == Side::kTight || hi == Side::kTight) return expr(k, lo, hi);
    int64_t min_len = -1, max_len = -1;
    for (size_t len = k; len <= b_.size(); ++len) {
      if (!valid_length(len, lo, hi)) continue;
      if (min_len < 0) min_len = static_cast<int64_t>(len);
      max_len = static_cast<int64_t>(len);
    }
    const auto kk = static_cast<int64_t>(k);
    return seq(any_digits(min_len - kk, max_len - kk), tail_(false, false));
  }

  bool valid_length(size_t len, Side lo, Side hi) const {
    const size_t la = a_.size(), lb = b_.size();
    if (len < la || len > lb) return false;
    if (la == lb) return lo != Side::kDead && hi != Side::kDead;
    if (len == la) return lo != Side::kDead;
    if (len == lb) return hi != Side::kDead;
    return true;
  }

  bool any_length(size_t k, Side lo, Side hi) const {
    for (size_t len = k; len <= b_.size(); ++len) {
      if (valid_length(len, lo, hi)) return true;
    }
    return false;
  }

  Side next_lo(size_t k, Side lo, int d) const {
    if (k >= a_.size()) return Side::kDead;
    if (lo != Side::kTight) return lo;
    const int bound = a_[k] - '0';
    if (d != bound) return d > bound ? Side::kFree : Side::kDead;
    const bool rest_zero = a_.find_first_not_of('0', k + 1) == std::string::npos;
    return rest_zero && !lo_matters_ ? Side::kFree : Side::kTight;
  }

  Side next_hi(size_t k, Side hi, int d) const {
    if (k >= b_.size()) return Side::kDead;
    if (hi != Side::kTight) return hi;
    const int bound = b_[k] - '0';
    if (d != bound) return d < bound ? Side::kFree : Side::kDead;
    const bool rest_nine = b_.find_first_not_of('9', k + 1) == std::string::npos;
    return rest_nine && !hi_matters_ ? Side::kFree : Side::kTight;
  }

  std::string a_, b_;
  const Tail& tail_;
  bool lo_matters_, hi_matters_;
};

// Integers in [lo, hi], 0 <= lo <= hi, zero written as "0".
std::string uint_range(int64_t lo, int64_t hi, const Tail& tail, bool lo_matters, bool hi_matters) {
  std::vector<std::string> alts;
  if (lo == 0) alts.push_back(seq("\"0\"", tail(true, hi == 0)));
  if (hi >= 1) {
    // Integer parts above a zero lower bound are free of its fraction.
    const Tail inner = [&](bool at_lo, bool at_hi) { return tail(at_lo && lo != 0, at_hi); };
    UintRange range(std::to_string(std::max<int64_t>(lo, 1)), std::to_string(hi), inner, lo_matters && lo != 0,
                    hi_matters);
    alts.push_back(range.expr(0, Side::kTight, Side::kTight));
  }
  return join_alternatives(alts);
}

// Fraction digits (1 to frac_digits of them, read as padded with zeros)
// between lo_f and hi_f, strings of exactly frac_digits digits.
class FractionRange {
 public:
  FractionRange(std::string lo_f, std::string hi_f) : lo_(std::move(lo_f)), hi_(std::move(hi_f)) {}

  // The whole tail: "." and digits, or nothing when zero is allowed.
  std::string tail() const {
    if (lo_.empty()) return "";
    const std::string digits = "\".\" " + expr(0, true, true);
    return lo_.find_first_not_of('0') == std::string::npos ? "(" + digits + ")?" : digits;
  }

 private:
  std::string expr(size_t j, bool lo_tight, bool hi_tight) const {
    // A bound whose remaining digits are all 0 (below) or all 9 (above)
    // constrains nothing any more.
    if (lo_tight && lo_.find_first_not_of('0', j) == std::string::npos) lo_tight = false;
    if (hi_tight && hi_.find_first_not_of('9', j) == std::string::npos) hi_tight = false;
    if (!lo_tight && !hi_tight && j >= 1) return any_digits(0, static_cast<int64_t>(lo_.size() - j));
    if (!lo_tight && !hi_tight) return any_digits(1, static_cast<int64_t>(lo_.size()));
    std::vector<std::string> alts;
    if (j >= 1 && (!lo_tight || lo_.find_first_not_of('0', j) == std::string::npos)) alts.push_back("");
    if (j < lo_.size()) {
      const int lo_d = lo_tight ? lo_[j] - '0' : 0;
      const int hi_d = hi_tight ? hi_[j] - '0' : 9;
      for (int d = lo_d; d <= hi_d;) {
        const bool nlo = lo_tight && d == lo_d;
        const bool nhi = hi_tight && d == hi_d;
        int end = d;
        if (!nlo && !nhi) {
          end = hi_tight ? hi_d - 1 : 9;  // every digit strictly inside
          alts.push_back(seq(digits_text(d, end), any_digits(0, static_cast<int64_t>(lo_.size() - j - 1))));
        } else {
          alts.push_back(seq(digits_text(d, d), expr(j + 1, nlo, nhi)));
        }
        d = end + 1;
      }
    }
    return join_alternatives(alts);
  }

  std::string lo_, hi_;
};

int64_t pow10(int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

std::string padded(int64_t v, int width) {
  std::string s = std::to_string(v);
  return std::string(static_cast<size_t>(width) - s.size(), '0') + s;
}

// Magnitudes in [lo, hi] (units of 10^-frac_digits, 0 <= lo <= hi).
std::string magnitude_range(int64_t lo, int64_t hi, int frac_digits) {
  const int64_t scale = pow10(frac_digits);
  const std::string lo_f = frac_digits > 0 ? padded(lo % scale, frac_digits) : "";
  const std::string hi_f = frac_digits > 0 ? padded(hi % scale, frac_digits) : "";
  const std::string zeros(static_cast<size_t>(frac_digits), '0');
  const std::string nines(static_cast<size_t>(frac_digits), '9');
  const Tail tail = [&](bool at_lo, bool at_hi) {
    return FractionRange(at_lo ? lo_f : zeros, at_hi ? hi_f : nines).tail();
  };
  return uint_range(lo / scale, hi / scale, tail, lo_f.find_first_not_of('0') != std::string::npos,
                    hi_f.find_first_not_of('9') != std::string::npos);
}

}  // namespace

std::string gbnf_decimal_range(int64_t lo, int64_t hi, int frac_digits) {
  TM_CHECK(lo <= hi && lo >= -kMaxRangeMagnitude && hi <= kMaxRangeMagnitude);
  TM_CHECK(frac_digits >= 0 && frac_digits <= 17);
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back("\"-\" " + magnitude_range(std::max<int64_t>(1, -hi), -lo, frac_digits));
  if (hi >= 0) alts.push_back(magnitude_range(std::max<int64_t>(0, lo), hi, frac_digits));
  return join_alternatives(alts);
}

std::string gbnf_integer_range(int64_t lo, int64_t hi) { return gbnf_decimal_range(lo, hi, 0); }

namespace {

// Unbounded sides of an integer range stop at 16 digits, so a sampled model
// cannot write digits forever.
constexpr int64_t kDefaultIntegerMagnitude = 9'999'999'999'999'999;

// Bounded numbers: at most 12 integer and kFractionDigits fraction digits,
// as integers scaled by 10^kFractionDigits.
constexpr int kFractionDigits = 6;

struct BoundKey {
  const char* key;
  bool lower;
  bool exclusive;
};
constexpr BoundKey kBoundKeys[] = {
    {"minimum", true, false},
    {"exclusiveMinimum", true, true},
    {"maximum", false, false},
    {"exclusiveMaximum", false, true},
};

const Json* bound_value(const Json& schema, const BoundKey& b, const std::string& ptr) {
  auto it = schema.find(b.key);
  if (it == schema.end()) return nullptr;
  if (!it->is_number()) fail("'{}' at {} must be a number", b.key, where(ptr));
  return &*it;
}

// The tightest integer bound implied by `v`; nullopt when the bound lies
// beyond the range the grammar can reach anyway.
std::optional<int64_t> integer_bound(const Json& v, const BoundKey& b, const std::string& ptr) {
  long double x = 0;
  if (v.is_number_unsigned() || v.is_number_integer()) {
    x = v.is_number_unsigned() ? static_cast<long double>(v.get<uint64_t>())
                               : static_cast<long double>(v.get<int64_t>());
    if (b.exclusive) x += b.lower ? 1 : -1;
  } else {
    const auto d = static_cast<long double>(v.get<double>());
    if (b.lower) {
      x = b.exclusive ? std::floor(d) + 1 : std::ceil(d);
    } else {
      x = b.exclusive ? std::ceil(d) - 1 : std::floor(d);
    }
  }
  const auto max = static_cast<long double>(kMaxRangeMagnitude);
  if (b.lower ? x < -max : x > max) return std::nullopt;
  if (b.lower ? x > max : x < -max) {
    fail("'{}' {} at {} is beyond the supported range (magnitude below 10^18)", b.key, v.dump(), where(ptr));
  }
  return static_cast<int64_t>(x);
}

std::string scaled_text(int64_t m) {
  const int64_t scale = 1'000'000;
  std::string frac = std::to_string((m < 0 ? -m : m) % scale);
  return std::string(m < 0 ? "-" : "") + std::to_string((m < 0 ? -m : m) / scale) + "." +
         std::string(static_cast<size_t>(kFractionDigits) - frac.size(), '0') + frac;
}

// The value Python's float() gives the text of m (correctly rounded, as
// from_chars is), so bounds are checked exactly as the validator will.
double scaled_value(int64_t m) {
  const std::string text = scaled_text(m);
  double d = 0;
  std::from_chars(text.data(), text.data() + text.size(), d);
  return d;
}

std::string parenthesized(const std::string& expr) {
  std::string out = "(";
  out += expr;
  out += ')';
  return out;
}

bool satisfies(int64_t m, double bound, const BoundKey& b) {
  const double v = scaled_value(m);
  if (b.lower) return b.exclusive ? v > bound : v >= bound;
  return b.exclusive ? v < bound : v <= bound;
}

// minimum above maximum (either form) is an invalid schema, reported as such
// rather than as an empty range.
void check_bounds_order(const Json& schema, const std::string& ptr) {
  for (const char* lo_key : {"minimum", "exclusiveMinimum"}) {
    for (const char* hi_key : {"maximum", "exclusiveMaximum"}) {
      auto lo = schema.find(lo_key), hi = schema.find(hi_key);
      if (lo == schema.end() || hi == schema.end() || !lo->is_number() || !hi->is_number()) continue;
      if (nlohmann::json(*lo) > nlohmann::json(*hi)) {
        fail("{} ({}) is greater than {} ({}) at {}", lo_key, lo->dump(), hi_key, hi->dump(), where(ptr));
      }
    }
  }
}

}  // namespace

std::string SchemaConverter::gen_integer(const Json& schema, const std::string& ptr) {
  check_bounds_order(schema, ptr);
  std::optional<int64_t> lo, hi;
  for (const BoundKey& b : kBoundKeys) {
    const Json* v = bound_value(schema, b, ptr);
    if (v == nullptr) continue;
    const std::optional<int64_t> x = integer_bound(*v, b, ptr);
    if (!x) continue;
    if (b.lower) lo = lo ? std::max(*lo, *x) : *x;
    if (!b.lower) hi = hi ? std::min(*hi, *x) : *x;
  }
  if (!lo) lo = (hi && *hi < -kDefaultIntegerMagnitude) ? -kMaxRangeMagnitude : -kDefaultIntegerMagnitude;
  if (!hi) hi = *lo > kDefaultIntegerMagnitude ? kMaxRangeMagnitude : kDefaultIntegerMagnitude;
  if (*lo > *hi) fail("no integer satisfies the bounds at {}: the minimum is above the maximum", where(ptr));
  return parenthesized(gbnf_integer_range(*lo, *hi));
}

std::string SchemaConverter::gen_number(const Json& schema, const std::string& ptr) {
  check_bounds_order(schema, ptr);
  int64_t lo = -kMaxRangeMagnitude, hi = kMaxRangeMagnitude;
  bool bounded = false;
  for (const BoundKey& b : kBoundKeys) {
    const Json* v = bound_value(schema, b, ptr);
    if (v == nullptr) continue;
    bounded = true;
    const double bound = v->get<double>();
    // The texts that pass form an interval of m; find its end by bisection.
    int64_t a = -kMaxRangeMagnitude, z = kMaxRangeMagnitude;
    if (b.lower) {
      if (!satisfies(z, bound, b)) fail("'{}' {} at {} is beyond the supported range", b.key, v->dump(), where(ptr));
      while (a < z) {
        const int64_t mid = a + (z - a) / 2;
        satisfies(mid, bound, b) ? z = mid : a = mid + 1;
      }
      lo = std::max(lo, a);
    } else {
      if (!satisfies(a, bound, b)) fail("'{}' {} at {} is beyond the supported range", b.key, v->dump(), where(ptr));
      while (a < z) {
        const int64_t mid = a + (z - a + 1) / 2;
        satisfies(mid, bound, b) ? a = mid : z = mid - 1;
      }
      hi = std::min(hi, a);
    }
  }
  if (!bounded) return primitive("number");
  if (lo > hi) fail("no number satisfies the bounds at {}: the minimum is above the maximum", where(ptr));
  return parenthesized(gbnf_decimal_range(lo, hi, kFractionDigits));
}

}  // namespace tokenmill::grammar
