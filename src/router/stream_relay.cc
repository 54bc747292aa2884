#include "router/stream_relay.h"

#include "router/error_body.h"
#include "router/event_log.h"
#include "router/proxy.h"

namespace tokenmill::router {

StreamRelay::StreamRelay(std::unique_ptr<UpstreamCall> call, Balancer::Lease lease, Proxy& proxy, bool sse)
    : call_(std::move(call)), lease_(std::move(lease)), proxy_(proxy), sse_(sse) {}

bool StreamRelay::forward(httplib::DataSink& sink, const std::string& piece) {
  const std::string out = sse_ ? framer_.feed(piece) : piece;
  return out.empty() || sink.write(out.data(), out.size());
}

void StreamRelay::end_with_error(httplib::DataSink& sink, const std::string& message) {
  proxy_.counters().failed_requests.fetch_add(1);
  if (!sse_ || framer_.saw_done()) return;  // nothing can be appended, or the client has it all
  const std::string event =
      "data: " + error_json(message, "server_error", "replica_failed").dump() + "\n\ndata: [DONE]\n\n";
  sink.write(event.data(), event.size());
}

bool StreamRelay::run(httplib::DataSink& sink) {
  Replica& replica = proxy_.balancer().replica(static_cast<size_t>(lease_.replica()));
  std::string piece;
  bool client_gone = false;
  while (!client_gone) {
    if (proxy_.cutting()) break;
    if (call_->next_piece(piece, std::chrono::milliseconds(200))) {
      client_gone = !forward(sink, piece);
      continue;
    }
    if (call_->finished()) {
      client_gone = !forward(sink, call_->take_all());  // anything that came in with the end
      break;
    }
  }
  if (client_gone) {
    call_->cancel();
    proxy_.counters().client_disconnects.fetch_add(1);
    return false;
  }
  if (proxy_.cutting() && !call_->finished()) {
    call_->cancel();
    end_with_error(sink, "the router is shutting down; the stream was cut short");
  } else if (!call_->succeeded()) {
    replica.failures.fetch_add(1);
    proxy_.balancer().set_up(static_cast<size_t>(lease_.replica()), false, "stream failed: " + call_->error());
    const std::string message = replica.address.url + " failed mid-stream: " + call_->error();
    log_event({{"event", "stream_failed"}, {"replica", replica.address.url}, {"error", call_->error()}});
    end_with_error(sink, message);
  }
  sink.done();
  return true;
}

}  // namespace tokenmill::router
