// The request a handler reads and the response it fills, independent of
// how the bytes travel (http_front.h parses and writes them). A response
// is either a whole body or a stream: a function that writes the body
// piece by piece to a ResponseStream on the handler's thread, and can see
// how much of what it wrote the client has not taken yet (backpressure).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tokenmill::http {

// What a handler knows of its connection while it runs.
class ConnectionView {
 public:
  virtual ~ConnectionView() = default;
  // The client closed its side (or the connection failed): nobody is
  // waiting for the answer any more.
  virtual bool client_gone() const = 0;
};

struct HttpRequest {
  std::string method;
  std::string path;  // percent-decoded, without the query
  std::string query;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string remote_addr;
  std::vector<std::string> matches;  // the route's regex groups; [0] is the whole path
  std::string tenant;                // who the request's API key stands for (api_keys.h)
  // Whether views of requests in flight (GET /slots) may show other
  // tenants' requests: an admin key, or a server without keys (which
  // cannot tell clients apart).
  bool sees_all_tenants = true;
  std::shared_ptr<const ConnectionView> connection;  // null in tests that call handlers directly

  // The first header of that name (case-insensitive); "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  bool client_gone() const { return connection && connection->client_gone(); }
};

// Where a streamed body goes; writes are framed (chunked) by the front.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Queues bytes for the client. False once the connection is gone.
  virtual bool write(std::string_view data) = 0;
  // Bytes written but not yet taken by the client: queued in the server
  // and still in the kernel's send queue.
  virtual size_t unsent_bytes() const = 0;
  // Blocks until unsent_bytes() <= `bytes`, the connection is gone or
  // `timeout` passes. True when the bound holds.
  virtual bool wait_unsent_below(size_t bytes, std::chrono::milliseconds timeout) = 0;
  virtual bool client_gone() const = 0;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string content_type;
  // Set for a streamed response: writes the whole body; returning false
  // drops the connection (the client went away, or the stream failed).
  std::function<bool(ResponseStream&)> stream;

  void set_content(std::string data, std::string type) {
    body = std::move(data);
    content_type = std::move(type);
  }
  // Replaces a header of the same name (case-insensitive).
  void set_header(std::string name, std::string value);
  std::string header(std::string_view name) const;
  void set_stream(std::string type, std::function<bool(ResponseStream&)> writer) {
    content_type = std::move(type);
    stream = std::move(writer);
  }
};

bool iequals(std::string_view a, std::string_view b);

// The value of the first header named `name` (case-insensitive), or null.
const std::string* find_header(const std::vector<std::pair<std::string, std::string>>& headers, std::string_view name);

}  // namespace tokenmill::http
