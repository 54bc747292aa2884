#include "engine/embedding_pool.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"

namespace tokenmill::engine {

std::string_view pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::kMean: return "mean";
    case Pooling::kLast: return "last";
  }
  return "mean";
}

std::optional<Pooling> parse_pooling(std::string_view name) {
  if (name == "mean") return Pooling::kMean;
  if (name == "last") return Pooling::kLast;
  return std::nullopt;
}

EmbeddingPool::EmbeddingPool(Pooling pooling, int64_t num_positions, int64_t n_embd)
    : pooling_(pooling), num_positions_(num_positions), n_embd_(n_embd), sum_(static_cast<size_t>(n_embd), 0.0) {
  TM_CHECK(num_positions >= 1 && n_embd >= 1);
}

bool EmbeddingPool::wants(int64_t start_pos, int64_t num_tokens) const {
  const int64_t end = start_pos + num_tokens;
  if (pooling_ == Pooling::kLast) return !have_last_ && start_pos < num_positions_ && num_positions_ <= end;
  return num_added_ < num_positions_ && start_pos <= num_added_ && num_added_ < end;
}

void EmbeddingPool::add(int64_t start_pos, std::span<const float> rows) {
  TM_CHECK(rows.size() % static_cast<size_t>(n_embd_) == 0);
  const int64_t num_rows = static_cast<int64_t>(rows.size()) / n_embd_;
  const auto row = [&](int64_t pos) { return rows.subspan(static_cast<size_t>((pos - start_pos) * n_embd_)); };
  if (pooling_ == Pooling::kLast) {
    const int64_t last = num_positions_ - 1;
    if (have_last_ || last < start_pos || last >= start_pos + num_rows) return;
    const std::span<const float> h = row(last);
    for (int64_t d = 0; d < n_embd_; ++d) sum_[static_cast<size_t>(d)] = h[static_cast<size_t>(d)];
    have_last_ = true;
    return;
  }
  TM_CHECK(start_pos <= num_added_);  // a gap would leave positions out of the mean
  const int64_t end = std::min(start_pos + num_rows, num_positions_);
  for (int64_t pos = num_added_; pos < end; ++pos) {
    const std::span<const float> h = row(pos);
    // Double sums: thousands of float additions would cost digits.
    for (int64_t d = 0; d < n_embd_; ++d) sum_[static_cast<size_t>(d)] += h[static_cast<size_t>(d)];
  }
  num_added_ = std::max(num_added_, end);
}

bool EmbeddingPool::complete() const { return pooling_ == Pooling::kLast ? have_last_ : num_added_ == num_positions_; }

std::vector<float> EmbeddingPool::finish() const {
  TM_CHECK(complete());
  // The mean's 1/n factor cancels in the normalisation; it is applied anyway
  // so that the vector before normalising is the mean, not a sum.
  const double scale = pooling_ == Pooling::kMean ? 1.0 / static_cast<double>(num_positions_) : 1.0;
  double norm2 = 0.0;
  for (double v : sum_) norm2 += (v * scale) * (v * scale);
  const double inv = norm2 > 0.0 ? 1.0 / std::sqrt(norm2) : 0.0;
  std::vector<float> out(sum_.size());
  for (size_t d = 0; d < sum_.size(); ++d) out[d] = static_cast<float>(sum_[d] * scale * inv);
  return out;
}

}  // namespace tokenmill::engine
