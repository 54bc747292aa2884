#include "server/admin/api_keys.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "server/api_error.h"
#include "util/error.h"

namespace tokenmill::server {
namespace {

TEST(ApiKeys, ParsesKeyAndTenant) {
  const ApiKey k = parse_api_key("sk-abc:alice");
  EXPECT_EQ(k.key, "sk-abc");
  EXPECT_EQ(k.tenant, "alice");
  EXPECT_FALSE(k.trusted);
  EXPECT_TRUE(parse_api_key("g:gw", true).trusted);
  EXPECT_TRUE(parse_api_key("o:ops", false, true).admin);
  EXPECT_FALSE(parse_api_key("o:ops", false, true).trusted);
}

TEST(ApiKeys, KeyWithoutTenantGetsAHashedTenantThatHidesTheKey) {
  const ApiKey k = parse_api_key("secret-key");
  EXPECT_EQ(k.tenant.rfind("key-", 0), 0u);
  EXPECT_EQ(k.tenant.size(), 16u);
  EXPECT_EQ(k.tenant.find("secret"), std::string::npos);
  EXPECT_EQ(k.tenant, tenant_for_key("secret-key"));
  EXPECT_NE(k.tenant, tenant_for_key("secret-kez"));
}

TEST(ApiKeys, RefusesEmptyKeysAndBadTenants) {
  EXPECT_THROW(parse_api_key(""), Error);
  EXPECT_THROW(parse_api_key(":alice"), Error);
  EXPECT_THROW(parse_api_key("k:"), Error);
  EXPECT_THROW(parse_api_key("k:a\tb"), Error);
}

TEST(ApiKeys, ReadsAKeyFile) {
  const std::string path = testing::TempDir() + "keys.txt";
  {
    std::ofstream f(path);
    f << "# keys\n\nk1 alice\nk2\ngw gateway trusted  # the proxy\n";
  }
  const std::vector<ApiKey> keys = load_api_key_file(path);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].tenant, "alice");
  EXPECT_EQ(keys[1].tenant, tenant_for_key("k2"));
  EXPECT_TRUE(keys[2].trusted);
  EXPECT_FALSE(keys[0].admin || keys[1].admin || keys[2].admin);
  {
    std::ofstream f(path);
    f << "op ops admin\ngw gateway admin trusted\n";
  }
  const std::vector<ApiKey> marked = load_api_key_file(path);
  ASSERT_EQ(marked.size(), 2u);
  EXPECT_TRUE(marked[0].admin && !marked[0].trusted);
  EXPECT_TRUE(marked[1].admin && marked[1].trusted);
  for (const char* bad : {"k1 alice root\n", "k1 alice admin admin\n", "k1 alice trusted admin x\n"}) {
    {
      std::ofstream f(path);
      f << bad;
    }
    try {
      load_api_key_file(path);
      ADD_FAILURE() << "a bad mark must be refused: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(":1:"), std::string::npos) << e.what();
    }
  }
  std::remove(path.c_str());
}

TEST(ApiKeys, FindsOnlyExactBearerKeys) {
  const ApiKeyTable table({parse_api_key("k1:alice"), parse_api_key("k22:bob")});
  ASSERT_NE(table.find("Bearer k1"), nullptr);
  EXPECT_EQ(table.find("Bearer k1")->tenant, "alice");
  EXPECT_EQ(table.find("Bearer k22")->tenant, "bob");
  EXPECT_EQ(table.find("Bearer k2"), nullptr);
  EXPECT_EQ(table.find("Bearer k11"), nullptr);
  EXPECT_EQ(table.find("k1"), nullptr);
  EXPECT_EQ(table.find(""), nullptr);
  EXPECT_THROW(ApiKeyTable({parse_api_key("k:a"), parse_api_key("k:b")}), Error);
}

TEST(ApiKeys, TenantComesFromTheKeyUnlessTrusted) {
  const ApiKey alice = parse_api_key("k1:alice");
  const ApiKey gw = parse_api_key("g:gateway", true);
  EXPECT_EQ(resolve_tenant(&alice, true, ""), "alice");
  EXPECT_EQ(resolve_tenant(&alice, true, "alice"), "alice");
  try {
    resolve_tenant(&alice, true, "bob");
    FAIL() << "an untrusted key may not name another tenant";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 403);
  }
  EXPECT_EQ(resolve_tenant(&gw, true, "bob"), "bob");
  EXPECT_EQ(resolve_tenant(&gw, true, ""), "gateway");
  EXPECT_EQ(resolve_tenant(nullptr, false, "carol"), "carol");  // no keys: taken as sent
  EXPECT_EQ(resolve_tenant(nullptr, false, ""), "");
  EXPECT_THROW(resolve_tenant(nullptr, false, std::string(300, 'x')), ApiError);
}

}  // namespace
}  // namespace tokenmill::server
