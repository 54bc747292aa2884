#include "server/model_profile.h"

#include <gtest/gtest.h>

namespace tokenmill::server {
namespace {

ModelMetadata profile_meta(std::string name, std::string finetune, bool has_chat_template) {
  ModelMetadata m;
  m.name = std::move(name);
  m.finetune = std::move(finetune);
  m.has_chat_template = has_chat_template;
  return m;
}

ChatFormat chat_format_from(tokenizer::ChatTemplateKind kind, std::string source) {
  ChatFormat f;
  f.kind = kind;
  f.source = std::move(source);
  return f;
}

// The default model's metadata: general.name "Gemma 3 270m", no finetune,
// no tokenizer.chat_template; chat goes through the Gemma turn markers.
TEST(ModelProfile, DefaultGemmaIsABaseModelWithAFallbackTemplate) {
  const ModelProfile p =
      profile_model(profile_meta("Gemma 3 270m", "", false),
                    chat_format_from(tokenizer::ChatTemplateKind::Gemma, "turn-marker tokens of the vocabulary"));
  EXPECT_TRUE(p.base_model);
  EXPECT_EQ(p.chat_template, "gemma");
  const std::vector<std::string> notices = model_notices(p);
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_NE(notices[0].find("base model"), std::string::npos);
  EXPECT_NE(notices[1].find("no chat template"), std::string::npos);
  EXPECT_NE(notices[1].find("gemma"), std::string::npos);
}

TEST(ModelProfile, NamesDecideBeforeTheTemplate) {
  const auto gguf = chat_format_from(tokenizer::ChatTemplateKind::Gemma, "GGUF tokenizer.chat_template");
  EXPECT_FALSE(profile_model(profile_meta("Gemma 3 270m It", "it", false), gguf).base_model);
  EXPECT_FALSE(profile_model(profile_meta("Qwen2.5 0.5B Instruct", "", false), gguf).base_model);
  EXPECT_FALSE(profile_model(profile_meta("Some-Model-SFT", "", false), gguf).base_model);
  EXPECT_TRUE(profile_model(profile_meta("Qwen2.5 0.5B Base", "", true), gguf).base_model);  // a base with a template
  EXPECT_TRUE(profile_model(profile_meta("gemma-3-1b-pt", "", true), gguf).base_model);
  EXPECT_FALSE(profile_model(profile_meta("Base Instruct Mix", "", false), gguf).base_model);  // instruction words win
  // Words, not substrings: "Italian", "chatter" and "Pythia" name nothing.
  EXPECT_TRUE(profile_model(profile_meta("Italian Pythia chatter", "", false), gguf).base_model);
  EXPECT_FALSE(profile_model(profile_meta("Italian Pythia chatter", "", true), gguf).base_model);
}

TEST(ModelProfile, NoNoticeForAnInstructModelWithItsOwnTemplate) {
  const ModelProfile p =
      profile_model(profile_meta("Llama 3.2 1B Instruct", "Instruct", true),
                    chat_format_from(tokenizer::ChatTemplateKind::Llama3, "GGUF tokenizer.chat_template"));
  EXPECT_FALSE(p.base_model);
  EXPECT_TRUE(model_notices(p).empty());
}

TEST(ModelProfile, ChatTemplateNotices) {
  // No template anywhere: chat is refused, and the notice says how to serve it.
  const ModelProfile none = profile_model(profile_meta("x", "instruct", false), std::nullopt);
  ASSERT_EQ(model_notices(none).size(), 1u);
  EXPECT_NE(model_notices(none)[0].find("--chat-template"), std::string::npos);
  EXPECT_TRUE(none.chat_template.empty());
  // --chat-template over a template the GGUF has: the user's choice, no notice.
  const ModelProfile overridden = profile_model(
      profile_meta("x", "instruct", true), chat_format_from(tokenizer::ChatTemplateKind::ChatML, "--chat-template"));
  EXPECT_TRUE(model_notices(overridden).empty());
  // --chat-template standing in for a missing one: said, with its source.
  const ModelProfile stand_in = profile_model(profile_meta("x", "instruct", false),
                                              chat_format_from(tokenizer::ChatTemplateKind::ChatML, "--chat-template"));
  ASSERT_EQ(model_notices(stand_in).size(), 1u);
  EXPECT_NE(model_notices(stand_in)[0].find("chatml template (--chat-template)"), std::string::npos);
}

}  // namespace
}  // namespace tokenmill::server
