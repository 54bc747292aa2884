// One structured log line per HTTP request (JSON Lines on stderr), written
// by the server's logger hook after the response has been sent, streams
// included. Handlers add what they know (response id, tokens, timings) to
// the current thread's RequestRecord: the front runs a request's routing,
// handler, streaming and logging on one worker thread, one request at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "util/clock.h"

namespace tokenmill::server {

struct RequestRecord {
  std::optional<SteadyClock::time_point> start;  // set by the pre-routing hook
  std::string request_id;                        // X-Request-Id
  std::string response_id;                       // "cmpl-..." when a generation ran
  std::string model;
  std::string tenant;
  bool stream = false;
  int num_choices = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  std::string finish_reason;  // of choice 0
  std::string tool_format;    // chat with tools: the wire format parsed (ChatOutputFormat::describe_tools)
  double queue_ms = -1, ttft_ms = -1, e2e_ms = -1;
  bool client_disconnected = false;
  std::string error;  // the message of an error response
};

// This thread's record for the request in progress.
RequestRecord& current_record();
// Clears it (after the log line, or when a new request starts).
void reset_record();

// {"ts": ..., "event": "request", "method", "path", "status", ...}: the
// record's fields that are set, as one JSON object without a newline.
std::string format_log_line(const std::string& method, const std::string& path, int status, const std::string& remote,
                            const RequestRecord& r);

// Writes one line to stderr, whole (a mutex keeps lines from interleaving).
void write_log_line(const std::string& line);

}  // namespace tokenmill::server
