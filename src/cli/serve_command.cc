// `tokenmill serve`: the engine behind an OpenAI-compatible HTTP API
// (src/server/). Binds to loopback unless told otherwise, answers /health
// with "loading" while the model loads, logs one JSON line per request on
// stderr, and on SIGTERM/SIGINT stops accepting, lets requests in flight
// finish for --shutdown-grace seconds, aborts the rest and exits 0.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/stop_signals.h"
#include "engine/engine.h"
#include "engine/memory_budget.h"
#include "server/http_server.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct ServeOptions {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;
  std::vector<std::string> aliases;
  std::string chat_template;
  std::string max_body = "8M";
  int http_threads = 128;
  double shutdown_grace_s = 10.0;
  bool quiet = false;
  EngineFlags engine;  // shared with `bench engine` (engine_flags.h)
};

server::ServerOptions server_options(const ServeOptions& o) {
  server::ServerOptions s;
  s.host = o.host;
  s.port = o.port;
  s.api_keys = o.api_keys;
  for (const std::string& k : o.api_keys)
    if (k.empty()) fail("--api-key must not be empty");
  s.model_names = o.aliases;
  // The file name without .gguf is always served too.
  std::string stem = std::filesystem::path(o.model_path).stem().string();
  if (std::find(s.model_names.begin(), s.model_names.end(), stem) == s.model_names.end()) s.model_names.push_back(stem);
  s.chat_template = o.chat_template;
  s.max_body_bytes = static_cast<size_t>(engine::parse_byte_size(o.max_body));
  if (o.http_threads < 4 || o.http_threads > 4096) fail("--http-threads must be in [4, 4096], got {}", o.http_threads);
  s.http_threads = o.http_threads;
  s.log_requests = !o.quiet;
  s.max_waiting = o.engine.max_waiting;
  return s;
}

void log_event(const std::string& json_line) {
  std::fputs(json_line.c_str(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

void serve(const ServeOptions& o) {
  engine::EngineConfig config = engine_config(o.model_path, o.engine);
  // Under mpirun: ranks other than 0 serve their shard of the model only.
  const std::shared_ptr<dist::MpiRuntime> parallel = start_parallel(o.engine.parallel);
  if (run_if_worker(parallel, config)) return;
  const sigset_t signals = block_stop_signals();
  server::HttpServer http(server_options(o));
  const int port = http.bind();
  http.start();
  log_event(fmt::format(R"({{"event":"listening","url":"http://{}:{}","state":"loading"}})", o.host, port));
  engine::Engine engine(config);
  http.attach_engine(engine, o.model_path);
  const server::ServingContext& ctx = http.context();
  log_event(
      fmt::format(R"({{"event":"ready","model":"{}","threads":{},"weights_runtime":"{}","kv_dtype":"{}",)"
                  R"("kv_bytes_per_token":{},"kv_blocks":{},"kv_window_blocks":{},"kv_block_size":{},"kv_bytes":{},)"
                  R"("max_model_len":{},"chat_template":"{}","tp":{},"pp":{},"pid":{}}})",
                  ctx.model_names[0], engine.num_threads(), runtime_name(engine.matmul_hook()),
                  kv::kv_dtype_name(config.kv_dtype), engine.kv_bytes_per_token(), engine.num_kv_blocks(),
                  engine.num_window_kv_blocks(), config.block_size, engine.kv_bytes(), engine.limits().max_model_len(),
                  ctx.chat ? std::string(tokenizer::chat_template_name(ctx.chat->kind)) : "none", o.engine.parallel.tp,
                  o.engine.parallel.pp, static_cast<int64_t>(getpid())));
  int sig = 0;
  sigwait(&signals, &sig);
  log_event(fmt::format(R"({{"event":"shutdown","signal":"{}","in_flight":{}}})", sig == SIGINT ? "SIGINT" : "SIGTERM",
                        http.context().stats.in_flight()));
  const bool drained =
      http.stop_accepting_and_drain(std::chrono::milliseconds(static_cast<int64_t>(o.shutdown_grace_s * 1000.0)));
  engine.stop(drained ? engine::Engine::StopMode::kDrain : engine::Engine::StopMode::kAbort);
  http.join();
  log_event(fmt::format(R"({{"event":"stopped","drained":{}}})", drained ? "true" : "false"));
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  ServeOptions* o = opts.get();
  cmd->add_option("-m,--model", o->model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--host", o->host, "Address to bind (loopback by default)")->capture_default_str();
  cmd->add_option("--port", o->port, "Port; 0 picks a free one (logged)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_keys, "Require 'Authorization: Bearer KEY' (repeatable)");
  cmd->add_option("--model-alias", o->aliases,
                  "Name clients use for the model (repeatable; the file stem always works)");
  cmd->add_option("--chat-template", o->chat_template, "gemma|llama2|llama3|chatml|mistral|phi3, or a Jinja file");
  cmd->add_option("--max-body-bytes", o->max_body, "Largest request body, e.g. 8M (413 beyond)")->capture_default_str();
  cmd->add_option("--http-threads", o->http_threads, "HTTP worker threads = concurrent connections")
      ->capture_default_str();
  cmd->add_option("--shutdown-grace", o->shutdown_grace_s, "Seconds in-flight requests get on SIGTERM")
      ->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "No per-request log lines");
  add_engine_flags(*cmd, o->engine, EngineFlagSet::kServe);
  cmd->callback([opts] { serve(*opts); });
}

}  // namespace tokenmill::cli
