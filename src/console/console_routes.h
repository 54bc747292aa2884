// The web console served by `tokenmill serve` (docs/console.md): GET /
// answers the page, GET /console/NAME its scripts and styles (embedded,
// console_assets.h), GET /console/api/status the dashboard's numbers
// (console_status.h) and POST /console/api/ticket the optimization ticket
// of two reports (console_ticket.h). The page and its files need no key
// (they hold nothing secret); the two API routes need one when the server
// has keys, as every model route does.
#pragma once

#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "server/http_server.h"

namespace tokenmill::console {

class Console {
 public:
  // Adds the console's routes to `http`; call before http.start(). The
  // routes keep the returned object alive as long as the server.
  static std::shared_ptr<Console> install(server::HttpServer& http);

  // The server's configuration shown on the dashboard (serve's "ready"
  // event: model, quantization, KV dtype, threads, ISA, limits). Until it is
  // set the status reports null: the model is still loading.
  void set_server_info(nlohmann::json info);
  nlohmann::json server_info() const;

 private:
  mutable std::mutex mutex_;
  nlohmann::json info_;
};

}  // namespace tokenmill::console
