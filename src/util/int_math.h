// Integer rounding shared by the block and tile arithmetic of several layers.
#pragma once

#include <cstdint>

namespace tokenmill {

// ceil(a / b) for a >= 0, b > 0.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The smallest multiple of b that is >= a, for a >= 0, b > 0.
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

}  // namespace tokenmill
