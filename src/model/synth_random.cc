#include "model/synth_random.h"

#include <cmath>
#include <numbers>

namespace tokenmill::model {

uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

void fill_normal(uint64_t tensor_seed, int64_t row, float mean, float std, std::span<float> out) {
  uint64_t state = mix64(tensor_seed ^ mix64(static_cast<uint64_t>(row)));
  constexpr float kTwoPi = 2.0f * std::numbers::pi_v<float>;
  constexpr float kInv24 = 1.0f / 16777216.0f;
  for (size_t i = 0; i < out.size(); i += 2) {
    state += 0x9E3779B97F4A7C15ull;
    const uint64_t bits = mix64(state);
    const float u1 = static_cast<float>((bits >> 40) + 1) * kInv24;  // (0, 1]
    const float u2 = static_cast<float>((bits >> 8) & 0xFFFFFF) * kInv24;
    const float r = std::sqrt(-2.0f * std::log(u1));
    out[i] = mean + std * r * std::cos(kTwoPi * u2);
    if (i + 1 < out.size()) out[i + 1] = mean + std * r * std::sin(kTwoPi * u2);
  }
}

}  // namespace tokenmill::model
