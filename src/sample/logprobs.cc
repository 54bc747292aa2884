#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/check.h"

namespace tokenmill::sample {

namespace {

using Entry = std::pair<int32_t, float>;

// Strict "a ranks before b": higher logit, then lower id.
bool ranks_before(const Entry& a, const Entry& b) {
  return a.second > b.second || (a.second == b.second && a.first < b.first);
}

}  // namespace

double log_sum_exp(std::span<const float> logits) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : logits) m = std::max(m, v);  // std::max(m, NaN) keeps m
  if (m == -std::numeric_limits<float>::infinity()) return m;
  double sum = 0.0;
  for (float v : logits) {
    if (!std::isnan(v)) sum += std::exp(static_cast<double>(v) - m);
  }
  return m + std::log(sum);
}

float logprob_of(std::span<const float> logits, int32_t id) {
  TM_CHECK_MSG(id >= 0 && static_cast<size_t>(id) < logits.size(), "token id outside the row");
  return static_cast<float>(logits[static_cast<size_t>(id)] - log_sum_exp(logits));
}

std::vector<Entry> top_logprobs(std::span<const float> logits, int n) {
  std::vector<Entry> heap;  // min-heap by rank: heap.front() is the worst kept
  if (n <= 0) return heap;
  const auto limit = static_cast<size_t>(n);
  heap.reserve(std::min(limit, logits.size()));
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    const Entry e{static_cast<int32_t>(i), logits[i]};
    if (heap.size() < limit) {
      heap.push_back(e);
      std::push_heap(heap.begin(), heap.end(), ranks_before);
    } else if (ranks_before(e, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), ranks_before);
      heap.back() = e;
      std::push_heap(heap.begin(), heap.end(), ranks_before);
    }
  }
  std::sort(heap.begin(), heap.end(), ranks_before);
  const double lse = log_sum_exp(logits);
  for (Entry& e : heap) e.second = static_cast<float>(e.second - lse);
  return heap;
}

}  // namespace tokenmill::sample
