// Sliding windows over a token sequence S for perplexity-style evaluation.
// Window k takes the context S[a .. e) with a = 1 + k * stride and
// e = min(a + ctx, N), fed as the input [S[0], S[a], ..., S[e - 2]] (S[0],
// the BOS of tokenized text, always starts the window), so that logit row
// r predicts S[a + r] after r + 1 tokens of context. A target is scored in
// the first window that reaches it with full overlap: window k scores
// S[max(a, e_{k-1}) .. e), i.e. with stride < ctx each later window scores
// its last `stride` targets, each with at least ctx - stride tokens of
// context. The windows stop at the first one that reaches S[N - 1].
#pragma once

#include <cstdint>
#include <vector>

namespace tokenmill::eval {

struct Window {
  int64_t begin = 0;         // a: first target (text index) of the window
  int64_t end = 0;           // e: one past the last target
  int64_t first_scored = 0;  // first target scored in this window
  int64_t input_length() const { return end - begin; }
  int64_t first_scored_row() const { return first_scored - begin; }
};

// Throws Error unless num_tokens >= 2, ctx >= 2 and 1 <= stride <= ctx.
std::vector<Window> plan_windows(int64_t num_tokens, int64_t ctx, int64_t stride);

}  // namespace tokenmill::eval
