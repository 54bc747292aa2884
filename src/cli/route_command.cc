// `tokenmill route`: one OpenAI-compatible front for several `tokenmill
// serve` replicas (data parallelism). Requests are placed by a policy
// (affinity: consistent hashing of tenant + prompt head with bounded load,
// so shared prefixes stay warm in one replica's prefix cache; least-load;
// round-robin), streams pass through as they come, failed forwards are
// retried once elsewhere, and replicas are health-checked in and out of
// the ring. With --spawn N it also starts and stops the replicas itself.
// docs/router.md has the details; src/router/ the code.
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include <pthread.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "router/balancer.h"
#include "router/event_log.h"
#include "router/health_monitor.h"
#include "router/proxy.h"
#include "router/router_server.h"
#include "router/spawner.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

using router::log_event;

struct RouteOptions {
  std::vector<std::string> replicas;
  int spawn = 0;
  int spawn_port = -1;  // -1: --port + 1 (0 when --port is 0)
  double spawn_timeout_s = 300;
  std::vector<std::string> serve_args;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string policy = "affinity";
  int affinity_bytes = 256;
  double load_slack = 0.25;
  int vnodes = 160;
  int poll_ms = 500;
  double connect_timeout_s = 3;
  double read_timeout_s = 600;
  double stream_idle_timeout_s = 30;
  int http_threads = 256;
  double shutdown_grace_s = 10;
};

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

void validate(const RouteOptions& o) {
  if (o.replicas.empty() && o.spawn == 0)
    fail("no replicas: give --replica http://HOST:PORT (repeatable), or --spawn N -- <serve args>");
  if (!o.replicas.empty() && o.spawn > 0)
    fail("--replica and --spawn cannot be combined: route to running replicas, or spawn them all");
  if (o.spawn < 0 || o.spawn > 64) fail("--spawn must be in [1, 64], got {}", o.spawn);
  if (o.spawn > 0 && o.serve_args.empty())
    fail("--spawn {} needs the serve args after '--', e.g. `tokenmill route --spawn 2 -- -m model.gguf`", o.spawn);
  if (o.spawn == 0 && !o.serve_args.empty())
    fail("unexpected arguments '{}': serve args (after '--') go with --spawn", o.serve_args.front());
  if (o.affinity_bytes < 1) fail("--affinity-bytes must be at least 1, got {}", o.affinity_bytes);
  if (o.load_slack < 0) fail("--load-slack must be >= 0, got {}", o.load_slack);
  if (o.vnodes < 1 || o.vnodes > 4096) fail("--vnodes must be in [1, 4096], got {}", o.vnodes);
  if (o.poll_ms < 10) fail("--poll-ms must be at least 10, got {}", o.poll_ms);
  if (o.http_threads < 4 || o.http_threads > 4096) fail("--http-threads must be in [4, 4096], got {}", o.http_threads);
  for (const double t : {o.connect_timeout_s, o.read_timeout_s, o.stream_idle_timeout_s, o.spawn_timeout_s})
    if (!(t > 0)) fail("timeouts must be positive seconds, got {}", t);
}

// The replica addresses, checked: parsed and distinct.
std::vector<router::ReplicaAddress> parse_replicas(const std::vector<std::string>& urls) {
  std::vector<router::ReplicaAddress> out;
  for (const std::string& u : urls) {
    router::ReplicaAddress a = router::parse_replica_url(u);
    for (const router::ReplicaAddress& b : out)
      if (b.url == a.url) fail("--replica {} is given twice", a.url);
    out.push_back(std::move(a));
  }
  return out;
}

// The stop signal if one is pending within `wait`, else 0.
int take_signal(const sigset_t& signals, std::chrono::milliseconds wait) {
  timespec ts{static_cast<time_t>(wait.count() / 1000), static_cast<long>((wait.count() % 1000) * 1000000)};
  const int sig = sigtimedwait(&signals, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

std::unique_ptr<router::Spawner> spawn_replicas(const RouteOptions& o, const sigset_t& signals) {
  router::SpawnOptions s;
  s.count = o.spawn;
  s.host = o.host;
  s.first_port = o.spawn_port >= 0 ? o.spawn_port : (o.port == 0 ? 0 : o.port + 1);
  s.serve_args = o.serve_args;
  s.avoid_port = o.port;
  // Fail on a busy --port before loading N models, not after.
  if (o.port != 0 && !router::port_is_free(o.host, o.port))
    fail("cannot listen on {}:{} (in use, or not a local address?)", o.host, o.port);
  auto spawner = std::make_unique<router::Spawner>(std::move(s));
  spawner->wait_ready(std::chrono::seconds(static_cast<int64_t>(o.spawn_timeout_s)),
                      [&] { return take_signal(signals, std::chrono::milliseconds(0)) == 0; });
  return spawner;
}

nlohmann::json replica_states(const router::Balancer& balancer) {
  nlohmann::json out = nlohmann::json::array();
  for (const router::ReplicaView& v : balancer.views()) out.push_back({{"url", v.url}, {"up", v.up}});
  return out;
}

// Sleeps until SIGINT/SIGTERM; meanwhile logs spawned replicas that exit
// (they stay in the ring as down; the health checks keep them out).
int wait_for_stop(const sigset_t& signals, router::Spawner* spawner) {
  while (true) {
    if (const int sig = take_signal(signals, std::chrono::milliseconds(1000))) return sig;
    if (!spawner) continue;
    for (const std::string& what : spawner->reap_exited()) log_event({{"event", "replica_exited"}, {"what", what}});
  }
}

void route(const RouteOptions& o) {
  validate(o);
  router::BalancerOptions b;
  b.policy = router::parse_policy(o.policy);
  b.load_slack = o.load_slack;
  b.vnodes = o.vnodes;
  if (!o.replicas.empty()) parse_replicas(o.replicas);  // bad URLs fail before anything starts
  const sigset_t signals = block_stop_signals();
  router::RouterServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.http_threads = o.http_threads;
  router::ProxyOptions po;
  po.affinity_bytes = static_cast<size_t>(o.affinity_bytes);
  po.connect_timeout = millis(o.connect_timeout_s);
  po.read_timeout = millis(o.read_timeout_s);
  po.stream_idle_timeout = millis(o.stream_idle_timeout_s);
  // The spawner is declared first so that it outlives (and stops after)
  // everything that talks to its children.
  std::unique_ptr<router::Spawner> spawner;
  if (o.spawn > 0) spawner = spawn_replicas(o, signals);
  router::Balancer balancer(parse_replicas(spawner ? spawner->urls() : o.replicas), b);
  router::HealthMonitor monitor(balancer, {std::chrono::milliseconds(o.poll_ms), std::chrono::milliseconds(2000)});
  monitor.poll_all_once();
  monitor.start();
  router::Proxy proxy(balancer, po);
  router::RouterServer server(so, proxy);
  const int port = server.bind();
  server.start();
  log_event({{"event", "listening"},
             {"url", fmt::format("http://{}:{}", o.host, port)},
             {"policy", router::policy_name(b.policy)},
             {"replicas", replica_states(balancer)}});
  const int sig = wait_for_stop(signals, spawner.get());
  log_event({{"event", "shutdown"}, {"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
  const bool drained = server.stop_and_drain(millis(o.shutdown_grace_s));
  server.join();
  monitor.stop();
  if (spawner) spawner->stop_all(std::chrono::seconds(15));
  log_event({{"event", "stopped"}, {"drained", drained}});
}

}  // namespace

void add_route_command(CLI::App& app) {
  auto opts = std::make_shared<RouteOptions>();
  RouteOptions* o = opts.get();
  CLI::App* cmd = app.add_subcommand(
      "route", "Route OpenAI requests over several serve replicas (prefix affinity, least-load, round-robin)");
  cmd->add_option("--replica", o->replicas, "A running replica, http://HOST:PORT (repeatable)");
  cmd->add_option("--spawn", o->spawn, "Start N `tokenmill serve` replicas with the args after '--'");
  cmd->add_option("--spawn-port", o->spawn_port, "First port tried for spawned replicas (default: --port + 1)");
  cmd->add_option("--spawn-timeout", o->spawn_timeout_s, "Seconds spawned replicas get to become ready")
      ->capture_default_str();
  cmd->add_option("serve_args", o->serve_args, "With --spawn: the serve args, after '--'");
  cmd->add_option("--host", o->host, "Address to bind (loopback by default)")->capture_default_str();
  cmd->add_option("--port", o->port, "Port; 0 picks a free one (logged)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--policy", o->policy, "affinity|least-load|round-robin")->capture_default_str();
  cmd->add_option("--affinity-bytes", o->affinity_bytes, "Prompt bytes hashed for affinity")->capture_default_str();
  cmd->add_option("--load-slack", o->load_slack, "Affinity yields when load > (1 + slack) x mean + 1")
      ->capture_default_str();
  cmd->add_option("--vnodes", o->vnodes, "Hash ring points per replica")->capture_default_str();
  cmd->add_option("--poll-ms", o->poll_ms, "Health and queue-depth poll interval")->capture_default_str();
  cmd->add_option("--connect-timeout", o->connect_timeout_s, "Seconds to connect to a replica")->capture_default_str();
  cmd->add_option("--read-timeout", o->read_timeout_s, "Seconds a whole (non-stream) answer may take")
      ->capture_default_str();
  cmd->add_option("--stream-idle-timeout", o->stream_idle_timeout_s, "Seconds a stream may stay silent")
      ->capture_default_str();
  cmd->add_option("--http-threads", o->http_threads, "HTTP worker threads = concurrent requests")
      ->capture_default_str();
  cmd->add_option("--shutdown-grace", o->shutdown_grace_s, "Seconds in-flight requests get on SIGTERM")
      ->capture_default_str();
  cmd->callback([opts] { route(*opts); });
}

}  // namespace tokenmill::cli
