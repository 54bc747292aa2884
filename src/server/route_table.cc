#include "server/route_table.h"

namespace tokenmill::server {

void RouteTable::add(const char* method, const char* pattern, bool authed, Handler fn) {
  routes_.push_back(Route{method, std::regex(pattern), authed, std::move(fn)});
}

const RouteTable::Route* RouteTable::find(HttpRequest& req, std::vector<std::string>& allowed) const {
  std::smatch m;
  for (const Route& rt : routes_) {
    if (!std::regex_match(req.path, m, rt.pattern)) continue;
    if (rt.method != req.method) {
      allowed.push_back(rt.method);
      continue;
    }
    req.matches.assign(m.begin(), m.end());
    return &rt;
  }
  return nullptr;
}

}  // namespace tokenmill::server
