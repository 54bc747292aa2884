// Relays one committed stream (the replica answered 200 and its first bytes
// are in) from the upstream call to the client, piece by piece as the
// pieces arrive. Ends it with an error event and "data: [DONE]" when the
// replica fails mid-stream (or the router is cut short at shutdown), and
// cancels the upstream request when the client goes away.
//
// Holds the balancer lease, so the request counts as in flight on its
// replica until the stream has ended. Runs on the HTTP worker that writes
// the response; not shared.
#pragma once

#include <memory>
#include <string>

#include <httplib.h>

#include "router/balancer.h"
#include "router/sse_framer.h"
#include "router/upstream_call.h"

namespace tokenmill::router {

class Proxy;

class StreamRelay {
 public:
  // `sse`: the answer is text/event-stream (relayed in whole events, and
  // an error event can be appended); else bytes pass as they come.
  StreamRelay(std::unique_ptr<UpstreamCall> call, Balancer::Lease lease, Proxy& proxy, bool sse);

  // Writes the whole stream. Returns false when the client went away.
  bool run(httplib::DataSink& sink);

 private:
  bool forward(httplib::DataSink& sink, const std::string& piece);
  void end_with_error(httplib::DataSink& sink, const std::string& message);

  std::unique_ptr<UpstreamCall> call_;
  Balancer::Lease lease_;
  Proxy& proxy_;
  bool sse_;
  SseFramer framer_;
};

}  // namespace tokenmill::router
