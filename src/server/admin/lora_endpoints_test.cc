#include "server/admin/lora_endpoints.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace tokenmill::server {
namespace {

// The param of the 400 `fn` throws ("" when it throws none).
template <typename Fn>
std::string bad_param(Fn fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e.param().value_or("(none)");
  }
  return "";
}

TEST(LoraEndpoints, LoadBody) {
  const LoraLoadRequest r = parse_load_lora_request(R"({"lora_name": "sql", "lora_path": "/m/sql.gguf"})");
  EXPECT_EQ(r.name, "sql");
  EXPECT_EQ(r.path, "/m/sql.gguf");
  EXPECT_EQ(parse_load_lora_request(R"({"lora_name": "a", "lora_path": "p", "load_inplace": false})").name, "a");
  EXPECT_EQ(bad_param([] { parse_load_lora_request(R"({"lora_path": "p"})"); }), "lora_name");
  EXPECT_EQ(bad_param([] { parse_load_lora_request(R"({"lora_name": "a"})"); }), "lora_path");
  EXPECT_EQ(bad_param([] { parse_load_lora_request(R"({"lora_name": 1, "lora_path": "p"})"); }), "lora_name");
  EXPECT_EQ(bad_param([] { parse_load_lora_request(R"({"lora_name": "a", "lora_path": "p", "load_inplace": true})"); }),
            "load_inplace");
  EXPECT_EQ(bad_param([] { parse_load_lora_request(R"({"lora_name": "a", "lora_pth": "p"})"); }), "lora_pth");
  EXPECT_EQ(bad_param([] { parse_load_lora_request(R"(["lora_name"])"); }), "(none)");
}

TEST(LoraEndpoints, UnloadBody) {
  EXPECT_EQ(parse_unload_lora_request(R"({"lora_name": "sql"})"), "sql");
  EXPECT_EQ(parse_unload_lora_request(R"({"lora_name": "sql", "lora_int_id": 3})"), "sql");
  EXPECT_EQ(bad_param([] { parse_unload_lora_request(R"({})"); }), "lora_name");
  EXPECT_EQ(bad_param([] { parse_unload_lora_request(R"({"lora_name": "a", "lora_path": "p"})"); }), "lora_path");
}

}  // namespace
}  // namespace tokenmill::server
