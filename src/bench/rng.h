// Deterministic random numbers for traffic generation. The standard library's
// distributions are implementation-defined, so the same seed could give other
// request sequences with another libstdc++; these are written out here so a
// spec and a seed give the same sequence, byte for byte, everywhere.
//
// Generator: xoshiro256** seeded through SplitMix64 (Blackman and Vigna).
// Not thread-safe: one Rng per stream of decisions.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "util/check.h"

namespace tokenmill::bench {

// SplitMix64 step: used to expand seeds and to derive independent streams.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A seed for sub-stream `stream` of `seed` (e.g. one per cell and purpose),
// so that adding requests to one cell does not shift another cell's draws.
inline uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  uint64_t s = seed ^ (stream * 0xD1B54A32D192ED03ull);
  splitmix64(s);
  return splitmix64(s);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t s = seed;
    for (uint64_t& word : state_) word = splitmix64(s);
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Exponential with the given rate (mean 1/rate). Precondition: rate > 0.
  double exponential(double rate) { return -std::log1p(-uniform()) / rate; }

  // Uniform integer in [lo, hi] (inclusive), without modulo bias.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    TM_CHECK(lo <= hi);
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    if (span == 0) return static_cast<int64_t>(next_u64());  // the full 64-bit range
    const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
    uint64_t x = next_u64();
    while (x >= limit) x = next_u64();
    return lo + static_cast<int64_t>(x % span);
  }

  // Index i with probability weights[i] / sum(weights). Precondition: the
  // weights are >= 0 with a positive sum.
  size_t weighted_index(std::span<const double> weights) {
    double total = 0;
    for (double w : weights) total += w;
    TM_CHECK(total > 0);
    const double u = uniform() * total;
    double acc = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      acc += weights[i];
      if (u < acc) return i;
    }
    // Rounding can leave u == total: the last positive weight takes it.
    for (size_t i = weights.size(); i-- > 0;) {
      if (weights[i] > 0) return i;
    }
    return 0;
  }

  // True with probability p.
  bool bernoulli(double p) { return uniform() < p; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace tokenmill::bench
