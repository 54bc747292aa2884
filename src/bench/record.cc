#include "bench/record.h"

#include <nlohmann/json.hpp>

#include "bench/json_number.h"

namespace tokenmill::bench {

const char* status_name(RequestStatus s) {
  switch (s) {
    case RequestStatus::kOk: return "ok";
    case RequestStatus::kTimeout: return "timeout";
    case RequestStatus::kError: return "error";
    case RequestStatus::kCancelled: return "cancelled";
    case RequestStatus::kRejected: return "rejected";
    case RequestStatus::kOom: return "oom";
    case RequestStatus::kNotSent: return "not_sent";
  }
  return "?";
}

double RequestRecord::tpot_ms() const {
  const int64_t n = output_tokens > 0 ? output_tokens : static_cast<int64_t>(chunk_ms.size());
  if (n < 2 || chunk_ms.size() < 2) return kNaN;
  return (chunk_ms.back() - first_token_ms) / static_cast<double>(n - 1);
}

nlohmann::json record_to_json(const RequestRecord& r) {
  nlohmann::json chunks = nlohmann::json::array();
  for (double t : r.chunk_ms) chunks.push_back(t);
  return {{"cell", r.cell},
          {"index", r.index},
          {"input_bucket", r.input_bucket},
          {"output_bucket", r.output_bucket},
          {"planned_input_tokens", r.planned_input_tokens},
          {"planned_shared_tokens", r.planned_shared_tokens},
          {"max_tokens", r.max_tokens},
          {"status", status_name(r.status)},
          {"http_status", r.http_status},
          {"reconnects", r.reconnects},
          {"error", r.error},
          {"finish_reason", r.finish_reason},
          {"scheduled_ms", number_or_null(r.scheduled_ms)},
          {"dispatch_lag_ms", number_or_null(r.dispatch_lag_ms)},
          {"send_ms", number_or_null(r.send_ms)},
          {"first_byte_ms", number_or_null(r.first_byte_ms)},
          {"first_token_ms", number_or_null(r.first_token_ms)},
          {"end_ms", number_or_null(r.end_ms)},
          {"prompt_tokens", r.prompt_tokens},
          {"output_tokens", r.output_tokens},
          {"cached_tokens", r.cached_tokens},
          {"draft_tokens", r.draft_tokens},
          {"accepted_draft_tokens", r.accepted_draft_tokens},
          {"server_queue_ms", number_or_null(r.server_queue_ms)},
          {"server_prompt_ms", number_or_null(r.server_prompt_ms)},
          {"chunk_ms", chunks}};
}

}  // namespace tokenmill::bench
