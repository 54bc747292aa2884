// `tokenmill serve`: the engine behind an OpenAI-compatible HTTP API
// (src/server/). Binds to loopback unless told otherwise, answers /health
// with "loading" while the model loads, logs one JSON line per request on
// stderr, and on SIGTERM/SIGINT stops accepting, lets requests in flight
// finish for --shutdown-grace seconds, aborts the rest and exits 0.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/stop_signals.h"
#include "console/console_routes.h"
#include "engine/engine.h"
#include "engine/memory_budget.h"
#include "gguf/weight_types.h"
#include "kernels/dispatch.h"
#include "server/http_server.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct ServeOptions {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;
  std::vector<std::string> trusted_api_keys;
  std::vector<std::string> admin_api_keys;
  std::string api_key_file;
  std::vector<std::string> aliases;
  std::string chat_template;
  server::ReasoningFormat reasoning_format = server::ReasoningFormat::kAuto;
  std::string max_body = "8M";
  std::string max_header = "16K";
  std::string max_request_parse = "64M";
  std::string max_parse = "256M";
  int http_threads = 256;
  int max_connections = 4096;
  int max_connections_per_client = 1024;
  double header_timeout_s = 10;
  double body_timeout_s = 30;
  double keep_alive_timeout_s = 5;
  double write_timeout_s = 30;
  double request_timeout_s = 0;
  int64_t default_max_tokens = 0;
  std::string max_unsent = "256K";
  double stalled_client_timeout_s = 30;
  std::string pooling = "mean";
  double shutdown_grace_s = 10.0;
  bool quiet = false;
  std::vector<std::string> loras;  // NAME=FILE
  int max_loras = 8;
  bool allow_runtime_lora = false;
  bool console = true;  // the web console at / (--no-console)
  EngineFlags engine;   // shared with `bench engine` (engine_flags.h)
};

// --max-body-bytes, --max-header-bytes and the JSON parse budgets.
void set_size_limits(const ServeOptions& o, server::ServerOptions& s) {
  s.max_body_bytes = static_cast<size_t>(engine::parse_byte_size(o.max_body));
  s.max_header_bytes = static_cast<size_t>(engine::parse_byte_size(o.max_header));
  if (s.max_header_bytes < 1024) fail("--max-header-bytes must be at least 1K, got {}", o.max_header);
  s.max_request_parse_bytes = static_cast<size_t>(engine::parse_byte_size(o.max_request_parse));
  s.max_parse_bytes = static_cast<size_t>(engine::parse_byte_size(o.max_parse));
  if (s.max_request_parse_bytes < (size_t{1} << 20))
    fail("--max-request-parse-bytes must be at least 1M, got {}", o.max_request_parse);
  if (s.max_parse_bytes < s.max_request_parse_bytes)
    fail("--max-parse-bytes ({}) must be at least --max-request-parse-bytes ({})", o.max_parse, o.max_request_parse);
}

server::ServerOptions server_options(const ServeOptions& o) {
  server::ServerOptions s;
  s.host = o.host;
  s.port = o.port;
  for (const std::string& k : o.api_keys) s.api_keys.push_back(server::parse_api_key(k));
  for (const std::string& k : o.trusted_api_keys) s.api_keys.push_back(server::parse_api_key(k, /*trusted=*/true));
  for (const std::string& k : o.admin_api_keys)
    s.api_keys.push_back(server::parse_api_key(k, /*trusted=*/false, /*admin=*/true));
  if (!o.api_key_file.empty())
    for (server::ApiKey& k : server::load_api_key_file(o.api_key_file)) s.api_keys.push_back(std::move(k));
  s.model_names = o.aliases;
  // The file name without .gguf is always served too.
  std::string stem = std::filesystem::path(o.model_path).stem().string();
  if (std::find(s.model_names.begin(), s.model_names.end(), stem) == s.model_names.end()) s.model_names.push_back(stem);
  s.chat_template = o.chat_template;
  s.reasoning_format = o.reasoning_format;
  set_size_limits(o, s);
  if (o.http_threads < 4 || o.http_threads > 4096) fail("--http-threads must be in [4, 4096], got {}", o.http_threads);
  s.http_threads = o.http_threads;
  if (o.max_connections < 1) fail("--max-connections must be at least 1, got {}", o.max_connections);
  if (o.max_connections_per_client < 1)
    fail("--max-connections-per-client must be at least 1, got {}", o.max_connections_per_client);
  s.max_connections = o.max_connections;
  s.max_connections_per_client = o.max_connections_per_client;
  for (auto [name, value] : {std::pair{"--header-timeout", o.header_timeout_s},
                             {"--body-timeout", o.body_timeout_s},
                             {"--keep-alive-timeout", o.keep_alive_timeout_s},
                             {"--write-timeout", o.write_timeout_s},
                             {"--stalled-client-timeout", o.stalled_client_timeout_s}})
    if (!(value > 0)) fail("{} must be more than 0 seconds, got {}", name, value);
  if (o.request_timeout_s < 0) fail("--request-timeout must be 0 (none) or more, got {}", o.request_timeout_s);
  if (o.default_max_tokens < 0) fail("--default-max-tokens must be 0 (none) or more, got {}", o.default_max_tokens);
  s.header_timeout_s = o.header_timeout_s;
  s.body_timeout_s = o.body_timeout_s;
  s.keep_alive_timeout_s = o.keep_alive_timeout_s;
  s.write_timeout_s = o.write_timeout_s;
  s.generation.request_timeout_s = o.request_timeout_s;
  s.generation.default_max_tokens = o.default_max_tokens;
  s.generation.max_unsent_bytes = static_cast<size_t>(engine::parse_byte_size(o.max_unsent));
  s.generation.stalled_client_timeout_s = o.stalled_client_timeout_s;
  const std::optional<engine::Pooling> pooling = engine::parse_pooling(o.pooling);
  if (!pooling) fail("--pooling must be 'mean' or 'last', got '{}'", o.pooling);
  s.generation.embedding_pooling = *pooling;
  s.log_requests = !o.quiet;
  s.max_waiting = o.engine.max_waiting;
  for (const std::string& spec : o.loras) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      fail("--lora takes NAME=FILE (the name requests use as 'model'), got '{}'", spec);
    s.loras.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
  }
  if (o.max_loras < 1) fail("--max-loras must be at least 1, got {}", o.max_loras);
  if (static_cast<int>(s.loras.size()) > o.max_loras)
    fail("{} --lora adapters are more than --max-loras ({})", s.loras.size(), o.max_loras);
  s.max_loras = o.max_loras;
  s.allow_runtime_lora = o.allow_runtime_lora;
  return s;
}

// Every connection is a descriptor, and the usual soft limit (1024) is
// below --max-connections: raise it towards the hard limit, and say so if
// the hard limit is lower than what the flags ask for.
void raise_descriptor_limit(int max_connections) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t want = static_cast<rlim_t>(max_connections) + 256;  // models, logs, workers' pipes
  if (lim.rlim_cur >= want) return;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
  setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < want)
    std::fprintf(stderr,
                 "{\"event\":\"warning\",\"message\":\"the descriptor limit (%llu) is below --max-connections + "
                 "256; connections beyond it are refused\"}\n",
                 static_cast<unsigned long long>(lim.rlim_cur));
}

void log_event(const std::string& json_line) {
  std::fputs(json_line.c_str(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

// What an operator should know about the model before pointing chat
// clients at it: a base model, a chat template that is not the model's own
// (server/model_profile.h). One JSON line each, as every start-up event.
void log_model_notices(const server::ModelProfile& profile) {
  for (const std::string& message : server::model_notices(profile))
    log_event(nlohmann::json{{"event", "notice"}, {"message", message}}.dump());
}

// What the server runs with, as the "ready" log event and the web console's
// dashboard show it.
nlohmann::json server_info(const ServeOptions& o, const engine::EngineConfig& config, const engine::Engine& engine,
                           const server::ServingContext& ctx) {
  nlohmann::json weights = nlohmann::json::array();
  for (const gguf::TypeShare& t : gguf::weight_type_shares(engine.model_file().tensors()))
    weights.push_back({{"type", t.type}, {"bytes", t.bytes}, {"share", t.share}});
  const engine::SloTargets& slo = config.slo;
  return {{"model", ctx.model_names[0]},
          {"served_names", ctx.model_names},
          {"model_file", std::filesystem::path(o.model_path).filename().string()},
          {"architecture", engine.model_config().arch_name},
          {"weights", weights},
          {"weights_runtime", runtime_name(engine.matmul_hook())},
          {"isa", std::string(kernels::isa_name(kernels::active_kernels().isa))},
          {"threads", engine.num_threads()},
          {"kv_dtype", std::string(kv::kv_dtype_name(config.kv_dtype))},
          {"kv_bytes_per_token", engine.kv_bytes_per_token()},
          {"kv_blocks", engine.num_kv_blocks()},
          {"kv_window_blocks", engine.num_window_kv_blocks()},
          {"kv_block_size", config.block_size},
          {"kv_bytes", engine.kv_bytes()},
          {"kv_policy", config.kv_policy.describe()},
          {"max_model_len", engine.limits().max_model_len()},
          {"max_seqs", config.max_seqs},
          {"max_batch_tokens", config.max_batch_tokens},
          {"max_waiting", config.max_waiting},
          {"prefix_cache", config.prefix_cache},
          {"speculative", std::string(spec::spec_method_name(config.spec.method))},
          {"slo", {{"ttft_ms", slo.ttft_ms}, {"tpot_ms", slo.tpot_ms}, {"e2e_p99_ms", slo.e2e_ms}}},
          {"request_timeout_s", o.request_timeout_s},
          {"default_max_tokens", o.default_max_tokens},
          {"api_keys",
           !o.api_keys.empty() || !o.trusted_api_keys.empty() || !o.admin_api_keys.empty() || !o.api_key_file.empty()},
          {"chat_template", ctx.chat ? ctx.chat->name() : "none"},
          {"chat_template_source", ctx.chat ? ctx.chat->source : ""},
          {"base_model", ctx.model_profile.base_model},
          {"tp", o.engine.parallel.tp},
          {"pp", o.engine.parallel.pp},
          {"ep", o.engine.parallel.ep}};
}

void serve(const ServeOptions& o) {
  engine::EngineConfig config = engine_config(o.model_path, o.engine);
  // Under mpirun: ranks other than 0 serve their shard of the model only.
  const std::shared_ptr<dist::MpiRuntime> parallel = start_parallel(o.engine.parallel);
  if (run_if_worker(parallel, config)) return;
  warn_about_rope(o.model_path, config.rope);
  const sigset_t signals = block_stop_signals();
  raise_descriptor_limit(o.max_connections);
  server::HttpServer http(server_options(o));
  const std::shared_ptr<console::Console> console = o.console ? console::Console::install(http) : nullptr;
  const int port = http.bind();
  http.start();
  log_event(fmt::format(R"({{"event":"listening","url":"http://{}:{}","state":"loading"}})", o.host, port));
  engine::Engine engine(config);
  http.attach_engine(engine, o.model_path);
  const server::ServingContext& ctx = http.context();
  log_model_notices(ctx.model_profile);
  for (const server::LoraEntry& a : ctx.loras->list())
    log_event(nlohmann::json{{"event", "lora_loaded"},
                             {"name", a.name},
                             {"path", a.path},
                             {"rank", a.adapter->max_rank()},
                             {"adapted_matrices", a.adapter->num_adapted()},
                             {"bytes", a.adapter->tensor_bytes()}}
                  .dump());
  nlohmann::json info = server_info(o, config, engine, ctx);
  if (console) console->set_server_info(info);
  info["event"] = "ready";
  info["pid"] = static_cast<int64_t>(getpid());
  log_event(info.dump());
  if (console)
    log_event(nlohmann::json{{"event", "console"}, {"url", fmt::format("http://{}:{}/", o.host, port)}}.dump());
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

// The flags that bound what one request or client may take: sizes,
// connections, timeouts, unsent output.
void add_limit_flags(CLI::App* cmd, ServeOptions* o) {
  cmd->add_option("--max-body-bytes", o->max_body, "Largest request body, e.g. 8M (413 beyond)")->capture_default_str();
  cmd->add_option("--max-header-bytes", o->max_header, "Largest request head (431 beyond)")->capture_default_str();
  cmd->add_option("--max-request-parse-bytes", o->max_request_parse,
                  "Memory one request body's parsed JSON may take (413 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-parse-bytes", o->max_parse,
                  "Memory all request bodies being parsed at once may take (503 + Retry-After beyond)")
      ->capture_default_str();
  cmd->add_option("--max-connections", o->max_connections, "Open connections at most (503 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-connections-per-client", o->max_connections_per_client,
                  "Open connections from one address at most (503 beyond)")
      ->capture_default_str();
  cmd->add_option("--header-timeout", o->header_timeout_s, "Seconds for a whole request head (408 beyond)")
      ->capture_default_str();
  cmd->add_option("--body-timeout", o->body_timeout_s, "Seconds for a whole request body (408 beyond)")
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout", o->keep_alive_timeout_s, "Seconds an idle connection stays open")
      ->capture_default_str();
  cmd->add_option("--write-timeout", o->write_timeout_s, "Seconds queued output may wait for the client")
      ->capture_default_str();
  cmd->add_option("--request-timeout", o->request_timeout_s,
                  "Deadline of a request without 'timeout', seconds; 0 = none")
      ->capture_default_str();
  cmd->add_option("--default-max-tokens", o->default_max_tokens,
                  "max_tokens of a chat request that sets none; 0 = the rest of the context")
      ->capture_default_str();
  cmd->add_option("--max-unsent-bytes", o->max_unsent,
                  "Pause a stream whose client has not taken this much output; 0 = never")
      ->capture_default_str();
  cmd->add_option("--stalled-client-timeout", o->stalled_client_timeout_s,
                  "Seconds a paused stream waits for its client before it is cancelled")
      ->capture_default_str();
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
  cmd->add_option("--api-key", o->api_keys,
                  "Require 'Authorization: Bearer KEY'; KEY:TENANT names the key's tenant (repeatable)");
  cmd->add_option("--trusted-api-key", o->trusted_api_keys,
                  "A key that may choose the tenant with X-Tenant (a gateway); KEY or KEY:TENANT (repeatable)");
  cmd->add_option("--admin-api-key", o->admin_api_keys,
                  "A key that sees every tenant's requests in flight (GET /slots); KEY or KEY:TENANT (repeatable)");
  cmd->add_option("--api-key-file", o->api_key_file, "Keys, one per line: KEY [TENANT] [trusted] [admin]")
      ->check(CLI::ExistingFile);
  cmd->add_option("--model-alias", o->aliases,
                  "Name clients use for the model (repeatable; the file stem always works)");
  const std::map<std::string, server::ReasoningFormat> reasoning_formats = {
      {"none", server::ReasoningFormat::kNone},
      {"deepseek", server::ReasoningFormat::kDeepSeek},
      {"auto", server::ReasoningFormat::kAuto}};
  cmd->add_option("--reasoning-format", o->reasoning_format,
                  "Think spans of reasoning models: auto (into reasoning_content when the chat template writes "
                  "<think>), deepseek (always), none (left in content)")
      ->transform(CLI::CheckedTransformer(reasoning_formats, CLI::ignore_case));
  cmd->add_option("--chat-template,--chat-template-file", o->chat_template,
                  "A Jinja chat template file, or a preset: gemma|llama2|llama3|chatml|mistral|phi3 "
                  "(default: the GGUF's own template)");
  add_limit_flags(cmd, o);
  cmd->add_option("--pooling", o->pooling,
                  "How embeddings pool the prompt's final hidden states: mean|last (then L2-normalised)")
      ->capture_default_str();
  cmd->add_option("--http-threads", o->http_threads, "Handler threads (each stream holds one while it runs)")
      ->capture_default_str();
  cmd->add_option("--shutdown-grace", o->shutdown_grace_s, "Seconds in-flight requests get on SIGTERM")
      ->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "No per-request log lines");
  cmd->add_option("--lora", o->loras, "A LoRA adapter (GGUF) requests pick with 'model': NAME; NAME=FILE (repeatable)");
  cmd->add_option("--max-loras", o->max_loras,
                  "LoRA adapters resident at once, unloaded ones still finishing requests included")
      ->capture_default_str();
  cmd->add_flag("--allow-runtime-lora", o->allow_runtime_lora,
                "Let clients load adapters by path and unload them (POST /v1/load_lora_adapter, "
                "/v1/unload_lora_adapter)");
  cmd->add_flag("--console,!--no-console", o->console,
                "Serve the web console (chat and live dashboard) at / (default on; --no-console: API only)");
  add_engine_flags(*cmd, o->engine, EngineFlagSet::kServe);
  cmd->callback([opts] { serve(*opts); });
}

}  // namespace tokenmill::cli
