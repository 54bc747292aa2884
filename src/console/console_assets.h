// The web console's static files, compiled into the binary (CMakeLists.txt
// generates embedded_files() from assets/). Served by console_routes.cc.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tokenmill::console {

struct EmbeddedFile {
  std::string_view name;   // file name in assets/, e.g. "chat.js"
  std::string_view bytes;  // the file as it is
};

// Every file of assets/, sorted by name (the generated source).
std::span<const EmbeddedFile> embedded_files();

struct Asset {
  std::string_view name;
  std::string_view content_type;
  std::string_view bytes;
  std::string etag;  // a strong validator: a hash of the bytes, quoted
};

// The MIME type served for a file name by its extension; "" for an
// extension the console does not serve.
std::string_view content_type_for(std::string_view name);

// The embedded file of that name with its type and ETag; nullopt when there
// is none or its type is not served.
std::optional<Asset> find_asset(std::string_view name);

}  // namespace tokenmill::console
