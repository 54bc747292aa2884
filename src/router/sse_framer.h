// Passes a Server-Sent Events stream through in whole events. A replica
// writes each event ("data: {...}\n\n") in one piece, so nothing is held
// back in practice; but when a piece ends mid-event (a large event split
// by the transport, or a replica that died mid-write), the unfinished tail
// waits for its end. The router can then always append an event of its
// own (the error event after a replica failure) without corrupting one.
#pragma once

#include <string>
#include <string_view>

namespace tokenmill::router {

class SseFramer {
 public:
  // Adds `piece`; returns the bytes that complete events, in order (empty
  // when the piece completes none).
  std::string feed(std::string_view piece);
  // A "data: [DONE]" event has been returned by feed().
  bool saw_done() const { return saw_done_; }
  // Bytes held back: the start of an unfinished event.
  size_t pending() const { return tail_.size(); }

 private:
  std::string tail_;
  bool saw_done_ = false;
};

}  // namespace tokenmill::router
