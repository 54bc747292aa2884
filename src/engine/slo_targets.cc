#include "engine/slo_targets.h"

#include <cmath>

#include "util/error.h"

namespace tokenmill::engine {

void SloTargets::validate() const {
  const struct {
    const char* name;
    double value;
  } fields[] = {{"slo ttft_ms", ttft_ms}, {"slo tpot_ms", tpot_ms}, {"slo e2e_ms", e2e_ms}};
  for (const auto& f : fields) {
    if (!std::isfinite(f.value) || f.value < 0)
      fail("{} must be a finite number of milliseconds >= 0 (0 = no target), got {}", f.name, f.value);
  }
}

}  // namespace tokenmill::engine
