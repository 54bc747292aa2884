#include "router/replica_address.h"

#include <charconv>

#include "util/error.h"

namespace tokenmill::router {
namespace {

int parse_port(const std::string& url, std::string_view text) {
  int port = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535)
    fail("replica url '{}': port '{}' is not a number in [1, 65535]", url, text);
  return port;
}

}  // namespace

ReplicaAddress parse_replica_url(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0)
    fail("replica url '{}': use http://host:port (replicas are spoken to in plain HTTP)", url);
  std::string_view rest = std::string_view(url).substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  rest = rest.substr(0, slash);
  if (path != "" && path != "/" && path != "/v1" && path != "/v1/")
    fail("replica url '{}': unexpected path '{}' (give the server's root, e.g. http://127.0.0.1:8081)", url, path);
  ReplicaAddress a;
  std::string_view port_text = "80";
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) fail("replica url '{}': unclosed '[' in the host", url);
    a.host = std::string(rest.substr(1, close - 1));
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') fail("replica url '{}': expected ':port' after ']'", url);
      port_text = after.substr(1);
    }
  } else {
    const size_t colon = rest.find(':');
    a.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (a.host.empty()) fail("replica url '{}': no host", url);
  a.port = parse_port(url, port_text);
  const bool v6 = a.host.find(':') != std::string::npos;
  a.url = fmt::format("http://{}{}{}:{}", v6 ? "[" : "", a.host, v6 ? "]" : "", a.port);
  return a;
}

}  // namespace tokenmill::router
