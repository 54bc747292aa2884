// `route --spawn N -- <serve args>`: starts N `tokenmill serve` children of
// this very binary (/proc/self/exe) on consecutive free ports, and stops
// them when the router ends.
//
// Each child gets the serve args plus "--host H --port P"; it inherits the
// router's stderr (its JSON log lines), and is asked to die with the
// router (PR_SET_PDEATHSIG) so that a router killed with SIGKILL leaves no
// orphans. The death signal follows the thread that forked, so spawn from
// the thread that lives as long as the router (the main thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace tokenmill::router {

struct SpawnOptions {
  int count = 0;
  std::string host = "127.0.0.1";
  int first_port = 0;  // ports are tried upwards from here; busy ones are skipped
  int avoid_port = 0;  // the router's own (bound only after the replicas are up)
  std::vector<std::string> serve_args;
  std::string binary = "/proc/self/exe";
};

// The first `count` ports at or above `first`, other than `avoid`, that can
// be bound on `host` now (first 0: `count` distinct ports the kernel
// picks). Throws Error when the range runs out.
std::vector<int> find_free_ports(const std::string& host, int first, int count, int avoid = 0);
// Whether `host`:`port` can be bound now.
bool port_is_free(const std::string& host, int port);

class Spawner {
 public:
  // Starts the children at once. Throws Error when the serve args hold
  // --port or --host (the spawner chooses them), or fork/exec fails.
  explicit Spawner(SpawnOptions options);
  // Stops every child still running (SIGTERM, then SIGKILL after 15 s).
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // "http://host:port" of each child, in spawn order.
  const std::vector<std::string>& urls() const { return urls_; }

  // Waits until every child answers GET /health with 200, up to `timeout`,
  // calling `keep_waiting` between checks (false: give up). Throws Error
  // naming the child when one exits or the time runs out.
  void wait_ready(std::chrono::seconds timeout, const std::function<bool()>& keep_waiting);

  // A child that has exited since the last call: its URL and how it ended
  // (reaps it). Empty when none.
  std::vector<std::string> reap_exited();

  // SIGTERM to every child, then waits up to `grace` for each; SIGKILL for
  // those still running.
  void stop_all(std::chrono::seconds grace);

 private:
  pid_t spawn_one(int port);

  SpawnOptions options_;
  std::vector<std::string> urls_;
  std::vector<int> ports_;
  std::vector<pid_t> pids_;  // 0 once reaped
};

}  // namespace tokenmill::router
