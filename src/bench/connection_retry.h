// When a request may be sent again on a fresh connection.
//
// The driver keeps one HTTP/1.1 connection per client thread alive between
// requests. A server may close such a connection while it sits idle (an
// idle timeout, or a cap on requests per connection) without saying so in
// a "Connection: close" header; llama.cpp's llama-server does. The client
// learns it only when the next request's write fails or its read finds the
// socket closed. Such a request never reached a handler that answered it,
// so it is sent once more on a fresh connection, and the record counts it
// (RequestRecord::reconnects). Once any byte of a response has arrived, a
// failure is the server's or the network's and is recorded as a transport
// error: retrying it would hide a real fault and measure the request twice.
#pragma once

namespace tokenmill::bench {

enum class TransportFailure { kNone, kWrite, kRead, kOther };

struct FailedAttempt {
  TransportFailure failure = TransportFailure::kNone;
  bool reused_connection = false;  // the request went out on a kept-alive connection
  bool response_started = false;   // the status line and headers had arrived
  bool at_deadline = false;        // it failed when the request's timeout ran out
  int num_retries = 0;             // retries already made for this request
};

// True for a write or read failure on a reused connection before any
// response byte, not at the deadline (a read timeout is a slow server, not
// a stale connection), and only once per request.
bool retry_on_fresh_connection(const FailedAttempt& attempt);

}  // namespace tokenmill::bench
