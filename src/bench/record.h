// What the driver measured for one request. Times are milliseconds on the
// run's steady clock (0 = the run's start); NaN when the moment never came.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tokenmill::bench {

enum class RequestStatus { kOk, kTimeout, kError, kCancelled, kRejected, kOom, kNotSent };
const char* status_name(RequestStatus s);

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct RequestRecord {
  int64_t cell = 0;  // -1: warmup
  int64_t index = 0;
  int32_t input_bucket = -1;
  int32_t output_bucket = -1;
  int64_t planned_input_tokens = 0;
  int64_t planned_shared_tokens = 0;
  int64_t max_tokens = 0;

  double scheduled_ms = kNaN;     // open loop: when it should have been sent
  double dispatch_lag_ms = kNaN;  // send - scheduled, when a client was idle and waiting for it
  double send_ms = kNaN;
  double first_byte_ms = kNaN;   // response headers
  double first_token_ms = kNaN;  // first chunk with text
  double end_ms = kNaN;
  std::vector<double> chunk_ms;  // every chunk with text

  int64_t prompt_tokens = -1;  // as the server reports (usage); -1: unknown
  int64_t output_tokens = -1;  // usage.completion_tokens, else the text chunks
  int64_t cached_tokens = -1;
  int64_t draft_tokens = -1;  // speculative decoding, as the server reports; -1: unknown
  int64_t accepted_draft_tokens = -1;
  double server_queue_ms = kNaN;
  double server_prompt_ms = kNaN;

  RequestStatus status = RequestStatus::kNotSent;
  int http_status = 0;
  int32_t reconnects = 0;  // sent again on a fresh connection: the kept-alive one was closed (connection_retry.h)
  std::string error;
  std::string finish_reason;

  // Derived latencies (NaN when not applicable).
  double ttft_ms() const { return first_token_ms - send_ms; }
  double e2e_ms() const { return end_ms - send_ms; }
  // Mean time per output token after the first: (last - first) / (n - 1).
  double tpot_ms() const;
  double sched_delay_ms() const { return std::isnan(scheduled_ms) ? kNaN : send_ms - scheduled_ms; }
};

nlohmann::json record_to_json(const RequestRecord& r);

}  // namespace tokenmill::bench
