// The HTTP layer before any model is loaded: routing, error bodies, API
// keys, the body limit and the "loading" state, through a real socket.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

namespace tokenmill::server {
namespace {

using nlohmann::json;

class LoadingServer : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    o.api_keys = {parse_api_key("secret")};
    o.model_names = {"m"};
    o.max_body_bytes = 1024;
    o.http_threads = 4;
    o.log_requests = false;
    server_ = std::make_unique<HttpServer>(o);
    port_ = server_->bind();
    server_->start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_bearer_token_auth("secret");
  }
  void TearDown() override {
    server_->stop_accepting_and_drain(std::chrono::milliseconds(100));
    server_.reset();
  }

  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
  int port_ = 0;
};

json error_of(const httplib::Result& r) { return json::parse(r->body).at("error"); }

TEST_F(LoadingServer, HealthSaysLoading) {
  const httplib::Result r = client_->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["status"], "loading");
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(server_->state_name(), "loading");
}

TEST_F(LoadingServer, GenerationWaitsForTheModel) {
  const httplib::Result r = client_->Post("/v1/completions", R"({"prompt": "x"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(error_of(r)["code"], "loading");
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_FALSE(r->get_header_value("X-Request-Id").empty());
}

TEST_F(LoadingServer, ModelsListedWhileLoading) {
  const httplib::Result r = client_->Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["data"][0]["id"], "m");
  const httplib::Result missing = client_->Get("/v1/models/other");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(error_of(missing)["code"], "model_not_found");
}

TEST_F(LoadingServer, ApiKeyRequired) {
  httplib::Client anonymous("127.0.0.1", port_);
  const httplib::Result r = anonymous.Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(error_of(r)["code"], "invalid_api_key");
  EXPECT_NE(error_of(r)["message"].get<std::string>().find("missing API key"), std::string::npos);
  anonymous.set_bearer_token_auth("secreT");
  EXPECT_EQ(anonymous.Get("/v1/models")->status, 401);
  anonymous.set_bearer_token_auth("secret1");
  EXPECT_EQ(anonymous.Get("/v1/models")->status, 401);
  EXPECT_EQ(anonymous.Get("/metrics")->status, 200);  // probes need no key
}

TEST_F(LoadingServer, ErrorBodiesForEveryFailure) {
  const httplib::Result nf = client_->Get("/nope");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_EQ(error_of(nf)["code"], "not_found");
  const httplib::Result big = client_->Post("/v1/completions", std::string(4096, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(error_of(big)["code"], "request_too_large");
}

TEST_F(LoadingServer, MetricsCountResponses) {
  client_->Get("/nope");
  const httplib::Result r = client_->Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("tokenmill_http_responses_total{endpoint=\"other\",code=\"404\"} 1"), std::string::npos);
  EXPECT_NE(r->body.find("tokenmill_server_state{state=\"loading\"} 1"), std::string::npos);
}

TEST_F(LoadingServer, StoppingRefusesAndCloses) {
  EXPECT_TRUE(server_->stop_accepting_and_drain(std::chrono::milliseconds(100)));
  EXPECT_EQ(server_->state_name(), "stopping");
  httplib::Client late("127.0.0.1", port_);
  late.set_connection_timeout(1, 0);
  EXPECT_FALSE(late.Get("/health"));  // the listener is gone
}

}  // namespace
}  // namespace tokenmill::server
