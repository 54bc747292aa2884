// The OpenAI-compatible HTTP server: cpp-httplib for HTTP, routes to the
// handlers, API keys, error bodies for every failure, one log line per
// request, and a graceful stop. Model compute never runs here: handlers
// tokenize, submit to the Engine and wait on its output streams.
//
// Life cycle (serve_command.cc drives it):
//   HttpServer s(options);  int port = s.bind();  s.start();   // /health: loading
//   Engine engine(config);  s.attach_engine(engine, model_path);  // /health: ok
//   ... SIGTERM ...
//   s.stop_accepting_and_drain(grace);   // 503 for new requests, listener closed
//   engine.stop(Engine::StopMode::kAbort);  // ends what the grace did not
//   s.join();
//
// Threads: one accept thread plus a pool of `http_threads` workers; each
// connection is served by one worker at a time, so the pool bounds the
// number of concurrent streams (64 clients need 64+ workers).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "server/serving_context.h"

namespace tokenmill::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (bind() returns it)
  std::vector<std::string> api_keys;     // empty: no authentication
  std::vector<std::string> model_names;  // served names; [0] is reported by /v1/models
  std::string chat_template;             // --chat-template NAME|FILE; "" = the GGUF's
  size_t max_body_bytes = size_t{8} << 20;
  int http_threads = 128;
  int keep_alive_timeout_s = 5;
  int read_timeout_s = 30;
  int write_timeout_s = 30;
  bool log_requests = true;
  int64_t max_waiting = 0;  // the engine's queue bound: /health says "overloaded" at it
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  // Stops and joins if still running.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket. Returns the port (the chosen one for port
  // 0). Throws Error when the address cannot be bound.
  int bind();
  // Starts accepting on a background thread; returns once it accepts.
  // Precondition: bind() succeeded.
  void start();
  // Serves `engine` from now on. Reads the chat template of the model file
  // (throws Error for a bad --chat-template). The engine must outlive join().
  void attach_engine(engine::Engine& engine, const std::string& model_path);
  // New requests get 503 from now on; closes the listener and waits up to
  // `grace` for requests in flight. True when none is left.
  bool stop_accepting_and_drain(std::chrono::milliseconds grace);
  // Waits for the accept thread and every worker to finish.
  void join();

  // "loading" | "ready" | "overloaded" | "stopping"
  std::string state_name() const;
  ServingContext& context() { return ctx_; }

 private:
  void register_routes();
  void register_hooks();
  void handle_health(const httplib::Request& req, httplib::Response& res);
  void handle_metrics(const httplib::Request& req, httplib::Response& res);
  void handle_models(const httplib::Request& req, httplib::Response& res);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  // Wraps a handler: API-key check (when `authed`), exceptions -> error bodies.
  httplib::Server::Handler guarded(bool authed, void (HttpServer::*fn)(const httplib::Request&, httplib::Response&));
  httplib::Server::Handler guarded_ctx(bool authed,
                                       void (*fn)(ServingContext&, const httplib::Request&, httplib::Response&));
  void check_api_key(const httplib::Request& req);

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  ServingContext ctx_;
  std::thread listen_thread_;
  std::atomic<bool> listen_done_{false};
  int port_ = 0;
};

// Sets the status, the OpenAI error body and Retry-After.
void send_error(httplib::Response& res, const class ApiError& error);

}  // namespace tokenmill::server
