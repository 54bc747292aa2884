#include "model/key_channel_scales.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace tokenmill::model {
namespace {

// Everyday prose, a dialogue line, figures and a little code: the kinds of
// text a server sees, so that every channel shows its usual range.
constexpr const char* kCalibrationText =
    "The harbour town woke slowly that winter. Fishing boats stayed tied to the pier while the wind pushed grey "
    "water against the stones, and the baker on the corner opened an hour late because the flour delivery was "
    "stuck behind a fallen tree. \"We will manage,\" she told the first customer, counting out change for two "
    "loaves and a jar of honey. By noon the sky had cleared. Children ran along the sea wall, a dog chased gulls, "
    "and the ferry from the island arrived with twelve passengers, three bicycles and a crate of apples.\n"
    "Meanwhile, in the library, a student was checking her results: the average of 4.5, 7.25 and 9 is 6.92, and "
    "the experiment had been repeated 18 times between March 3 and April 21, 2024.\n"
    "def average(values):\n    return sum(values) / len(values) if values else 0.0\n"
    "Questions about the schedule should be sent to the office before Friday; replies usually take two days.";

std::vector<int32_t> pseudo_random_tokens(int64_t n_vocab, int64_t count) {
  std::mt19937 rng(20261203);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<int32_t> out(static_cast<size_t>(count));
  for (int32_t& t : out) t = pick(rng);
  return out;
}

}  // namespace

void accumulate_key_magnitudes(const float* k, int64_t T, const KeyHeads& heads, float* magnitude) {
  const int64_t hd = heads.head_dim;
  const int64_t half = heads.rope_dims / 2;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < heads.n_kv_head; ++h) {
      const float* row = k + (t * heads.n_kv_head + h) * hd;
      float* m = magnitude + h * hd;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = heads.neox ? i : 2 * i;
        const int64_t b = heads.neox ? i + half : 2 * i + 1;
        const float length = std::hypot(row[a], row[b]);
        m[a] = std::max(m[a], length);
        m[b] = std::max(m[b], length);
      }
      for (int64_t c = heads.rope_dims; c < hd; ++c) m[c] = std::max(m[c], std::fabs(row[c]));
    }
  }
}

std::vector<float> key_scales_from_magnitudes(std::span<const float> magnitude, int64_t head_dim) {
  TM_CHECK(head_dim > 0 && magnitude.size() % static_cast<size_t>(head_dim) == 0);
  std::vector<float> scale(magnitude.size(), 1.0f);
  for (size_t h0 = 0; h0 < magnitude.size(); h0 += static_cast<size_t>(head_dim)) {
    const auto head = magnitude.subspan(h0, static_cast<size_t>(head_dim));
    const float largest = *std::max_element(head.begin(), head.end());
    if (!(largest > 0) || !std::isfinite(largest)) continue;  // a silent (or broken) head keeps 1
    for (size_t c = 0; c < head.size(); ++c) scale[h0 + c] = std::max(head[c], largest * kKeyScaleFloor);
  }
  return scale;
}

void apply_key_scales(float* q, float* k, int64_t T, const KeyHeads& heads, std::span<const float> scale) {
  const int64_t hd = heads.head_dim;
  TM_CHECK(static_cast<int64_t>(scale.size()) == heads.n_kv_head * hd && heads.n_head % heads.n_kv_head == 0);
  const int64_t per_kv = heads.n_head / heads.n_kv_head;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < heads.n_kv_head; ++h) {
      const float* s = scale.data() + h * hd;
      float* krow = k + (t * heads.n_kv_head + h) * hd;
      for (int64_t c = 0; c < hd; ++c) krow[c] /= s[c];
      for (int64_t j = h * per_kv; j < (h + 1) * per_kv; ++j) {
        float* qrow = q + (t * heads.n_head + j) * hd;
        for (int64_t c = 0; c < hd; ++c) qrow[c] *= s[c];
      }
    }
  }
}

std::vector<int32_t> key_calibration_tokens(const gguf::GgufFile& file, int64_t n_vocab, int64_t max_tokens) {
  TM_CHECK(n_vocab > 0 && max_tokens > 0);
  std::vector<int32_t> tokens;
  if (tokenizer::Tokenizer::present_in(file)) {
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
    tokens = tok.encode(kCalibrationText, /*add_special=*/true, /*parse_special=*/false);
    const bool fits = std::all_of(tokens.begin(), tokens.end(), [&](int32_t t) { return t >= 0 && t < n_vocab; });
    if (!fits || tokens.size() < 16) tokens.clear();
  }
  if (tokens.empty()) tokens = pseudo_random_tokens(n_vocab, 256);
  if (static_cast<int64_t>(tokens.size()) > max_tokens) tokens.resize(static_cast<size_t>(max_tokens));
  return tokens;
}

}  // namespace tokenmill::model
