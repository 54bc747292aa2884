// HttpFront::Impl's requests and responses: feeding what arrived to the
// parser, dispatching a complete request to a worker, writing its answer
// there, and taking the connection back on the loop when it is done.
#include "http/http_front_impl.h"

#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tokenmill::http {

// Answers an error the front found itself and closes after it.
void HttpFront::Impl::fail_request(const std::shared_ptr<Connection>& c, int status, const std::string& message) {
  if (hooks.on_front_error) hooks.on_front_error(status);
  const HttpResponse r = hooks.error(status, message);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->phase = Phase::kClosing;
    c->out += response_head(r, false, false) + r.body;
    if (c->flush_locked()) {
      c->update_interest_locked();
    } else {
      c->mark_broken_locked();
    }
  }
  close_when_flushed(c);
}

// Feeds what has arrived to the parser; dispatches a complete request.
void HttpFront::Impl::parse(const std::shared_ptr<Connection>& c) {
  while (!c->pending_in.empty() && c->phase == Phase::kReading) {
    if (!c->reading_request) {
      c->reading_request = true;
      c->request_start = Clock::now();
    }
    const bool had_head = c->parser.head_complete();
    const size_t used = c->parser.feed(c->pending_in);
    c->pending_in.erase(0, used);
    if (!had_head && c->parser.head_complete()) {
      c->head_done = Clock::now();
      if (c->parser.request().expects_continue && c->parser.state() == HttpRequestParser::State::kBody)
        c->send("HTTP/1.1 100 Continue\r\n\r\n");
    }
    switch (c->parser.state()) {
      case HttpRequestParser::State::kError:
        count(&HttpFrontStats::requests_malformed);
        fail_request(c, c->parser.error_status(), c->parser.error_message());
        return;
      case HttpRequestParser::State::kComplete: dispatch(c); return;
      default:
        if (used == 0) return;  // needs more bytes
    }
  }
}

void HttpFront::Impl::dispatch(const std::shared_ptr<Connection>& c) {
  ParsedRequest p = c->parser.take();
  c->parser.reset();
  c->reading_request = false;
  c->keep_alive = p.keep_alive;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->phase = Phase::kBusy;
    c->update_interest_locked();
  }
  auto req = std::make_shared<HttpRequest>();
  req->method = std::move(p.method);
  req->path = std::move(p.path);
  req->query = std::move(p.query);
  req->headers = std::move(p.headers);
  req->body = std::move(p.body);
  req->remote_addr = c->addr;
  req->connection = c;
  WorkerPool& pool = hooks.is_light && hooks.is_light(*req) ? light_workers : workers;
  pool.post([this, c, req] { respond(c, *req); });
}

// Worker thread: runs the handler and writes its answer.
void HttpFront::Impl::respond(const std::shared_ptr<Connection>& c, HttpRequest& req) {
  HttpResponse res;
  bool ok = true;
  bool head_sent = false;
  bool failed = false;  // a handler threw: answer 500 (if still possible) and close
  // Once the listener is closed every answer ends its connection.
  const bool keep_alive = c->keep_alive && !stopping.load() && !accept_closed.load();
  try {
    hooks.handle(req, res);
    if (res.stream) {
      ok = c->send(response_head(res, keep_alive, true));
      head_sent = true;
      ChunkedStream stream(*c);
      if (ok) ok = res.stream(stream);
      if (ok) ok = c->send("0\r\n\r\n");
    } else {
      ok = c->send(response_head(res, keep_alive, false) + res.body);
    }
  } catch (const std::exception& e) {
    // The handlers answer their own errors; this is a bug, and the client
    // still gets an answer (or, mid-stream, a dropped connection).
    failed = true;
    if (!head_sent) {
      res = hooks.error(500, std::string("internal error: ") + e.what());
      ok = c->send(response_head(res, false, false) + res.body);
    }
  }
  if (hooks.after) hooks.after(req, res, ok);
  req.connection.reset();
  {
    std::lock_guard<std::mutex> lock(done_mu);
    done.emplace_back(c, ok && keep_alive && !failed);
  }
  wake();
}

// Loop thread: a worker finished a response.
void HttpFront::Impl::finish_responses() {
  std::vector<std::pair<std::shared_ptr<Connection>, bool>> batch;
  {
    std::lock_guard<std::mutex> lock(done_mu);
    batch.swap(done);
  }
  for (auto& [c, keep] : batch) {
    auto it = conns.find(c->fd);
    if (it == conns.end() || it->second != c) continue;  // closed already
    {
      std::lock_guard<std::mutex> lock(c->mu);
      if (c->broken.load()) keep = false;
      c->phase = keep ? Phase::kReading : Phase::kClosing;
      c->idle_since = Clock::now();
      c->update_interest_locked();
    }
    if (keep) {
      parse(c);  // a pipelined request may be waiting already
    } else {
      close_when_flushed(c);
    }
  }
}

}  // namespace tokenmill::http
