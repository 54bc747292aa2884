// Where a replica listens: "http://host:port" as the user wrote it on the
// command line, split for the HTTP client. The canonical URL is also the
// replica's name on the hash ring and in metrics labels, so that the same
// replica owns the same keys whatever order the flags came in.
#pragma once

#include <string>

namespace tokenmill::router {

struct ReplicaAddress {
  std::string host;  // without brackets for IPv6 ("::1")
  int port = 0;
  std::string url;  // canonical "http://host:port" (IPv6 in brackets)
};

// Parses "http://host[:port][/][/v1]" (port defaults to 80). Throws Error
// naming the URL for anything else: another scheme (https is not spoken to
// replicas), a missing host, a bad port, or another path.
ReplicaAddress parse_replica_url(const std::string& url);

}  // namespace tokenmill::router
