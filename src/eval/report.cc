#include "eval/report.h"

#include <fmt/format.h>

namespace tokenmill::eval {
namespace {

nlohmann::json summary_json(const BucketSummary& s, bool base) {
  nlohmann::json j = {{"first", s.first}, {"last", s.last}, {"count", s.count}, {"ppl", s.ppl}};
  if (base) {
    j["base_ppl"] = s.base_ppl;
    j["delta_ppl"] = s.ppl - s.base_ppl;
    j["mean_kld"] = s.mean_kl;
    j["p99_kld"] = s.p99_kl;
    j["max_kld"] = s.max_kl;
    j["top1"] = s.top1;
  }
  return j;
}

}  // namespace

std::string format_result(const EvalResult& r) {
  const BucketSummary t = r.buckets.total();
  const bool base = r.buckets.has_base();
  std::string out = fmt::format("scored {} tokens in {} windows ({:.1f} s)\n", r.num_scored, r.num_windows, r.seconds);
  if (!base) {
    out += fmt::format("perplexity {:.4f}\n", t.ppl);
  } else {
    out += fmt::format("perplexity {:.4f} (base {:.4f}, delta {:+.4f}, {:+.3f} %)\n", t.ppl, t.base_ppl,
                       t.ppl - t.base_ppl, 100.0 * (t.ppl / t.base_ppl - 1.0));
    out += fmt::format("KL divergence mean {:.6f}, p99 {:.6f}, max {:.6f}; top-1 agreement {:.2f} %\n", t.mean_kl,
                       t.p99_kl, t.max_kl, 100.0 * t.top1);
  }
  out += base ? fmt::format("{:>13} {:>7} {:>10} {:>10} {:>10} {:>10} {:>8}\n", "positions", "count", "ppl", "base_ppl",
                            "mean_kld", "p99_kld", "top1_%")
              : fmt::format("{:>13} {:>7} {:>10}\n", "positions", "count", "ppl");
  for (const BucketSummary& b : r.buckets.buckets()) {
    const std::string range = fmt::format("{}-{}", b.first, b.last);
    out += base ? fmt::format("{:>13} {:>7} {:>10.4f} {:>10.4f} {:>10.6f} {:>10.6f} {:>8.2f}\n", range, b.count, b.ppl,
                              b.base_ppl, b.mean_kl, b.p99_kl, 100.0 * b.top1)
                : fmt::format("{:>13} {:>7} {:>10.4f}\n", range, b.count, b.ppl);
  }
  return out;
}

nlohmann::json result_json(const EvalResult& r) {
  const bool base = r.buckets.has_base();
  nlohmann::json j = summary_json(r.buckets.total(), base);
  j.erase("first");
  j.erase("last");
  j["tokens"] = r.num_scored;
  j["windows"] = r.num_windows;
  j["seconds"] = r.seconds;
  j["buckets"] = nlohmann::json::array();
  for (const BucketSummary& b : r.buckets.buckets()) j["buckets"].push_back(summary_json(b, base));
  return j;
}

}  // namespace tokenmill::eval
