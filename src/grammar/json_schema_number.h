// GBNF expressions for the JSON numbers inside a range, built digit by digit
// so that the grammar is deterministic (every alternative starts with a
// different character) and exact at the bounds. Used by the JSON Schema
// converter for minimum/maximum and their exclusive forms.
// Thread-safety: pure functions.
#pragma once
#include <cstdint>
#include <string>

namespace tokenmill::grammar {

// Largest magnitude the range functions take: 10^18 - 1.
inline constexpr int64_t kMaxRangeMagnitude = 999'999'999'999'999'999;

// Every integer in [lo, hi] as JSON writes it: no leading zeros, no "-0".
// Precondition: lo <= hi, both within +-kMaxRangeMagnitude.
std::string gbnf_integer_range(int64_t lo, int64_t hi);

// Every number in [lo, hi] x 10^-frac_digits written without an exponent
// and with at most frac_digits fraction digits (trailing zeros allowed, so
// 1.5 and 1.50 both match), no "-0". Precondition as above; frac_digits in
// [0, 17].
std::string gbnf_decimal_range(int64_t lo, int64_t hi, int frac_digits);

}  // namespace tokenmill::grammar
