#include "router/router_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <vector>

#include "router/balancer.h"

namespace tokenmill::router {
namespace {

// Starts a non-blocking connect to 127.0.0.1:port; -1 when no socket.
int start_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  return fd;
}

// How many of the connects finished their handshake within `wait_ms` (all
// waited on together): each is then in the listener's accept queue.
int handshakes_done(const std::vector<int>& fds, int wait_ms) {
  int done = 0;
  for (int waited = 0; done < static_cast<int>(fds.size()) && waited < wait_ms; waited += 50) {
    ::usleep(50 * 1000);
    done = 0;
    for (int fd : fds) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      if (fd >= 0 && ::poll(&p, 1, 0) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
        ++done;
    }
  }
  return done;
}

// A burst of new connections must queue while every worker is busy: with
// cpp-httplib's backlog of 5 the kernel dropped the SYNs beyond the sixth,
// and a client on a loaded machine saw a connection error.
TEST(RouterServer, ListenerQueuesABurstOfConnectionsBeforeAccepting) {
  Balancer balancer({parse_replica_url("http://127.0.0.1:9")}, {});
  Proxy proxy(balancer, {});
  RouterServerOptions options;
  options.port = 0;
  RouterServer server(options, proxy);
  const int port = server.bind();  // bound and listening, not accepting yet

  constexpr int kBurst = 64;
  std::vector<int> fds;
  for (int i = 0; i < kBurst; ++i) fds.push_back(start_connect(port));
  EXPECT_EQ(handshakes_done(fds, 2000), kBurst);
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
}

}  // namespace
}  // namespace tokenmill::router
