#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/check.h"
#include "util/error.h"

namespace tokenmill::sample {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Strict total order: higher logit first, lower id on ties, so that every
// selection below has exactly one answer whatever algorithm finds it.
bool better(const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

float max_logit(std::span<const Candidate> cands, bool sorted) {
  if (sorted) return cands.front().logit;
  float m = kNegInf;
  for (const Candidate& c : cands) m = std::max(m, c.logit);
  return m;
}

// Sorts [begin + done, begin + want) into place so that the first `want`
// candidates are the best `want` in order, given the first `done` already are.
void extend_sorted_prefix(std::vector<Candidate>& cands, size_t done, size_t want) {
  auto first = cands.begin() + static_cast<ptrdiff_t>(done);
  auto nth = cands.begin() + static_cast<ptrdiff_t>(want);
  if (nth != cands.end()) std::nth_element(first, nth, cands.end(), better);
  std::sort(first, nth, better);
}

}  // namespace

void apply_bias_and_penalties(const SamplingParams& params, std::span<float> logits, std::span<const int32_t> history,
                              std::vector<int32_t>& window) {
  for (const auto& [id, bias] : params.logit_bias) logits[static_cast<size_t>(id)] += bias;

  const bool any_penalty =
      params.repetition_penalty != 1.0f || params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f;
  if (!any_penalty || params.penalty_last_n == 0 || history.empty()) return;
  size_t n = history.size();
  if (params.penalty_last_n > 0) n = std::min(n, static_cast<size_t>(params.penalty_last_n));
  window.assign(history.end() - static_cast<ptrdiff_t>(n), history.end());
  std::sort(window.begin(), window.end());

  const float rp = params.repetition_penalty;
  for (size_t i = 0; i < window.size();) {
    const int32_t id = window[i];
    size_t j = i;
    while (j < window.size() && window[j] == id) ++j;
    const auto count = static_cast<float>(j - i);
    i = j;
    TM_CHECK_MSG(id >= 0 && static_cast<size_t>(id) < logits.size(), "history token outside vocab");
    float& l = logits[static_cast<size_t>(id)];
    if (rp != 1.0f) l = l > 0.0f ? l / rp : l * rp;
    l -= count * params.frequency_penalty + params.presence_penalty;
  }
}

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size)
    : params_(params), vocab_size_(vocab_size), rng_(params.seed) {
  if (vocab_size <= 0) fail("sampler: vocabulary size {} must be positive", vocab_size);
  params_.validate(vocab_size);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  return sample(logits, history, scratch_);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history, SamplerScratch& scratch,
                        std::span<const uint32_t> allowed) {
  if (params_.temperature == 0.0f) {
    adjust(logits, history, scratch, allowed);
    return sample_greedy(scratch.logits);
  }
  filter(logits, history, scratch, allowed);
  return draw(scratch.candidates);
}

void apply_allowed_mask(std::span<const uint32_t> allowed, std::span<float> logits) {
  TM_CHECK_MSG(allowed.size() * 32 >= logits.size(), "allowed-token mask shorter than the vocabulary");
  for (size_t w = 0; w * 32 < logits.size(); ++w) {
    const uint32_t bits = allowed[w];
    if (bits == 0xFFFFFFFFu) continue;
    const size_t end = std::min(logits.size(), w * 32 + 32);
    for (size_t i = w * 32; i < end; ++i) {
      if (((bits >> (i - w * 32)) & 1u) == 0) logits[i] = kNegInf;
    }
  }
}

void Sampler::adjust(std::span<const float> logits, std::span<const int32_t> history, SamplerScratch& scratch,
                     std::span<const uint32_t> allowed) const {
  TM_CHECK_MSG(logits.size() == static_cast<size_t>(vocab_size_), "logits row is not [vocab]");
  scratch.logits.assign(logits.begin(), logits.end());
  if (!allowed.empty()) apply_allowed_mask(allowed, scratch.logits);
  apply_bias_and_penalties(params_, scratch.logits, history, scratch.window);
}

void Sampler::filter(std::span<const float> logits, std::span<const int32_t> history, SamplerScratch& scratch,
                     std::span<const uint32_t> allowed) const {
  adjust(logits, history, scratch, allowed);
  std::vector<Candidate>& cands = scratch.candidates;
  bool sorted = false;
  collect_candidates(scratch.logits, cands, sorted);
  if (cands.empty()) fail("sampling: every token is banned (all logits are -inf after logit_bias and the grammar)");
  keep_typical(cands, sorted);
  keep_top_p(cands, sorted);
  keep_min_p(cands);
}

int32_t Sampler::sample_greedy(std::span<const float> adjusted) {
  int32_t best_id = -1;
  float best = kNegInf;
  for (size_t i = 0; i < adjusted.size(); ++i) {
    if (adjusted[i] > best) {  // strict: ties keep the lower id; NaN never wins
      best = adjusted[i];
      best_id = static_cast<int32_t>(i);
    }
  }
  if (best_id < 0) fail("sampling: every token is banned (all logits are -inf after logit_bias and the grammar)");
  last_probability_ = 1.0f;
  return best_id;
}

// Fills `cands` with the tokens that can survive the filters. With top-k it
// selects the k best straight from the row with a k-element heap (O(vocab)
// compares, ~k log(vocab / k) heap updates on typical rows) instead of copying
// the whole vocabulary. With min-p alone it pre-drops tokens far below the
// threshold (keep_min_p still applies the exact test). `>` drops -inf and NaN.
void Sampler::collect_candidates(std::span<const float> adjusted, std::vector<Candidate>& cands, bool& sorted) const {
  cands.clear();
  const auto k = static_cast<size_t>(params_.top_k);
  if (k > 0 && k < adjusted.size()) {
    for (size_t i = 0; i < adjusted.size(); ++i) {
      const Candidate c{static_cast<int32_t>(i), adjusted[i]};
      if (!(c.logit > kNegInf)) continue;
      if (cands.size() < k) {
        cands.push_back(c);
        std::push_heap(cands.begin(), cands.end(), better);  // front: worst kept
      } else if (better(c, cands.front())) {
        std::pop_heap(cands.begin(), cands.end(), better);
        cands.back() = c;
        std::push_heap(cands.begin(), cands.end(), better);
      }
    }
    std::sort_heap(cands.begin(), cands.end(), better);  // best first
    sorted = true;
    return;
  }
  float floor = kNegInf;
  if (params_.min_p > 0.0f && params_.top_p >= 1.0f && params_.typical_p >= 1.0f) {
    float lmax = kNegInf;
    for (float v : adjusted) lmax = std::max(lmax, v);
    floor = lmax + std::log(params_.min_p) - 1e-3f;  // loose by 1e-3: never drops a keeper
  }
  for (size_t i = 0; i < adjusted.size(); ++i) {
    if (adjusted[i] > kNegInf && adjusted[i] >= floor) {
      cands.push_back({static_cast<int32_t>(i), adjusted[i]});
    }
  }
}

// Locally typical sampling (Meister et al. 2022, llama.cpp's typ_p): over
// the softmax of the candidates, keeps those whose surprise -log p lies
// closest to the entropy H = -sum p log p, closest first, until their mass
// reaches typical_p (at least one). The survivors are left best first.
// Cost: one exp per candidate and a sort of the candidates.
void Sampler::keep_typical(std::vector<Candidate>& cands, bool& sorted) const {
  if (params_.typical_p >= 1.0f || cands.size() <= 1) return;
  const float lmax = max_logit(cands, sorted);
  double total = 0.0;
  for (const Candidate& c : cands) total += std::exp(static_cast<double>(c.logit - lmax));
  const double log_total = std::log(total);
  // log p = logit - lmax - log_total; entropy = -sum p log p.
  double entropy = 0.0;
  for (const Candidate& c : cands) {
    const double log_p = static_cast<double>(c.logit - lmax) - log_total;
    entropy -= std::exp(log_p) * log_p;
  }
  auto distance = [&](const Candidate& c) {
    return std::fabs(-(static_cast<double>(c.logit - lmax) - log_total) - entropy);
  };
  std::sort(cands.begin(), cands.end(), [&](const Candidate& a, const Candidate& b) {
    const double da = distance(a), db = distance(b);
    return da < db || (da == db && better(a, b));
  });
  const double target = static_cast<double>(params_.typical_p);
  double cum = 0.0;
  size_t keep = cands.size();
  for (size_t i = 0; i < cands.size(); ++i) {
    cum += std::exp(static_cast<double>(cands[i].logit - lmax) - log_total);
    if (cum >= target) {
      keep = i + 1;
      break;
    }
  }
  cands.resize(keep);
  std::sort(cands.begin(), cands.end(), better);
  sorted = true;
}

// Keeps the shortest best-first prefix whose softmax mass (over the candidates
// still running) reaches top_p. Without a prior top-k the prefix is sorted in
// geometrically growing pieces, so a peaked distribution costs O(vocab), not a
// full O(vocab log vocab) sort.
void Sampler::keep_top_p(std::vector<Candidate>& cands, bool& sorted) const {
  if (params_.top_p >= 1.0f) return;
  const float lmax = max_logit(cands, sorted);
  double total = 0.0;
  for (const Candidate& c : cands) total += std::exp(c.logit - lmax);
  const double target = static_cast<double>(params_.top_p) * total;

  const size_t n = cands.size();
  size_t sorted_len = sorted ? n : 0;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (i == sorted_len) {
      const size_t want = std::min(n, std::max<size_t>(64, sorted_len * 8));
      extend_sorted_prefix(cands, sorted_len, want);
      sorted_len = want;
    }
    cum += std::exp(cands[i].logit - lmax);
    if (cum >= target) {
      cands.resize(i + 1);
      break;
    }
  }
  sorted = true;  // rounding may leave the mass just short: then all stay, sorted
}

// Keeps tokens with p >= min_p * p_max, i.e. exp(logit - max_logit) >= min_p.
// A threshold relative to the best token, so it needs no normaliser and keeps
// the order of the candidates.
void Sampler::keep_min_p(std::vector<Candidate>& cands) const {
  if (params_.min_p <= 0.0f) return;
  const float lmax = max_logit(cands, false);
  const double min_p = params_.min_p;
  std::erase_if(cands, [&](const Candidate& c) { return std::exp(static_cast<double>(c.logit - lmax)) < min_p; });
}

// Softmax of logit / temperature over the survivors, then one inverse-CDF draw.
// Overwrites the logits of `cands` with unnormalised weights. The best
// candidate has weight 1, so the total is >= 1.
int32_t Sampler::draw(std::span<Candidate> cands) {
  const float lmax = max_logit(cands, false);
  const float inv_t = 1.0f / params_.temperature;
  double total = 0.0;
  for (Candidate& c : cands) {
    c.logit = std::exp((c.logit - lmax) * inv_t);
    total += c.logit;
  }
  const double r = next_uniform() * total;
  double cum = 0.0;
  size_t chosen = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].logit <= 0.0f) continue;
    chosen = i;  // rounding in `cum` can leave r past the end: the last weighted one wins
    cum += cands[i].logit;
    if (r < cum) break;
  }
  last_probability_ = static_cast<float>(cands[chosen].logit / total);
  return cands[chosen].id;
}

void Sampler::distribution(std::span<const float> logits, std::span<const int32_t> history, SamplerScratch& scratch,
                           std::vector<float>& probs, std::span<const uint32_t> allowed) {
  probs.assign(static_cast<size_t>(vocab_size_), 0.0f);
  if (params_.temperature == 0.0f) {
    adjust(logits, history, scratch, allowed);
    probs[static_cast<size_t>(sample_greedy(scratch.logits))] = 1.0f;
    return;
  }
  filter(logits, history, scratch, allowed);
  const std::vector<Candidate>& cands = scratch.candidates;
  const float lmax = max_logit(cands, false);
  const double inv_t = 1.0 / static_cast<double>(params_.temperature);
  double total = 0.0;
  for (const Candidate& c : cands) total += std::exp(static_cast<double>(c.logit - lmax) * inv_t);
  for (const Candidate& c : cands)
    probs[static_cast<size_t>(c.id)] =
        static_cast<float>(std::exp(static_cast<double>(c.logit - lmax) * inv_t) / total);
}

int32_t Sampler::draw_weighted(std::span<const float> weights) {
  TM_CHECK_MSG(weights.size() == static_cast<size_t>(vocab_size_), "weights row is not [vocab]");
  double total = 0.0;
  for (float w : weights) total += w;
  TM_CHECK_MSG(total > 0.0, "draw_weighted: the weights sum to zero");
  const double r = next_uniform() * total;
  double cum = 0.0;
  size_t chosen = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0.0f) continue;
    chosen = i;  // rounding in `cum` can leave r past the end: the last weighted one wins
    cum += weights[i];
    if (r < cum) break;
  }
  last_probability_ = static_cast<float>(weights[chosen] / total);
  return static_cast<int32_t>(chosen);
}

double Sampler::next_uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // 53 random bits, exact in a double
}

}  // namespace tokenmill::sample
