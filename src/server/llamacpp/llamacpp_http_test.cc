// llama.cpp's routes before any model is loaded: /health answers as both
// tokenmill's and llama.cpp's readers expect, and every model route says
// the model is loading, through a real socket.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/http_server.h"

namespace tokenmill::server {
namespace {

using nlohmann::json;

class LlamaRoutesLoading : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    o.model_names = {"m"};
    o.http_threads = 4;
    o.log_requests = false;
    server_ = std::make_unique<HttpServer>(o);
    port_ = server_->bind();
    server_->start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
  }
  void TearDown() override {
    server_->stop_accepting_and_drain(std::chrono::milliseconds(100));
    server_.reset();
  }

  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
  int port_ = 0;
};

TEST_F(LlamaRoutesLoading, HealthIsBothShapes) {
  for (const char* path : {"/health", "/v1/health"}) {
    const httplib::Result r = client_->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 503);
    const json body = json::parse(r->body);
    EXPECT_EQ(body["status"], "loading");   // tokenmill's readers
    EXPECT_EQ(body["error"]["code"], 503);  // llama.cpp's
    EXPECT_EQ(body["error"]["message"], "Loading model");
    EXPECT_EQ(body["error"]["type"], "unavailable_error");
  }
}

TEST_F(LlamaRoutesLoading, ModelRoutesWaitForTheModel) {
  for (const char* path : {"/completion", "/infill", "/completions", "/chat/completions"}) {
    const httplib::Result r = client_->Post(path, R"({"prompt": "x"})", "application/json");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 503) << path;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "loading") << path;
  }
  for (const char* path : {"/props", "/slots"}) {
    const httplib::Result r = client_->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 503) << path;
  }
  const httplib::Result wrong = client_->Get("/completion");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  const httplib::Result save = client_->Post("/slots/0?action=save", "{}", "application/json");
  ASSERT_TRUE(save);
  EXPECT_EQ(save->status, 501);
}

}  // namespace
}  // namespace tokenmill::server
