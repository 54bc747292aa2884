#include "router/replica_address.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace tokenmill::router {
namespace {

TEST(ReplicaAddress, Parses) {
  ReplicaAddress a = parse_replica_url("http://127.0.0.1:8081");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 8081);
  EXPECT_EQ(a.url, "http://127.0.0.1:8081");
  EXPECT_EQ(parse_replica_url("http://127.0.0.1:8081/").url, "http://127.0.0.1:8081");
  EXPECT_EQ(parse_replica_url("http://127.0.0.1:8081/v1").url, "http://127.0.0.1:8081");
  a = parse_replica_url("http://localhost");
  EXPECT_EQ(a.port, 80);
  a = parse_replica_url("http://[::1]:9000");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 9000);
  EXPECT_EQ(a.url, "http://[::1]:9000");
}

TEST(ReplicaAddress, RejectsBadUrls) {
  for (const char* bad : {"127.0.0.1:8081", "https://h:1", "http://", "http://:80", "http://h:0", "http://h:99999",
                          "http://h:12x", "http://h:1/api", "http://[::1:80"}) {
    EXPECT_THROW(parse_replica_url(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace tokenmill::router
