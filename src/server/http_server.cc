#include "server/http_server.h"

#include <fmt/format.h>

#include <sys/socket.h>

#include <ctime>

#include "gguf/reader.h"
#include "server/api_error.h"
#include "server/openai_response.h"
#include "server/prometheus.h"
#include "server/request_log.h"
#include "util/error.h"

namespace tokenmill::server {

using nlohmann::json;

void send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status();
  res.set_content(dump_json(error.to_json()), "application/json");
  if (error.retry_after_s() > 0) res.set_header("Retry-After", std::to_string(error.retry_after_s()));
  current_record().error = error.what();
}

HttpServer::HttpServer(ServerOptions options)
    : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  ctx_.model_names = options_.model_names;
  ctx_.created = static_cast<int64_t>(std::time(nullptr));
  const size_t threads = static_cast<size_t>(std::max(options_.http_threads, 4));
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_timeout(options_.keep_alive_timeout_s);
  http_->set_read_timeout(options_.read_timeout_s, 0);
  http_->set_write_timeout(options_.write_timeout_s, 0);
  http_->set_tcp_nodelay(true);  // a token chunk should leave at once
  // httplib's default also sets SO_REUSEPORT, which lets a second server
  // bind the same port and silently take half the connections.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  register_hooks();
  register_routes();
}

HttpServer::~HttpServer() {
  // The accept thread may not have started listening yet (an engine that
  // failed to load right after start()): stop until it has really ended.
  while (listen_thread_.joinable() && !listen_done_.load()) {
    http_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  join();
}

int HttpServer::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ < 0) fail("cannot listen on {} (any port)", options_.host);
  } else {
    if (!http_->bind_to_port(options_.host, options_.port))
      fail("cannot listen on {}:{} (in use, or not a local address?)", options_.host, options_.port);
    port_ = options_.port;
  }
  return port_;
}

void HttpServer::start() {
  listen_thread_ = std::thread([this] {
    http_->listen_after_bind();
    listen_done_.store(true);
  });
  // Return once accepting, so that a stop() right after cannot be lost.
  while (!http_->is_running() && !listen_done_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::attach_engine(engine::Engine& engine, const std::string& model_path) {
  ctx_.tokenizer = engine.tokenizer();
  // Built once here: its vocabulary tables cost O(total token bytes).
  if (ctx_.tokenizer)
    ctx_.grammar_compiler = std::make_unique<grammar::GrammarCompiler>(*ctx_.tokenizer, grammar::GrammarLimits{});
  const gguf::GgufFile file = gguf::GgufFile::open(model_path);
  ctx_.chat = select_chat_format(options_.chat_template, file, ctx_.tokenizer);
  ctx_.engine.store(&engine);
  ctx_.state.store(ServerState::kReady);
}

bool HttpServer::stop_accepting_and_drain(std::chrono::milliseconds grace) {
  ctx_.state.store(ServerState::kStopping);
  if (http_->is_running()) http_->stop();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (ctx_.stats.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return ctx_.stats.in_flight() == 0;
}

void HttpServer::join() {
  if (listen_thread_.joinable()) listen_thread_.join();
}

std::string HttpServer::state_name() const {
  switch (ctx_.state.load()) {
    case ServerState::kLoading: return "loading";
    case ServerState::kStopping: return "stopping";
    case ServerState::kReady: break;
  }
  const engine::Engine* e = ctx_.engine.load();
  if (e && options_.max_waiting > 0 && e->metrics().waiting >= options_.max_waiting) return "overloaded";
  return "ready";
}

void HttpServer::register_hooks() {
  http_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    reset_record();
    RequestRecord& r = current_record();
    r.start = SteadyClock::now();
    r.request_id = req.get_header_value("X-Request-Id");
    if (r.request_id.empty() || r.request_id.size() > 128) r.request_id = new_response_id("req-");
    res.set_header("X-Request-Id", r.request_id);
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Statuses no handler produced (unknown route, body too large, httplib's
  // own 400s) still get an OpenAI error body.
  http_->set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (res.body.empty()) {  // no handler ran (guarded() counts its own)
          send_error(res, error_for_status(res.status));
          ctx_.stats.on_response(endpoint_label(req.path), res.status);
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  // Runs after the response has been sent (streams included), so it must
  // not count anything a client could look for right after its answer.
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (options_.log_requests)
      write_log_line(format_log_line(req.method, req.path, res.status, req.remote_addr, current_record()));
    reset_record();
  });
}

void HttpServer::check_api_key(const httplib::Request& req) {
  if (options_.api_keys.empty()) return;
  const std::string auth = req.get_header_value("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.rfind(kBearer, 0) == 0) {
    const std::string key = auth.substr(kBearer.size());
    for (const std::string& k : options_.api_keys) {
      // Compare every byte so the time taken does not reveal a prefix.
      unsigned diff = static_cast<unsigned>(k.size() ^ key.size());
      for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(key[i]) ^ (i < k.size() ? k[i] : 0);
      if (diff == 0) return;
    }
  }
  ctx_.stats.on_auth_failure();
  throw ApiError(
      401, auth.empty() ? "missing API key: send it as 'Authorization: Bearer KEY'" : "incorrect API key provided",
      "invalid_request_error", std::nullopt, "invalid_api_key");
}

namespace {

int final_status(const httplib::Response& res) { return res.status == -1 ? 200 : res.status; }

template <typename Fn>
void run_guarded(httplib::Response& res, Fn&& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const Error& e) {
    send_error(res, ApiError(400, e.what(), "invalid_request_error"));
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

}  // namespace

httplib::Server::Handler HttpServer::guarded(bool authed,
                                             void (HttpServer::*fn)(const httplib::Request&, httplib::Response&)) {
  return [this, authed, fn](const httplib::Request& req, httplib::Response& res) {
    run_guarded(res, [&] {
      if (authed) check_api_key(req);
      (this->*fn)(req, res);
    });
    // Counted before the response leaves, so that /metrics read right
    // after an answer already includes it.
    ctx_.stats.on_response(endpoint_label(req.path), final_status(res));
  };
}

httplib::Server::Handler HttpServer::guarded_ctx(bool authed, void (*fn)(ServingContext&, const httplib::Request&,
                                                                         httplib::Response&)) {
  return [this, authed, fn](const httplib::Request& req, httplib::Response& res) {
    run_guarded(res, [&] {
      if (authed) check_api_key(req);
      fn(ctx_, req, res);
    });
    // Counted before the response leaves, so that /metrics read right
    // after an answer already includes it.
    ctx_.stats.on_response(endpoint_label(req.path), final_status(res));
  };
}

void HttpServer::register_routes() {
  http_->Get("/health", guarded(false, &HttpServer::handle_health));
  http_->Get("/metrics", guarded(false, &HttpServer::handle_metrics));
  http_->Get("/v1/models", guarded(true, &HttpServer::handle_models));
  http_->Get(R"(/v1/models/(.+))", guarded(true, &HttpServer::handle_models));
  http_->Post("/v1/completions", guarded_ctx(true, &handle_completions));
  http_->Post("/v1/chat/completions", guarded_ctx(true, &handle_chat_completions));
  http_->Post("/tokenize", guarded(true, &HttpServer::handle_tokenize));
  http_->Post("/detokenize", guarded(true, &HttpServer::handle_detokenize));
}

void HttpServer::handle_health(const httplib::Request&, httplib::Response& res) {
  const std::string state = state_name();
  json body = {{"status", state == "ready" ? "ok" : state}};
  if (const engine::Engine* e = ctx_.engine.load()) {
    const engine::MetricsSnapshot m = e->metrics();
    body["running"] = m.running;
    body["waiting"] = m.waiting;
    body["kv_blocks_used"] = m.kv_blocks_used;
    body["kv_blocks_total"] = m.kv_blocks_total;
  }
  res.status = state == "ready" ? 200 : 503;
  if (res.status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump_json(body), "application/json");
}

void HttpServer::handle_metrics(const httplib::Request&, httplib::Response& res) {
  const engine::Engine* e = ctx_.engine.load();
  const engine::MetricsSnapshot m = e ? e->metrics() : engine::MetricsSnapshot{};
  res.set_content(render_metrics(m, ctx_.stats.snapshot(), state_name(), read_process_memory()),
                  "text/plain; version=0.0.4; charset=utf-8");
}

void HttpServer::handle_models(const httplib::Request& req, httplib::Response& res) {
  const engine::Engine* e = ctx_.engine.load();
  auto card = [&](const std::string& name) {
    json m = {{"id", name}, {"object", "model"}, {"created", ctx_.created}, {"owned_by", "tokenmill"}};
    if (e) m["max_model_len"] = e->limits().max_model_len();
    return m;
  };
  if (req.matches.size() > 1) {
    const std::string wanted = req.matches[1];
    ctx_.check_model(wanted);
    res.set_content(dump_json(card(wanted)), "application/json");
    return;
  }
  json data = json::array();
  for (const std::string& name : ctx_.model_names) data.push_back(card(name));
  res.set_content(dump_json({{"object", "list"}, {"data", data}}), "application/json");
}

void HttpServer::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  const engine::Engine& e = ctx_.require_engine();
  const TokenizeRequest r = parse_tokenize_request(req.body, ctx_.parse_limits());
  ctx_.check_model(r.model);
  const tokenizer::Tokenizer& tok = ctx_.require_tokenizer(r.is_chat ? "messages" : "prompt");
  std::vector<int32_t> ids;
  if (r.is_chat) {
    if (!ctx_.chat) bad_request("messages", "the model has no recognised chat template");
    ids = chat_prompt_tokens(*ctx_.chat, tok, r.messages, r.add_generation_prompt);
  } else {
    ids = tok.encode(r.prompt, r.add_special_tokens, /*parse_special=*/false);
  }
  json body = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", e.limits().max_model_len()}};
  if (r.with_pieces) {
    json pieces = json::array();
    for (int32_t id : ids) pieces.push_back(token_display(tok.token_to_piece(id, /*special=*/true)));
    body["pieces"] = pieces;
  }
  res.set_content(dump_json(body), "application/json");
}

void HttpServer::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  ctx_.require_engine();
  const DetokenizeRequest r = parse_detokenize_request(req.body, ctx_.parse_limits());
  ctx_.check_model(r.model);
  const tokenizer::Tokenizer& tok = ctx_.require_tokenizer("tokens");
  res.set_content(dump_json({{"prompt", tok.decode(r.tokens, /*skip_special=*/false)}}), "application/json");
}

}  // namespace tokenmill::server
