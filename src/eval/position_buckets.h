// Statistics of scored positions, overall and per bucket of context
// position (the number of tokens of context a prediction had), so that
// damage that only shows at long context is visible. Bucket edges are
// 0, 16, 64, 256, 1024, ... (x4) up to the context size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tokenmill::eval {

struct BucketSummary {
  int64_t first = 0, last = 0;  // context positions [first, last]
  int64_t count = 0;
  double ppl = 0;       // exp(mean NLL) of the evaluated model
  double base_ppl = 0;  // of the base (KLD runs only)
  double mean_kl = 0;   // KLD runs only
  double p99_kl = 0;
  double max_kl = 0;
  double top1 = 0;  // fraction of positions where both argmaxes agree
};

class PositionBuckets {
 public:
  explicit PositionBuckets(int64_t ctx);

  // One scored position. kl < 0 and top1_agree ignored when there is no base.
  void add(int64_t position, double nll, double base_nll, double kl, bool top1_agree);

  BucketSummary total() const;
  std::vector<BucketSummary> buckets() const;  // non-empty buckets only
  bool has_base() const { return has_base_; }

 private:
  struct Acc {
    int64_t count = 0;
    double nll = 0, base_nll = 0;
    int64_t top1 = 0;
    std::vector<float> kls;
  };
  static BucketSummary summarize(const Acc& a, int64_t first, int64_t last, bool has_base);
  std::vector<int64_t> edges_;  // bucket i holds positions [edges_[i], edges_[i + 1])
  std::vector<Acc> acc_;
  Acc all_;
  bool has_base_ = false;
};

// The p-quantile (0..1) of v by linear interpolation between order
// statistics (NumPy's default); 0 for an empty v. Reorders v.
double quantile(std::vector<float>& v, double p);

}  // namespace tokenmill::eval
