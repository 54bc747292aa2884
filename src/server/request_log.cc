#include "server/request_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tokenmill::server {

namespace {

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

double round2(double v) { return static_cast<double>(static_cast<int64_t>(v * 100.0 + 0.5)) / 100.0; }

}  // namespace

RequestRecord& current_record() {
  thread_local RequestRecord record;
  return record;
}

void reset_record() { current_record() = RequestRecord{}; }

std::string format_log_line(const std::string& method, const std::string& path, int status, const std::string& remote,
                            const RequestRecord& r) {
  nlohmann::ordered_json j;
  j["ts"] = utc_timestamp();
  j["event"] = "request";
  if (!r.request_id.empty()) j["request_id"] = r.request_id;
  j["method"] = method;
  j["path"] = path;
  j["status"] = status;
  j["remote"] = remote;
  if (r.start) j["duration_ms"] = round2(seconds_since(*r.start) * 1000.0);
  if (!r.response_id.empty()) {
    j["id"] = r.response_id;
    j["model"] = r.model;
    j["tenant"] = r.tenant;
    j["stream"] = r.stream;
    j["choices"] = r.num_choices;
    j["prompt_tokens"] = r.prompt_tokens;
    j["completion_tokens"] = r.completion_tokens;
    j["cached_tokens"] = r.cached_tokens;
    j["finish_reason"] = r.finish_reason;
    if (!r.tool_format.empty()) j["tool_format"] = r.tool_format;
    if (r.queue_ms >= 0) j["queue_ms"] = round2(r.queue_ms);
    if (r.ttft_ms >= 0) j["ttft_ms"] = round2(r.ttft_ms);
    if (r.e2e_ms >= 0) j["e2e_ms"] = round2(r.e2e_ms);
    if (r.client_disconnected) j["client_disconnected"] = true;
  }
  if (!r.error.empty()) j["error"] = r.error;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void write_log_line(const std::string& line) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::fputs(line.c_str(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace tokenmill::server
