#include "console/console_assets.h"

#include <fmt/format.h>

#include <vector>
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

namespace {

// Every servable file with its type and ETag, made once: the bytes never
// change while the binary runs, so neither does their hash.
const std::vector<Asset>& servable_assets() {
  static const std::vector<Asset> assets = [] {
    std::vector<Asset> out;
    for (const EmbeddedFile& f : embedded_files()) {
      const std::string_view type = content_type_for(f.name);
      if (type.empty()) continue;
      out.push_back(
          Asset{f.name, type, f.bytes, fmt::format("\"{:016x}\"", XXH3_64bits(f.bytes.data(), f.bytes.size()))});
    }
    return out;
  }();
  return assets;
}

}  // namespace

std::optional<Asset> find_asset(std::string_view name) {
  for (const Asset& a : servable_assets())
    if (a.name == name) return a;
  return std::nullopt;
}

}  // namespace tokenmill::console
