// The deterministic random numbers of the synthetic files (models and LoRA
// adapters): splitmix64 streams and Box-Muller normals, so the same seed
// gives byte-identical files whatever the thread count.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tokenmill::model {

// splitmix64's finaliser: a well-mixed 64-bit value of z.
uint64_t mix64(uint64_t z);
// FNV-1a of s (tensor names into seeds).
uint64_t fnv1a(std::string_view s);
// Fills out with mean + std * N(0, 1). Each row has its own stream derived
// from (tensor seed, row), so rows can be generated in any order on any
// thread and the file still comes out the same.
void fill_normal(uint64_t tensor_seed, int64_t row, float mean, float std, std::span<float> out);

}  // namespace tokenmill::model
