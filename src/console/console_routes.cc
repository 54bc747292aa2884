#include "console/console_routes.h"

#include <chrono>

#include "console/console_assets.h"
#include "console/console_status.h"
#include "console/console_ticket.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/openai/openai_response.h"

namespace tokenmill::console {

using nlohmann::json;

namespace {

// Everything the page loads comes from this server: no CDN, no inline
// script, nothing framed elsewhere. blob: images are the plots of a report
// the user opened from disk.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' blob: data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void send_asset(const server::HttpRequest& req, server::HttpResponse& res, std::string_view name) {
  const std::optional<Asset> asset = find_asset(name);
  if (!asset) throw server::ApiError(404, fmt::format("the console has no file '{}'", name), "not_found_error");
  res.set_header("Content-Security-Policy", kContentSecurityPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  // Revalidated on every load, so a new binary's console is never mixed
  // with an old cached script; an unchanged file costs a 304.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("ETag", asset->etag);
  if (req.header("If-None-Match") == asset->etag) {
    res.status = 304;
    return;
  }
  res.set_content(std::string(asset->bytes), std::string(asset->content_type));
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

std::shared_ptr<Console> Console::install(server::HttpServer& http) {
  auto console = std::make_shared<Console>();
  http.add_route("GET", "/", false,
                 [](server::HttpRequest& req, server::HttpResponse& res) { send_asset(req, res, "index.html"); });
  http.add_route("GET", "/console/api/status", true, [console, &http](server::HttpRequest&, server::HttpResponse& res) {
    const server::ServingContext& ctx = http.context();
    StatusInputs in;
    in.state = http.state_name();
    if (const engine::Engine* e = ctx.engine.load()) in.engine = e->metrics();
    in.http = http.http_stats();
    in.memory = server::read_process_memory();
    in.server = console->server_info();
    in.now_s = unix_now();
    in.started_s = static_cast<double>(ctx.created);
    res.set_header("Cache-Control", "no-store");
    res.set_content(server::dump_json(status_json(in)), "application/json");
  });
  http.add_route("POST", "/console/api/ticket", true, [&http](server::HttpRequest& req, server::HttpResponse& res) {
    // Two benchmark reports: bounded like every request body (413 for one
    // too large to parse, 503 while the server's parse budget is spent).
    const json body = server::parse_unordered_json(req.body, http.context().parse_limits().json);
    if (!body.is_object()) server::bad_request("", "the body must be a JSON object");
    res.set_content(server::dump_json(ticket_response(body)), "application/json");
  });
  http.add_route("GET", "/console/([A-Za-z0-9_-]+\\.[a-z]+)", false,
                 [](server::HttpRequest& req, server::HttpResponse& res) { send_asset(req, res, req.matches[1]); });
  return console;
}

void Console::set_server_info(json info) {
  std::lock_guard lock(mutex_);
  info_ = std::move(info);
}

json Console::server_info() const {
  std::lock_guard lock(mutex_);
  return info_;
}

}  // namespace tokenmill::console
