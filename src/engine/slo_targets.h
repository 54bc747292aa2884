// The latency targets of SLO-aware admission (slo_admission.h):
// `serve --slo-ttft-ms --slo-tpot-ms --slo-e2e-p99-ms`.
#pragma once

namespace tokenmill::engine {

struct SloTargets {
  double ttft_ms = 0;  // time to first token, from submission; 0 = no target
  double tpot_ms = 0;  // mean time per output token after the first
  double e2e_ms = 0;   // submission to the last token
  bool enabled() const { return ttft_ms > 0 || tpot_ms > 0 || e2e_ms > 0; }
  // Throws Error naming a negative or non-finite target.
  void validate() const;
};

}  // namespace tokenmill::engine
