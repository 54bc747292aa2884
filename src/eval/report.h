// Text and JSON renderings of evaluation results (for people and for
// scripts/quant_card.sh).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "eval/evaluator.h"

namespace tokenmill::eval {

// A summary line block and one row per context-position bucket.
std::string format_result(const EvalResult& r);
// {"tokens", "windows", "seconds", "ppl", and with a base "base_ppl",
//  "delta_ppl", "mean_kld", "p99_kld", "max_kld", "top1"; "buckets": [...]}.
nlohmann::json result_json(const EvalResult& r);

}  // namespace tokenmill::eval
