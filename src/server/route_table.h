// The server's routes: method, a regex over the whole path, whether the API
// key is checked first, and the handler. Filled before the server starts
// (the API rooms add theirs: api_rooms.h), then only read, by every worker
// at once, without a lock.
#pragma once

#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "server/http_types.h"

namespace tokenmill::server {

class RouteTable {
 public:
  using Handler = std::function<void(HttpRequest&, HttpResponse&)>;

  // The pattern's groups reach the handler in HttpRequest::matches.
  void add(const char* method, const char* pattern, bool authed, Handler fn);

  struct Route {
    std::string method;
    std::regex pattern;
    bool authed = true;
    Handler fn;
  };
  // The route for the request's method and path (its groups stored in
  // req.matches), or null; then `allowed` lists the methods the path has
  // (empty: 404, else 405).
  const Route* find(HttpRequest& req, std::vector<std::string>& allowed) const;

 private:
  std::vector<Route> routes_;
};

}  // namespace tokenmill::server
