// One request forwarded to one replica. It runs on a thread of its own so
// that the HTTP worker answering the client can wait on it with a check
// between waits (router shutdown), pull the body piece by piece as it
// arrives (streams pass through with no added buffering), and cancel it:
// cancel() shuts the upstream socket, so the replica sees the disconnect
// and frees the request's KV blocks at its next step.
//
// Thread-safety: every public method may be called from any thread; the
// object must outlive nothing but itself (the destructor cancels and joins).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <httplib.h>

#include "router/replica_address.h"

namespace tokenmill::router {

struct UpstreamRequest {
  std::string method = "POST";  // "GET" | "POST"
  std::string path;
  std::string body;
  httplib::Headers headers;  // sent as they are
  // The longest silence allowed while reading the answer (streams carry
  // keep-alives every 500 ms; a whole answer may take minutes).
  std::chrono::milliseconds read_timeout{600000};
  std::chrono::milliseconds connect_timeout{3000};
  // Stream: the reader blocks when this much is buffered and not taken, so
  // a slow client slows the replica's writes instead of filling memory.
  size_t max_buffered = 0;  // 0: no bound (a whole answer is taken at once)
};

// What the replica answered so far.
struct UpstreamHead {
  int status = -1;  // -1: no status line yet
  std::string content_type;
  httplib::Headers headers;  // the replica's response headers
};

class UpstreamCall {
 public:
  // Starts sending at once.
  UpstreamCall(const ReplicaAddress& to, UpstreamRequest request);
  ~UpstreamCall();
  UpstreamCall(const UpstreamCall&) = delete;
  UpstreamCall& operator=(const UpstreamCall&) = delete;

  // Blocks until the answer can be acted on: the end when `whole`, else a
  // 200 head plus its first body piece, or the end. Calls `keep_waiting`
  // every 100 ms; when it says false the call is cancelled. Returns
  // whether the wait condition was met (false: cancelled first).
  bool wait(bool whole, const std::function<bool()>& keep_waiting);

  // The next body piece, waiting up to `wait` for one. Returns false when
  // none came in time or the answer has ended (see finished()).
  bool next_piece(std::string& out, std::chrono::milliseconds wait);
  // Every body byte received and not yet taken.
  std::string take_all();

  UpstreamHead head() const;
  // The answer has ended (complete, failed or cancelled).
  bool finished() const;
  // Ended without a transport error (HTTP errors count as success here).
  bool succeeded() const;
  // The transport error in words ("" when none).
  std::string error() const;
  // No connection could be made at all (refused, unreachable, timed out).
  bool connect_failed() const;

  void cancel();

 private:
  void run(UpstreamRequest request);
  bool on_piece(const char* data, size_t n);

  httplib::Client client_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  UpstreamHead head_;
  std::deque<std::string> pieces_;
  size_t buffered_ = 0;
  size_t max_buffered_ = 0;
  bool finished_ = false;
  bool succeeded_ = false;
  bool cancelled_ = false;
  httplib::Error error_ = httplib::Error::Success;
  std::thread thread_;
};

}  // namespace tokenmill::router
