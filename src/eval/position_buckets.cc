#include "eval/position_buckets.h"

#include <algorithm>
#include <cmath>

namespace tokenmill::eval {

double quantile(std::vector<float>& v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double h = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (h - static_cast<double>(lo)) * (double(v[hi]) - v[lo]);
}

PositionBuckets::PositionBuckets(int64_t ctx) {
  edges_ = {0};
  for (int64_t e = 16; e < ctx; e *= 4) edges_.push_back(e);
  edges_.push_back(ctx);
  acc_.resize(edges_.size() - 1);
}

void PositionBuckets::add(int64_t position, double nll, double base_nll, double kl, bool top1_agree) {
  size_t b = static_cast<size_t>(std::upper_bound(edges_.begin(), edges_.end(), position) - edges_.begin());
  b = std::clamp<size_t>(b, 1, acc_.size()) - 1;
  for (Acc* a : {&acc_[b], &all_}) {
    ++a->count;
    a->nll += nll;
    if (kl >= 0.0) {
      a->base_nll += base_nll;
      a->kls.push_back(static_cast<float>(kl));
      a->top1 += top1_agree ? 1 : 0;
    }
  }
  if (kl >= 0.0) has_base_ = true;
}

BucketSummary PositionBuckets::summarize(const Acc& a, int64_t first, int64_t last, bool has_base) {
  BucketSummary s;
  s.first = first;
  s.last = last;
  s.count = a.count;
  if (a.count == 0) return s;
  s.ppl = std::exp(a.nll / static_cast<double>(a.count));
  if (has_base && !a.kls.empty()) {
    const double n = static_cast<double>(a.kls.size());
    s.base_ppl = std::exp(a.base_nll / n);
    double sum = 0;
    for (float k : a.kls) sum += k;
    s.mean_kl = sum / n;
    s.top1 = static_cast<double>(a.top1) / n;
    std::vector<float> kls = a.kls;
    s.p99_kl = quantile(kls, 0.99);
    s.max_kl = kls.back();
  }
  return s;
}

BucketSummary PositionBuckets::total() const { return summarize(all_, 0, edges_.back() - 1, has_base_); }

std::vector<BucketSummary> PositionBuckets::buckets() const {
  std::vector<BucketSummary> out;
  for (size_t i = 0; i < acc_.size(); ++i) {
    if (acc_[i].count > 0) out.push_back(summarize(acc_[i], edges_[i], edges_[i + 1] - 1, has_base_));
  }
  return out;
}

}  // namespace tokenmill::eval
