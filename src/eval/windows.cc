#include "eval/windows.h"

#include <algorithm>

#include "util/error.h"

namespace tokenmill::eval {

std::vector<Window> plan_windows(int64_t num_tokens, int64_t ctx, int64_t stride) {
  if (num_tokens < 2) fail("evaluation needs at least 2 tokens, got {}", num_tokens);
  if (ctx < 2) fail("--ctx must be at least 2, got {}", ctx);
  if (stride < 1 || stride > ctx) fail("--stride must be in [1, ctx={}], got {}", ctx, stride);
  std::vector<Window> out;
  int64_t scored_until = 1;
  for (int64_t a = 1;; a += stride) {
    Window w;
    w.begin = a;
    w.end = std::min(a + ctx, num_tokens);
    w.first_scored = std::max(a, scored_until);
    if (w.first_scored < w.end) out.push_back(w);
    scored_until = w.end;
    if (w.end == num_tokens) break;
  }
  return out;
}

}  // namespace tokenmill::eval
