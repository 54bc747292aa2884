#include "bench/driver.h"

#include <httplib.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/connection_retry.h"
#include "bench/response_parser.h"
#include "bench/sse_parser.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

constexpr size_t kMaxBodyBytes = 16u << 20;  // non-streamed or error bodies kept for parsing
constexpr size_t kMaxErrorText = 300;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool looks_like_oom(const std::string& text) {
  std::string lower(text.size(), ' ');
  std::transform(text.begin(), text.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* needle : {"out of memory", "oom", "kv cache exhausted", "insufficient memory"}) {
    if (lower.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string excerpt(const std::string& s) { return s.size() <= kMaxErrorText ? s : s.substr(0, kMaxErrorText) + "..."; }

// Everything one response delivers, folded as pieces arrive.
struct ResponseState {
  bool done = false;
  std::string stream_error;
  int64_t text_chunks = 0;
};

void apply_piece(const ResponsePiece& piece, double t, RequestRecord& rec, ResponseState& st) {
  if (!piece.error.empty()) st.stream_error = piece.error;
  if (piece.done) st.done = true;
  if (piece.text_bytes > 0) {
    if (std::isnan(rec.first_token_ms)) rec.first_token_ms = t;
    rec.chunk_ms.push_back(t);
    ++st.text_chunks;
  }
  if (!piece.finish_reason.empty()) rec.finish_reason = piece.finish_reason;
  if (piece.prompt_tokens >= 0) rec.prompt_tokens = piece.prompt_tokens;
  if (piece.completion_tokens >= 0) rec.output_tokens = piece.completion_tokens;
  if (piece.cached_tokens >= 0) rec.cached_tokens = piece.cached_tokens;
  if (piece.draft_tokens >= 0) rec.draft_tokens = piece.draft_tokens;
  if (piece.accepted_draft_tokens >= 0) rec.accepted_draft_tokens = piece.accepted_draft_tokens;
  if (!std::isnan(piece.queue_ms)) rec.server_queue_ms = piece.queue_ms;
  if (!std::isnan(piece.prompt_ms)) rec.server_prompt_ms = piece.prompt_ms;
}

void classify_http(const std::string& body, RequestRecord& rec) {
  const int s = rec.http_status;
  if (s == 429 || s == 503) {
    rec.status = RequestStatus::kRejected;
  } else if (s == 507 || looks_like_oom(body)) {
    rec.status = RequestStatus::kOom;
  } else {
    rec.status = RequestStatus::kError;
  }
  rec.error = fmt::format("http {}: {}", s, excerpt(body));
}

// A 200 response: a non-streamed body is parsed whole; a stream must have
// ended with [DONE] or a finish_reason and carried no error event.
void finish_ok_response(bool stream, const std::string& body, RequestRecord& rec, ResponseState& st) {
  if (!stream) {
    const ResponsePiece piece = parse_response_piece(body);
    apply_piece(piece, rec.end_ms, rec, st);
    rec.chunk_ms.clear();  // one piece is not a token stream
    rec.first_token_ms = kNaN;
    st.done = !piece.malformed;
    if (piece.malformed) st.stream_error = "response is not a completion: " + excerpt(body);
  }
  if (!st.stream_error.empty()) {
    rec.status = looks_like_oom(st.stream_error) ? RequestStatus::kOom : RequestStatus::kError;
    rec.error = excerpt(st.stream_error);
  } else if (!st.done && rec.finish_reason.empty()) {
    rec.status = RequestStatus::kError;
    rec.error = "stream ended without [DONE] or a finish_reason";
  } else {
    rec.status = RequestStatus::kOk;
  }
}

TransportFailure failure_kind(httplib::Error err) {
  switch (err) {
    case httplib::Error::Success: return TransportFailure::kNone;
    case httplib::Error::Write: return TransportFailure::kWrite;
    case httplib::Error::Read: return TransportFailure::kRead;
    default: return TransportFailure::kOther;
  }
}

// Sends `req`, and once more on a fresh connection when the kept-alive one
// turns out to be closed before any response byte (connection_retry.h):
// the request's response handler sets rec.first_byte_ms when the headers
// arrive. The retry keeps the first attempt's send time: the reconnection
// is part of the latency a client of that server sees.
bool send_with_reconnect(httplib::Client& client, httplib::Request& req, httplib::Response& res, httplib::Error& err,
                         RequestRecord& rec, double deadline_ms, const std::function<double()>& now_ms) {
  FailedAttempt attempt;
  attempt.reused_connection = client.is_socket_open() != 0;
  bool sent = client.send(req, res, err);
  attempt.failure = sent ? TransportFailure::kNone : failure_kind(err);
  attempt.response_started = !std::isnan(rec.first_byte_ms);
  attempt.at_deadline = now_ms() >= deadline_ms - 1.0;
  if (sent || !retry_on_fresh_connection(attempt)) return sent;
  client.stop();  // closes the dead socket; the next send connects anew
  ++rec.reconnects;
  res = httplib::Response();
  err = httplib::Error::Success;
  return client.send(req, res, err);
}

}  // namespace

HttpTarget parse_target_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos || url.substr(0, scheme_end) != "http") {
    fail("target url '{}': use http://host:port (https is not supported by the driver)", url);
  }
  const size_t path_start = url.find('/', scheme_end + 3);
  HttpTarget t;
  t.origin = url.substr(0, path_start);
  if (t.origin.size() <= scheme_end + 3) fail("target url '{}': no host", url);
  if (path_start != std::string::npos) t.prefix = url.substr(path_start);
  while (!t.prefix.empty() && t.prefix.back() == '/') t.prefix.pop_back();
  if (t.prefix.size() >= 3 && t.prefix.compare(t.prefix.size() - 3, 3, "/v1") == 0) {
    t.prefix.resize(t.prefix.size() - 3);
  }
  return t;
}

std::string request_body(const TrafficSpec& spec, const PlannedRequest& r) {
  nlohmann::json j = {{"max_tokens", r.max_tokens}, {"stream", spec.stream}, {"temperature", spec.temperature}};
  if (!spec.model.empty()) j["model"] = spec.model;
  if (spec.endpoint == Endpoint::kChat) {
    j["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", r.prompt}}});
  } else {
    j["prompt"] = r.prompt;
  }
  if (spec.ignore_eos) j["ignore_eos"] = true;
  if (spec.stream && spec.include_usage) j["stream_options"] = {{"include_usage", true}};
  return j.dump();
}

Driver::Driver(const TrafficSpec& spec, const std::string& url, SteadyClock::time_point t0)
    : spec_(spec), target_(parse_target_url(url)), t0_(t0) {
  path_ = target_.prefix + (spec.endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions");
}

double Driver::now_ms() const { return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0_).count(); }

void Driver::send_one(httplib::Client& client, const PlannedRequest& p, RequestRecord& rec, ThreadStats& stats) const {
  httplib::Request req;
  req.method = "POST";
  req.path = path_;
  req.body = request_body(spec_, p);
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", spec_.stream ? "text/event-stream" : "application/json");
  SseParser sse;
  std::string body;
  ResponseState st;
  bool cancelled = false, timed_out = false;
  rec.send_ms = now_ms();
  const double deadline = rec.send_ms + spec_.request_timeout_s * 1000.0;
  req.response_handler = [&](const httplib::Response& res) {
    rec.first_byte_ms = now_ms();
    rec.http_status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const double t = now_ms();
    if (rec.http_status == 200 && spec_.stream) {
      sse.feed(std::string_view(data, n), [&](const std::string& payload) {
        // Pieces after the cancellation point count as never received.
        if (p.cancel_after == 0 || st.text_chunks < p.cancel_after) {
          apply_piece(parse_response_piece(payload), t, rec, st);
        }
      });
    } else if (body.size() < kMaxBodyBytes) {
      body.append(data, std::min(n, kMaxBodyBytes - body.size()));
    }
    const double spent = now_ms() - t;
    ++stats.chunks;
    stats.handling_ms += spent;
    stats.handling_max_ms = std::max(stats.handling_max_ms, spent);
    if (p.cancel_after > 0 && st.text_chunks >= p.cancel_after) cancelled = true;
    if (t > deadline) timed_out = true;
    return !cancelled && !timed_out;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = send_with_reconnect(client, req, res, err, rec, deadline, [this] { return now_ms(); });
  rec.end_ms = now_ms();
  if (rec.http_status == 200 && spec_.stream) {
    sse.finish([&](const std::string& payload) { apply_piece(parse_response_piece(payload), rec.end_ms, rec, st); });
  }
  if (body.empty() && !res.body.empty()) body = res.body;
  if (cancelled) {
    rec.status = RequestStatus::kCancelled;
  } else if (timed_out || (!sent && rec.end_ms >= deadline - 1.0)) {
    rec.status = RequestStatus::kTimeout;
  } else if (!sent) {
    rec.status = RequestStatus::kError;
    rec.error = "transport: " + httplib::to_string(err);
  } else if (rec.http_status != 200) {
    classify_http(body, rec);
  } else {
    finish_ok_response(spec_.stream, body, rec, st);
  }
  if (rec.output_tokens < 0 && spec_.stream) rec.output_tokens = st.text_chunks;
}

void Driver::client_loop(const std::vector<PlannedRequest>& requests, std::vector<RequestRecord>& records,
                         std::atomic<size_t>& next, double cell_start_ms, double duration_s, ThreadStats& stats) const {
  httplib::Client client(target_.origin);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);  // Nagle + delayed ACK would add ~40 ms to small writes
  client.set_connection_timeout(10, 0);
  const auto timeout_us = static_cast<int64_t>(spec_.request_timeout_s * 1e6);
  client.set_read_timeout(timeout_us / 1000000, timeout_us % 1000000);
  client.set_write_timeout(60, 0);
  while (true) {
    const size_t i = next.fetch_add(1);
    if (i >= requests.size()) return;
    const PlannedRequest& p = requests[i];
    RequestRecord& rec = records[i];
    bool waited = false;
    if (p.scheduled_s >= 0) {
      rec.scheduled_ms = cell_start_ms + p.scheduled_s * 1000.0;
      const double wait_ms = rec.scheduled_ms - now_ms();
      if (wait_ms > 0) {
        std::this_thread::sleep_until(t0_ + std::chrono::duration_cast<SteadyClock::duration>(
                                                std::chrono::duration<double, std::milli>(rec.scheduled_ms)));
        waited = true;
      }
    }
    if (duration_s > 0 && now_ms() - cell_start_ms >= duration_s * 1000.0) continue;  // stays not_sent
    send_one(client, p, rec, stats);
    if (waited) rec.dispatch_lag_ms = rec.send_ms - rec.scheduled_ms;
    if (p.scheduled_s < 0 && spec_.think_time_s > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(spec_.think_time_s));
    }
  }
}

CellRun Driver::run(const std::vector<PlannedRequest>& requests, int64_t concurrency, double duration_s) const {
  CellRun out;
  out.records.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    RequestRecord& r = out.records[i];
    r.cell = requests[i].cell;
    r.index = requests[i].index;
    r.input_bucket = requests[i].input_bucket;
    r.output_bucket = requests[i].output_bucket;
    r.planned_input_tokens = requests[i].input_tokens;
    r.planned_shared_tokens = requests[i].shared_tokens;
    r.max_tokens = requests[i].max_tokens;
  }
  const size_t num_clients = std::min<size_t>(static_cast<size_t>(concurrency), requests.size());
  std::vector<ThreadStats> stats(num_clients);
  std::atomic<size_t> next{0};
  const double cpu0 = process_cpu_seconds();
  const double start_ms = now_ms();
  {
    std::vector<std::jthread> clients;
    for (size_t c = 0; c < num_clients; ++c) {
      clients.emplace_back([&, c] { client_loop(requests, out.records, next, start_ms, duration_s, stats[c]); });
    }
  }
  out.driver.wall_s = (now_ms() - start_ms) / 1000.0;
  out.driver.cpu_s = process_cpu_seconds() - cpu0;
  out.driver.threads = static_cast<int64_t>(num_clients);
  for (const ThreadStats& s : stats) {
    out.driver.chunks += s.chunks;
    out.driver.handling_ms += s.handling_ms;
    out.driver.handling_max_ms = std::max(out.driver.handling_max_ms, s.handling_max_ms);
  }
  out.window_start_ms = out.window_end_ms = start_ms;
  bool any = false;
  for (const RequestRecord& r : out.records) {
    if (r.status == RequestStatus::kNotSent) continue;
    out.window_start_ms = any ? std::min(out.window_start_ms, r.send_ms) : r.send_ms;
    out.window_end_ms = any ? std::max(out.window_end_ms, r.end_ms) : r.end_ms;
    any = true;
  }
  return out;
}

}  // namespace tokenmill::bench
