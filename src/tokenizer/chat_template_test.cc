#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/error.h"

namespace tokenmill::tokenizer {
namespace {

// System, a full exchange, and a second user turn with stray whitespace to
// show which families trim.
const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "Hi!"},
    {"assistant", "Hello."},
    {"user", "  How are you?\n"},
};

std::string render(ChatTemplateKind kind, const std::vector<ChatMessage>& messages, bool gen = true) {
  return render_chat(kind, messages, gen, "<s>");
}

TEST(ChatTemplate, Gemma) {
  EXPECT_EQ(render(ChatTemplateKind::Gemma, kConversation),
            "<start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nHow are you?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(render(ChatTemplateKind::Gemma, {{"user", "Hi"}}, false), "<start_of_turn>user\nHi<end_of_turn>\n");
  EXPECT_EQ(render(ChatTemplateKind::Gemma, {}), "<start_of_turn>model\n");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render(ChatTemplateKind::Llama3, kConversation),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(ChatTemplateKind::Llama3, {{"user", "a"}, {"user", "b"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\na<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nb<|eot_id|>");
}

TEST(ChatTemplate, ChatML) {
  EXPECT_EQ(render(ChatTemplateKind::ChatML, kConversation),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\n  How are you?\n<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(ChatTemplateKind::ChatML, {{"user", "x"}}, false), "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(render(ChatTemplateKind::Llama2, kConversation),
            "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST] Hello. </s>"
            "<s>[INST] How are you? [/INST]");
  // No system; the generation flag adds nothing; bos_text is what the caller passes.
  EXPECT_EQ(render_chat(ChatTemplateKind::Llama2,
                        std::vector<ChatMessage>{{"user", " a "}, {"assistant", "b"}, {"user", "c"}}, false, "<BOS>"),
            "[INST] a [/INST] b </s><BOS>[INST] c [/INST]");
}

TEST(ChatTemplate, Mistral) {
  EXPECT_EQ(render(ChatTemplateKind::Mistral, kConversation),
            "[INST] You are terse.\n\nHi! [/INST]Hello.</s>"
            "[INST]   How are you?\n [/INST]");
  EXPECT_EQ(render(ChatTemplateKind::Mistral, {{"user", "Hi"}}, false), "[INST] Hi [/INST]");
}

TEST(ChatTemplate, Phi3) {
  EXPECT_EQ(render(ChatTemplateKind::Phi3, kConversation),
            "<|system|>\nYou are terse.<|end|>\n"
            "<|user|>\nHi!<|end|>\n"
            "<|assistant|>\nHello.<|end|>\n"
            "<|user|>\n  How are you?\n<|end|>\n"
            "<|assistant|>\n");
}

void expect_error(ChatTemplateKind kind, const std::vector<ChatMessage>& messages, const std::string& needle) {
  try {
    render(kind, messages);
    ADD_FAILURE() << "rendered a bad conversation for " << chat_template_name(kind);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, RejectsUnknownRoles) {
  for (ChatTemplateKind kind : {ChatTemplateKind::Gemma, ChatTemplateKind::Llama2, ChatTemplateKind::Llama3,
                                ChatTemplateKind::ChatML, ChatTemplateKind::Mistral, ChatTemplateKind::Phi3}) {
    expect_error(kind, {{"user", "a"}, {"tool", "b"}}, "chat message #1 has unknown role 'tool'");
  }
}

TEST(ChatTemplate, RejectsBrokenAlternation) {
  for (ChatTemplateKind kind : {ChatTemplateKind::Gemma, ChatTemplateKind::Llama2, ChatTemplateKind::Mistral}) {
    expect_error(kind, {{"assistant", "a"}}, "chat message #0 has role 'assistant'");
    expect_error(kind, {{"user", "a"}, {"user", "b"}}, "chat message #1 has role 'user'");
    expect_error(kind, {{"system", "s"}, {"assistant", "a"}}, "chat message #1 has role 'assistant'");
    expect_error(kind, {{"user", "a"}, {"assistant", "b"}, {"system", "c"}}, "chat message #2 has role 'system'");
    expect_error(kind, {{"system", "s"}}, "no user message follows it");
  }
  // Formats without the rule accept the same conversations.
  EXPECT_NO_THROW(render(ChatTemplateKind::ChatML, {{"assistant", "a"}, {"system", "s"}}));
  EXPECT_NO_THROW(render(ChatTemplateKind::Phi3, {{"user", "a"}, {"user", "b"}}));
}

TEST(ChatTemplate, DetectsFamiliesFromJinja) {
  EXPECT_EQ(detect_chat_template("{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role "
                                 "+ '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"),
            ChatTemplateKind::Gemma);
  EXPECT_EQ(detect_chat_template("{% set content = '<|start_header_id|>' + message['role'] + "
                                 "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}"),
            ChatTemplateKind::Llama3);
  EXPECT_EQ(detect_chat_template("{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                                 "'<|im_end|>' + '\\n'}}"),
            ChatTemplateKind::ChatML);
  EXPECT_EQ(detect_chat_template("{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + "
                                 "'<|assistant|>' + '\\n'}}"),
            ChatTemplateKind::Phi3);
  EXPECT_EQ(detect_chat_template("{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' %}"
                                 "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"),
            ChatTemplateKind::Llama2);
  EXPECT_EQ(detect_chat_template("{{ bos_token }}{% for message in messages %}{{ '[INST] ' + "
                                 "message['content'] + ' [/INST]' }}"),
            ChatTemplateKind::Mistral);
  // Zephyr uses <|user|> but ends turns with </s>: not Phi-3, and not known.
  EXPECT_EQ(detect_chat_template("{{ '<|user|>\\n' + message['content'] + eos_token }}"), std::nullopt);
  EXPECT_EQ(detect_chat_template(""), std::nullopt);
}

TEST(ChatTemplate, FromName) {
  EXPECT_EQ(chat_template_from_name("gemma"), ChatTemplateKind::Gemma);
  EXPECT_EQ(chat_template_from_name("llama2"), ChatTemplateKind::Llama2);
  EXPECT_EQ(chat_template_from_name("Llama3"), ChatTemplateKind::Llama3);
  EXPECT_EQ(chat_template_from_name("chatml"), ChatTemplateKind::ChatML);
  EXPECT_EQ(chat_template_from_name("QWEN"), ChatTemplateKind::ChatML);
  EXPECT_EQ(chat_template_from_name("mistral"), ChatTemplateKind::Mistral);
  EXPECT_EQ(chat_template_from_name("phi3"), ChatTemplateKind::Phi3);
  EXPECT_EQ(chat_template_name(ChatTemplateKind::Phi3), "phi3");
  try {
    chat_template_from_name("vicuna");
    ADD_FAILURE() << "accepted an unknown name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown chat template 'vicuna'"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, ContinuationLeavesTheLastAssistantTurnOpen) {
  // Each family's full render of the conversation is the continuation
  // followed by exactly the end of the assistant's turn.
  const std::vector<std::pair<ChatTemplateKind, std::string>> turn_ends = {
      {ChatTemplateKind::Gemma, "<end_of_turn>\n"}, {ChatTemplateKind::Llama2, " </s>"},
      {ChatTemplateKind::Llama3, "<|eot_id|>"},     {ChatTemplateKind::ChatML, "<|im_end|>\n"},
      {ChatTemplateKind::Mistral, "</s>"},          {ChatTemplateKind::Phi3, "<|end|>\n"}};
  const std::vector<ChatMessage> msgs = {
      {"system", "Be brief."}, {"user", "Tell a story."}, {"assistant", "Once upon a"}};
  for (const auto& [kind, end] : turn_ends) {
    const std::string full = render_chat(kind, msgs, /*add_generation_prompt=*/false, "<s>");
    const std::string open = render_chat_continuation(kind, msgs, "<s>");
    EXPECT_EQ(open + end, full) << chat_template_name(kind);
    EXPECT_TRUE(open.ends_with("Once upon a")) << open;
  }
  // Nothing to continue unless the assistant spoke last.
  const std::vector<ChatMessage> asked = {{"user", "Tell a story."}};
  EXPECT_THROW(render_chat_continuation(ChatTemplateKind::ChatML, asked, "<s>"), Error);
  EXPECT_THROW(render_chat_continuation(ChatTemplateKind::ChatML, {}, "<s>"), Error);
  // The families' order rules still hold.
  const std::vector<ChatMessage> only_assistant = {{"assistant", "Hi"}};
  EXPECT_THROW(render_chat_continuation(ChatTemplateKind::Gemma, only_assistant, "<s>"), Error);
  EXPECT_EQ(render_chat_continuation(ChatTemplateKind::ChatML, only_assistant, "<s>"), "<|im_start|>assistant\nHi");
}

}  // namespace
}  // namespace tokenmill::tokenizer
