#include "server/http_server.h"

#include <fmt/format.h>

#include <ctime>

#include "gguf/reader.h"
#include "server/admin/prometheus.h"
#include "server/api_error.h"
#include "server/api_rooms.h"
#include "server/openai/openai_response.h"
#include "server/request_log.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::server {

using nlohmann::json;

void send_error(HttpResponse& res, const ApiError& error) {
  res.status = error.status();
  res.set_content(dump_json(error.to_json()), "application/json");
  if (error.retry_after_s() > 0) res.set_header("Retry-After", std::to_string(error.retry_after_s()));
  current_record().error = error.what();
}

namespace {

std::chrono::milliseconds seconds_ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0)); }

http::HttpFrontOptions front_options(const ServerOptions& o) {
  http::HttpFrontOptions f;
  f.host = o.host;
  f.port = o.port;
  f.limits.max_body_bytes = o.max_body_bytes;
  f.limits.max_head_bytes = o.max_header_bytes;
  f.max_connections = o.max_connections;
  f.max_connections_per_client = o.max_connections_per_client;
  f.header_timeout = seconds_ms(o.header_timeout_s);
  f.body_timeout = seconds_ms(o.body_timeout_s);
  f.keep_alive_timeout = seconds_ms(o.keep_alive_timeout_s);
  f.write_timeout = seconds_ms(o.write_timeout_s);
  f.worker_threads = std::max(o.http_threads, 4);
  return f;
}

// The OpenAI error body for a status the front answers itself, with its
// precise message (what was wrong with the request).
HttpResponse front_error(int status, const std::string& message) {
  ApiError generic = error_for_status(status);
  ApiError e(status, message.empty() ? generic.what() : message, generic.type(), std::nullopt, generic.code());
  HttpResponse res;
  res.status = status;
  res.set_content(dump_json(e.to_json()), "application/json");
  return res;
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : options_(std::move(options)),
      keys_(options_.api_keys),
      front_(front_options(options_),
             http::HttpFrontHooks{
                 [this](HttpRequest& req, HttpResponse& res) { dispatch(req, res); },
                 [this](const HttpRequest& req, const HttpResponse& res, bool completed) {
                   RequestRecord& r = current_record();
                   if (!completed) r.client_disconnected = true;
                   if (options_.log_requests)
                     write_log_line(format_log_line(req.method, req.path, res.status, req.remote_addr, r));
                   reset_record();
                 },
                 front_error,
                 [this](int status) { ctx_.stats.on_response("other", status); },
                 [](const HttpRequest& req) {
                   return req.method == "GET" && (req.path == "/health" || req.path == "/metrics");
                 },
             }) {
  ctx_.model_names = options_.model_names;
  ctx_.loras = std::make_unique<LoraRegistry>(
      [this](const std::string& path, const std::string& name) {
        TM_CHECK(base_model_ != nullptr);
        return model::LoraAdapter::load(path, *base_model_, name);
      },
      ctx_.model_names, std::max(options_.max_loras, 1));
  ctx_.allow_runtime_lora = options_.allow_runtime_lora;
  ctx_.created = static_cast<int64_t>(std::time(nullptr));
  ctx_.policy = options_.generation;
  ctx_.max_request_parse_bytes = options_.max_request_parse_bytes;
  ctx_.parse_memory = std::make_unique<util::SharedByteBudget>(options_.max_parse_bytes);
  register_routes();
}

HttpServer::~HttpServer() { join(); }

int HttpServer::bind() { return front_.bind(); }

void HttpServer::start() {
  front_.start();
  started_ = true;
}

void HttpServer::attach_engine(engine::Engine& engine, const std::string& model_path) {
  ctx_.tokenizer = engine.tokenizer();
  if (ctx_.tokenizer)
    for (int32_t id = 0; id < ctx_.tokenizer->vocab_size(); ++id)
      ctx_.max_token_bytes = std::max(ctx_.max_token_bytes, ctx_.tokenizer->token_to_piece(id).size());
  // Built once here: its vocabulary tables cost O(total token bytes).
  if (ctx_.tokenizer)
    ctx_.grammar_compiler = std::make_unique<grammar::GrammarCompiler>(*ctx_.tokenizer, grammar::GrammarLimits{});
  const gguf::GgufFile& file = engine.model_file();
  ctx_.chat = select_chat_format(options_.chat_template, file, ctx_.tokenizer);
  ctx_.reasoning_format = options_.reasoning_format;
  ctx_.model_profile = profile_model(read_model_metadata(file), ctx_.chat);
  ctx_.model_path = model_path;
  for (const auto& hook : ctx_.on_attach) hook(engine);  // before the engine is published to the handlers
  base_model_ = &engine.model();
  for (const auto& [name, path] : options_.loras) {
    try {
      ctx_.loras->load(name, path);
    } catch (const ApiError& e) {
      fail("--lora {}={}: {}", name, path, e.what());
    }
  }
  ctx_.engine.store(&engine);
  ctx_.state.store(ServerState::kReady);
}

bool HttpServer::stop_accepting_and_drain(std::chrono::milliseconds grace) {
  ctx_.state.store(ServerState::kStopping);
  front_.stop_accepting();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (ctx_.stats.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return ctx_.stats.in_flight() == 0;
}

void HttpServer::join() {
  if (!started_) return;
  front_.stop();
  started_ = false;
}

std::string HttpServer::state_name() const {
  switch (ctx_.state.load()) {
    case ServerState::kLoading: return "loading";
    case ServerState::kStopping: return "stopping";
    case ServerState::kReady: break;
  }
  const engine::Engine* e = ctx_.engine.load();
  // Overloaded: an arrival would be refused (the bound counts only what
  // cannot start now, as the scheduler's admission does).
  if (e && options_.max_waiting > 0) {
    const engine::MetricsSnapshot m = e->metrics();
    if (m.waiting >= options_.max_waiting + m.free_seq_slots) return "overloaded";
  }
  return "ready";
}

namespace {

template <typename Fn>
void run_guarded(HttpResponse& res, Fn&& fn) {
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

void HttpServer::add_route(const char* method, const char* pattern, bool authed, Handler fn) {
  TM_CHECK(!started_);
  routes_.add(method, pattern, authed, std::move(fn));
}

void HttpServer::dispatch(HttpRequest& req, HttpResponse& res) {
  reset_record();
  RequestRecord& r = current_record();
  r.start = SteadyClock::now();
  r.request_id = req.header("X-Request-Id");
  if (r.request_id.empty() || r.request_id.size() > 128) r.request_id = new_response_id("req-");
  res.set_header("X-Request-Id", r.request_id);
  std::vector<std::string> allowed;
  const RouteTable::Route* found = routes_.find(req, allowed);
  if (!found) {
    if (allowed.empty()) {
      send_error(res, error_for_status(404));
    } else {
      send_error(res, ApiError(405,
                               fmt::format("{} is not allowed on {} (allowed: {})", req.method, req.path,
                                           fmt::join(allowed, ", ")),
                               "invalid_request_error", std::nullopt, "method_not_allowed"));
      res.set_header("Allow", fmt::format("{}", fmt::join(allowed, ", ")));
    }
    ctx_.stats.on_response(endpoint_label(req.path), res.status);
    return;
  }
  run_guarded(res, [&] {
    if (found->authed) authorize(req);
    found->fn(req, res);
  });
  // Counted before the response leaves, so that /metrics read right after
  // an answer already includes it.
  ctx_.stats.on_response(endpoint_label(req.path), res.status);
}

void HttpServer::authorize(HttpRequest& req) {
  // Draining after SIGTERM: every API request is refused (the probes,
  // /health and /metrics, still answer, and say "stopping").
  ctx_.refuse_if_stopping();
  const ApiKey* key = nullptr;
  if (keys_.enabled()) {
    const std::string auth = req.header("Authorization");
    key = keys_.find(auth);
    if (!key) {
      ctx_.stats.on_auth_failure();
      throw ApiError(
          401, auth.empty() ? "missing API key: send it as 'Authorization: Bearer KEY'" : "incorrect API key provided",
          "invalid_request_error", std::nullopt, "invalid_api_key");
    }
  }
  req.tenant = resolve_tenant(key, keys_.enabled(), req.header("X-Tenant"));
  req.sees_all_tenants = !keys_.enabled() || key->admin;
}

// The server's own probes; every API's routes come from its room
// (api_rooms.cc).
void HttpServer::register_routes() {
  auto own = [this](void (HttpServer::*fn)(const HttpRequest&, HttpResponse&)) {
    return [this, fn](HttpRequest& req, HttpResponse& res) { (this->*fn)(req, res); };
  };
  routes_.add("GET", "/health", false, own(&HttpServer::handle_health));
  routes_.add("GET", "/v1/health", false, own(&HttpServer::handle_health));  // llama-server's alias
  routes_.add("GET", "/metrics", false, own(&HttpServer::handle_metrics));
  add_api_routes(routes_, ctx_);
}

void HttpServer::handle_health(const HttpRequest&, HttpResponse& res) {
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
  if (res.status == 503) {
    res.set_header("Retry-After", "1");
    // llama.cpp's readers look for an error object on a 503.
    const char* message = state == "loading" ? "Loading model" : state == "stopping" ? "Shutting down" : "Overloaded";
    body["error"] = {{"code", 503}, {"message", message}, {"type", "unavailable_error"}};
  }
  res.set_content(dump_json(body), "application/json");
}

HttpStatsSnapshot HttpServer::http_stats() const {
  HttpStatsSnapshot http = ctx_.stats.snapshot();
  http.front = front_.stats();
  return http;
}

void HttpServer::handle_metrics(const HttpRequest& req, HttpResponse& res) {
  const engine::Engine* e = ctx_.engine.load();
  engine::MetricsSnapshot m = e ? e->metrics() : engine::MetricsSnapshot{};
  // /metrics answers without a key (probes and scrapers), so with keys the
  // tenants' names and usage go only to an admin key's scrape; others get
  // the sums under tenant="_all".
  if (keys_.enabled()) {
    const ApiKey* key = keys_.find(req.header("Authorization"));
    if (!key || !key->admin) fold_tenants(m);
  }
  res.set_content(render_metrics(m, http_stats(), state_name(), read_process_memory(), ctx_.loras->stats()),
                  "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace tokenmill::server
