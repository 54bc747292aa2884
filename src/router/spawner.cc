#include "router/spawner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <thread>

#include <httplib.h>

#include "router/event_log.h"
#include "util/error.h"

namespace tokenmill::router {
namespace {

// Binds `host`:`port` (0: a port the kernel picks); returns the socket and
// the bound port, or -1 when it cannot bind. The caller closes the socket.
std::pair<int, int> try_bind(const std::string& host, int port) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else {
    fail("--host '{}': the spawner needs a numeric address (e.g. 127.0.0.1)", host);
  }
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {-1, 0};
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));  // as the server binds
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return {-1, 0};
  }
  return {fd, ntohs(addr.ss_family == AF_INET ? v4->sin_port : v6->sin6_port)};
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "ended";
}

bool answers_health(const std::string& host, int port) {
  httplib::Client client(host, port);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(2, 0);
  const httplib::Result r = client.Get("/health");
  return r && r->status == 200;
}

}  // namespace

bool port_is_free(const std::string& host, int port) {
  const auto [fd, bound] = try_bind(host, port);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

std::vector<int> find_free_ports(const std::string& host, int first, int count, int avoid) {
  std::vector<int> ports;
  if (first == 0) {  // the kernel's choice; the sockets stay open until all are found, so they differ
    std::vector<int> fds;
    for (int i = 0; i < count; ++i) {
      const auto [fd, port] = try_bind(host, 0);
      if (fd < 0) break;
      fds.push_back(fd);
      ports.push_back(port);
    }
    for (const int fd : fds) close(fd);
  }
  for (int p = first; first > 0 && p <= 65535 && static_cast<int>(ports.size()) < count; ++p) {
    if (p == avoid) continue;
    const auto [fd, port] = try_bind(host, p);
    if (fd < 0) continue;
    close(fd);
    ports.push_back(port);
  }
  if (static_cast<int>(ports.size()) < count)
    fail("--spawn-port {}: only {} free ports from there up, {} needed", first, ports.size(), count);
  return ports;
}

Spawner::Spawner(SpawnOptions options) : options_(std::move(options)) {
  for (const std::string& a : options_.serve_args) {
    if (a == "--port" || a == "--host" || a.rfind("--port=", 0) == 0 || a.rfind("--host=", 0) == 0)
      fail(
          "serve args after '--' must not set {}: the router picks each replica's address (use --host and "
          "--spawn-port of `route`)",
          a.substr(0, a.find('=')));
  }
  for (const int port : find_free_ports(options_.host, options_.first_port, options_.count, options_.avoid_port)) {
    pids_.push_back(spawn_one(port));
    ports_.push_back(port);
    urls_.push_back(fmt::format("http://{}:{}", options_.host, port));
    log_event({{"event", "replica_spawned"}, {"url", urls_.back()}, {"pid", pids_.back()}});
  }
}

Spawner::~Spawner() { stop_all(std::chrono::seconds(15)); }

pid_t Spawner::spawn_one(int port) {
  // Everything the child needs is built before fork(): after it, a child
  // of a threaded process may only make async-signal-safe calls.
  std::vector<std::string> args = {options_.binary, "serve"};
  args.insert(args.end(), options_.serve_args.begin(), options_.serve_args.end());
  args.insert(args.end(), {"--host", options_.host, "--port", std::to_string(port)});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) fail("cannot start a replica: fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // the router died before prctl took effect
    setpgid(0, 0);                      // a terminal's Ctrl-C reaches the router only; it stops the children in order
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the router blocks SIGINT/SIGTERM; exec keeps masks
    signal(SIGPIPE, SIG_DFL);
    // The router's sockets (its listener among them) must not live on in
    // the child: httplib does not open them close-on-exec.
    if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
      for (int fd = 3; fd < 4096; ++fd) close(fd);
    execv(argv[0], argv.data());
    const char msg[] = "tokenmill route: cannot exec the replica binary\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(127);
  }
  return pid;
}

void Spawner::wait_ready(std::chrono::seconds timeout, const std::function<bool()>& keep_waiting) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<char> ready(pids_.size(), 0);
  for (size_t done = 0; done < pids_.size();) {
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (ready[i]) continue;
      int status = 0;
      if (pids_[i] > 0 && waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
        pids_[i] = 0;
        fail("replica {} {} before it became ready (its log is above)", urls_[i], describe_exit(status));
      }
      if (answers_health(options_.host, ports_[i])) {
        ready[i] = 1;
        ++done;
      }
    }
    if (done == pids_.size()) break;
    if (!keep_waiting()) fail("interrupted while the replicas were loading");
    if (std::chrono::steady_clock::now() > deadline)
      fail("the replicas did not become ready within {} s (see --spawn-timeout)", timeout.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<std::string> Spawner::reap_exited() {
  std::vector<std::string> out;
  for (size_t i = 0; i < pids_.size(); ++i) {
    int status = 0;
    if (pids_[i] > 0 && waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
      pids_[i] = 0;
      out.push_back(urls_[i] + " " + describe_exit(status));
    }
  }
  return out;
}

void Spawner::stop_all(std::chrono::seconds grace) {
  for (const pid_t pid : pids_)
    if (pid > 0) kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (pid_t& pid : pids_) {
    if (pid <= 0) continue;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = 0;
  }
}

}  // namespace tokenmill::router
