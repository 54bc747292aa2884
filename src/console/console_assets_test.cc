#include "console/console_assets.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace tokenmill::console {
namespace {

std::set<std::string> names() {
  std::set<std::string> out;
  for (const EmbeddedFile& f : embedded_files()) out.insert(std::string(f.name));
  return out;
}

TEST(ConsoleAssets, EveryFileIsEmbeddedWhole) {
  const std::set<std::string> all = names();
  for (const char* expected : {"index.html", "app.css", "main.js", "api.js", "chat.js", "dashboard.js", "reports.js",
                               "charts.js", "histogram.js", "format.js"})
    EXPECT_TRUE(all.count(expected)) << expected;
  const std::optional<Asset> page = find_asset("index.html");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(page->bytes.substr(0, 15), "<!doctype html>");
  EXPECT_NE(page->bytes.find("</html>"), std::string_view::npos);  // not cut short
}

// A page that loads a file the binary lacks would break only in a browser:
// every local reference of the page and every module import must resolve.
TEST(ConsoleAssets, EveryReferenceResolvesToAnEmbeddedFile) {
  const std::set<std::string> all = names();
  const std::regex page_ref(R"((?:src|href)="/console/([^"]+)\")");
  const std::regex import_ref(R"(from "\./([^"]+)\")");
  int refs = 0;
  for (const EmbeddedFile& f : embedded_files()) {
    const std::string text(f.bytes);
    for (const std::regex* re : {&page_ref, &import_ref})
      for (auto it = std::sregex_iterator(text.begin(), text.end(), *re); it != std::sregex_iterator(); ++it) {
        ++refs;
        EXPECT_TRUE(all.count((*it)[1].str())) << f.name << " refers to missing " << (*it)[1].str();
      }
  }
  EXPECT_GE(refs, 8);
}

// The page must work without a network: no absolute URL to another host.
TEST(ConsoleAssets, NothingIsLoadedFromAnotherHost) {
  const std::regex remote(R"((?:src|href)\s*=\s*["']?(?:https?:)?//|import\s*\(?\s*["']https?:|url\(\s*["']?https?:)");
  for (const EmbeddedFile& f : embedded_files())
    EXPECT_FALSE(std::regex_search(std::string(f.bytes), remote)) << f.name;
}

TEST(ConsoleAssets, TypesAndValidators) {
  EXPECT_EQ(content_type_for("chat.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(content_type_for("app.css"), "text/css; charset=utf-8");
  EXPECT_EQ(content_type_for("shot.png"), "image/png");
  EXPECT_EQ(content_type_for("secrets.txt"), "");
  EXPECT_EQ(content_type_for(".js"), "");
  EXPECT_FALSE(find_asset("nope.js"));
  EXPECT_FALSE(find_asset("../index.html"));
  const std::optional<Asset> a = find_asset("chat.js"), b = find_asset("chat.js"), c = find_asset("api.js");
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->etag, b->etag);
  EXPECT_NE(a->etag, c->etag);
  EXPECT_EQ(a->etag.front(), '"');
  EXPECT_EQ(a->etag.back(), '"');
}

}  // namespace
}  // namespace tokenmill::console
