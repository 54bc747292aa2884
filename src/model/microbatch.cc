#include "model/microbatch.h"

#include <algorithm>

namespace tokenmill::model {

std::vector<std::vector<SequenceChunk>> split_microbatches(std::span<const SequenceChunk> chunks, int64_t parts) {
  int64_t total = 0;
  for (const SequenceChunk& ch : chunks) total += static_cast<int64_t>(ch.tokens.size());
  parts = std::clamp<int64_t>(parts, 1, std::max<int64_t>(total, 1));
  std::vector<std::vector<SequenceChunk>> out(static_cast<size_t>(parts));
  // Micro-batch m holds flat tokens [m * total / parts, (m + 1) * total / parts).
  int64_t flat = 0;  // flat index of the chunk's first token
  for (const SequenceChunk& ch : chunks) {
    const auto n = static_cast<int64_t>(ch.tokens.size());
    int64_t done = 0;
    while (done < n) {
      const int64_t m = (flat + done) * parts / total;
      // The first flat index of micro-batch m + 1 (ceil((m + 1) * total / parts)).
      const int64_t next = ((m + 1) * total + parts - 1) / parts;
      const int64_t take = std::min(n - done, next - (flat + done));
      SequenceChunk part = ch;
      part.tokens = ch.tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(take));
      part.start_pos = ch.start_pos + done;
      const bool last_part = done + take == n;
      if (ch.logits == LogitRows::kLast && !last_part) part.logits = LogitRows::kNone;
      out[static_cast<size_t>(m)].push_back(part);
      done += take;
    }
    flat += n;
  }
  return out;
}

}  // namespace tokenmill::model
