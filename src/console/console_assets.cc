#include "console/console_assets.h"

#include <fmt/format.h>
#define XXH_INLINE_ALL  // header-only, as the rest of the project uses it
#include <xxhash.h>

namespace tokenmill::console {

std::string_view content_type_for(std::string_view name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".svg")) return "image/svg+xml";
  if (ends_with(".png")) return "image/png";
  return "";
}

std::optional<Asset> find_asset(std::string_view name) {
  for (const EmbeddedFile& f : embedded_files()) {
    if (f.name != name) continue;
    const std::string_view type = content_type_for(name);
    if (type.empty()) return std::nullopt;
    return Asset{f.name, type, f.bytes, fmt::format("\"{:016x}\"", XXH3_64bits(f.bytes.data(), f.bytes.size()))};
  }
  return std::nullopt;
}

}  // namespace tokenmill::console
