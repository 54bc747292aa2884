// The OpenAI-compatible HTTP server: routes on the event-driven front end
// (http_front.h), API keys and the tenants they stand for, error bodies for
// every failure, one log line per request, and a graceful stop. Model
// compute never runs here: handlers tokenize, submit to the Engine and wait
// on its output streams.
//
// Life cycle (serve_command.cc drives it):
//   HttpServer s(options);  int port = s.bind();  s.start();   // /health: loading
//   Engine engine(config);  s.attach_engine(engine, model_path);  // /health: ok
//   ... SIGTERM ...
//   s.stop_accepting_and_drain(grace);   // 503 for new requests, listener closed
//   engine.stop(Engine::StopMode::kAbort);  // ends what the grace did not
//   s.join();
//
// Threads: the front's event loop reads and writes every connection; a
// pool of up to `http_threads` workers runs handlers (a stream holds one
// while it runs; idle and slow connections hold none); GET /health and
// /metrics run on two threads of their own, so probes are answered while
// every worker holds a stream.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "http/http_front.h"
#include "server/admin/api_keys.h"
#include "server/route_table.h"
#include "server/serving_context.h"

namespace tokenmill::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                                            // 0: any free port (bind() returns it)
  std::vector<ApiKey> api_keys;                               // empty: no authentication
  std::vector<std::string> model_names;                       // served names; [0] is reported by /v1/models
  std::string chat_template;                                  // --chat-template NAME|FILE; "" = the GGUF's
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;  // --reasoning-format
  size_t max_body_bytes = size_t{8} << 20;
  // Memory a body's parsed JSON may take (413 beyond), and what all bodies
  // being parsed at once may take together (503 + Retry-After beyond):
  // parsed JSON costs 10-45x its text, so the body limit alone does not
  // bound it (util/bounded_json.h).
  size_t max_request_parse_bytes = size_t{64} << 20;
  size_t max_parse_bytes = size_t{256} << 20;
  size_t max_header_bytes = 16 * 1024;
  int http_threads = 256;
  int max_connections = 4096;
  int max_connections_per_client = 1024;
  double header_timeout_s = 10;  // the whole head, from its first byte
  double body_timeout_s = 30;    // the whole body, from the end of the head
  double keep_alive_timeout_s = 5;
  double write_timeout_s = 30;  // queued output the client does not take
  bool log_requests = true;
  int64_t max_waiting = 0;  // the engine's queue bound: /health says "overloaded" at it
  // LoRA adapters (docs/api.md, "LoRA adapters"): (name, file) pairs loaded
  // by attach_engine; the bound on adapters resident at once; whether
  // clients may load and unload adapters at run time.
  std::vector<std::pair<std::string, std::string>> loras;
  int max_loras = 8;
  bool allow_runtime_lora = false;
  GenerationPolicy generation;
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
  // and loads ServerOptions::loras (throws Error for a bad --chat-template
  // or adapter file). The engine must outlive join().
  void attach_engine(engine::Engine& engine, const std::string& model_path);
  // New requests get 503 from now on; closes the listener and waits up to
  // `grace` for requests in flight. True when none is left.
  bool stop_accepting_and_drain(std::chrono::milliseconds grace);
  // Waits for the accept thread and every worker to finish.
  void join();

  // "loading" | "ready" | "overloaded" | "stopping"
  std::string state_name() const;
  ServingContext& context() { return ctx_; }
  const ServingContext& context() const { return ctx_; }
  http::HttpFrontStats front_stats() const { return front_.stats(); }
  // The handlers' counters with the front's connection counters (what
  // /metrics and the console report).
  HttpStatsSnapshot http_stats() const;

  using Handler = RouteTable::Handler;
  // Adds a route for other modules (the web console, src/console/). The
  // pattern is a regex over the whole path; its groups reach the handler in
  // HttpRequest::matches. `authed`: the API key is checked first. Only
  // before start(): the workers read the table without a lock.
  void add_route(const char* method, const char* pattern, bool authed, Handler fn);

 private:
  void register_routes();
  // The front's handler: request id and log record, routing (404, 405),
  // the key check, exceptions -> error bodies, the response counters.
  void dispatch(HttpRequest& req, HttpResponse& res);
  // For a route that needs a key: 503 while draining, 401 for a missing or
  // wrong key; sets the request's tenant and what it may see of others.
  void authorize(HttpRequest& req);
  void handle_health(const HttpRequest& req, HttpResponse& res);
  void handle_metrics(const HttpRequest& req, HttpResponse& res);

  ServerOptions options_;
  ServingContext ctx_;
  // The model adapters are loaded against: set by attach_engine, before
  // any load (runtime loads require the engine, published after it).
  const model::Model* base_model_ = nullptr;
  ApiKeyTable keys_;
  RouteTable routes_;
  http::HttpFront front_;
  bool started_ = false;
};

// Sets the status, the OpenAI error body and Retry-After.
void send_error(HttpResponse& res, const class ApiError& error);

}  // namespace tokenmill::server
