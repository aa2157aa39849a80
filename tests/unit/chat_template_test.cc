// Chat templates: exact rendered text for every family, prefill, detection,
// and that message content cannot inject special tokens.
#include <gtest/gtest.h>

#include <filesystem>

#include "tokenizer/chat_template.h"

namespace zl {
namespace {

namespace fs = std::filesystem;

const std::vector<ChatMessage> kConversation = {
    {"system", "You are helpful."},
    {"user", "Hi"},
    {"assistant", "Hello!"},
    {"user", "How are you?"},
};

std::string render(ChatTemplateKind kind, const std::vector<ChatMessage>& msgs, ChatRenderOptions opts = {}) {
  auto p = ChatTemplate(kind).render(msgs, opts);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? p->text() : "";
}

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(render(ChatTemplateKind::kLlama2, kConversation),
            "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] How are you? [/INST]");
  EXPECT_EQ(render(ChatTemplateKind::kLlama2, {{"user", "  Hi \n"}}), "[INST] Hi [/INST]");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render(ChatTemplateKind::kLlama3, kConversation),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Chatml) {
  EXPECT_EQ(render(ChatTemplateKind::kChatml, kConversation),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nHow are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Mistral) {
  EXPECT_EQ(render(ChatTemplateKind::kMistral, kConversation),
            "[INST] You are helpful.\n\nHi [/INST]Hello!</s>[INST] How are you? [/INST]");
}

TEST(ChatTemplate, Phi3) {
  EXPECT_EQ(render(ChatTemplateKind::kPhi3, kConversation),
            "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
            "<|user|>\nHow are you?<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplate, Gemma) {
  EXPECT_EQ(render(ChatTemplateKind::kGemma, kConversation),
            "<start_of_turn>user\nYou are helpful.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nHow are you?<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplate, Zephyr) {
  EXPECT_EQ(render(ChatTemplateKind::kZephyr, kConversation),
            "<|system|>\nYou are helpful.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n"
            "<|user|>\nHow are you?</s>\n<|assistant|>\n");
}

TEST(ChatTemplate, PlainFallback) {
  EXPECT_EQ(render(ChatTemplateKind::kPlain, kConversation),
            "System: You are helpful.\n\nUser: Hi\n\nAssistant: Hello!\n\nUser: How are you?\n\nAssistant:");
}

TEST(ChatTemplate, AssistantPrefill) {
  const std::vector<ChatMessage> msgs = {{"user", "Write a haiku"}, {"assistant", "Autumn"}};
  const ChatRenderOptions prefill{.add_generation_prompt = true, .continue_final_message = true};
  EXPECT_EQ(render(ChatTemplateKind::kLlama3, msgs, prefill),
            "<|start_header_id|>user<|end_header_id|>\n\nWrite a haiku<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nAutumn");
  EXPECT_EQ(render(ChatTemplateKind::kChatml, msgs, prefill),
            "<|im_start|>user\nWrite a haiku<|im_end|>\n<|im_start|>assistant\nAutumn");
  EXPECT_EQ(render(ChatTemplateKind::kLlama2, msgs, prefill), "[INST] Write a haiku [/INST] Autumn");
  EXPECT_EQ(render(ChatTemplateKind::kMistral, msgs, prefill), "[INST] Write a haiku [/INST]Autumn");
  EXPECT_EQ(render(ChatTemplateKind::kPhi3, msgs, prefill), "<|user|>\nWrite a haiku<|end|>\n<|assistant|>\nAutumn");
  EXPECT_EQ(render(ChatTemplateKind::kGemma, msgs, prefill),
            "<start_of_turn>user\nWrite a haiku<end_of_turn>\n<start_of_turn>model\nAutumn");
  EXPECT_EQ(render(ChatTemplateKind::kZephyr, msgs, prefill), "<|user|>\nWrite a haiku</s>\n<|assistant|>\nAutumn");
  EXPECT_EQ(render(ChatTemplateKind::kPlain, msgs, prefill), "User: Write a haiku\n\nAssistant: Autumn");
  // A closed final assistant message plus a generation prompt opens a new turn.
  EXPECT_EQ(render(ChatTemplateKind::kChatml, msgs),
            "<|im_start|>user\nWrite a haiku<|im_end|>\n<|im_start|>assistant\nAutumn<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(ChatTemplateKind::kChatml, {{"user", "x"}}, {.add_generation_prompt = false}),
            "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, Errors) {
  const ChatTemplate llama2(ChatTemplateKind::kLlama2);
  EXPECT_FALSE(llama2.render({}).ok());
  EXPECT_FALSE(llama2.render(std::vector<ChatMessage>{{"tool", "x"}}).ok());
  EXPECT_FALSE(llama2.render(std::vector<ChatMessage>{{"user", "a"}, {"system", "late"}}).ok());
  EXPECT_FALSE(llama2.render(std::vector<ChatMessage>{{"system", "only"}}).ok());
  EXPECT_FALSE(ChatTemplate(ChatTemplateKind::kChatml)
                   .render(std::vector<ChatMessage>{{"user", "a"}}, {.continue_final_message = true})
                   .ok());
  // Families with a system turn accept it anywhere.
  EXPECT_TRUE(ChatTemplate(ChatTemplateKind::kChatml)
                  .render(std::vector<ChatMessage>{{"user", "a"}, {"system", "b"}})
                  .ok());
  auto bad = chat_template_from_name("jinja2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::kInvalidArgument);
}

TEST(ChatTemplate, PartsSeparateMarkupFromContent) {
  auto p = ChatTemplate(ChatTemplateKind::kLlama3).render(std::vector<ChatMessage>{{"user", "Hi<|eot_id|>"}});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->parts.size(), 3u);
  EXPECT_TRUE(p->parts[0].is_markup);
  EXPECT_FALSE(p->parts[1].is_markup);
  EXPECT_EQ(p->parts[1].text, "Hi<|eot_id|>");
  const auto segs = p->segments();
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_FALSE(segs[1].parse_special);
}

TEST(ChatTemplate, DetectByMarkers) {
  EXPECT_EQ(detect_chat_template(""), ChatTemplateKind::kPlain);
  EXPECT_EQ(detect_chat_template("{{ '<|start_header_id|>' + role }}"), ChatTemplateKind::kLlama3);
  EXPECT_EQ(detect_chat_template("{{'<|im_start|>' + message['role']}}"), ChatTemplateKind::kChatml);
  EXPECT_EQ(detect_chat_template("[INST] <<SYS>>\\n"), ChatTemplateKind::kLlama2);
  EXPECT_EQ(detect_chat_template("{{ '[INST] ' + message['content'] + ' [/INST]' }}"), ChatTemplateKind::kMistral);
  EXPECT_EQ(detect_chat_template("{{'<|user|>\\n' + message['content'] + '<|end|>'}}"), ChatTemplateKind::kPhi3);
  EXPECT_EQ(detect_chat_template("<start_of_turn>user"), ChatTemplateKind::kGemma);
  EXPECT_EQ(detect_chat_template("{{ '<|user|>\\n' + message['content'] + eos_token }}</s>"),
            ChatTemplateKind::kZephyr);
  EXPECT_EQ(detect_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}"), ChatTemplateKind::kPlain);
  for (const char* name : {"plain", "llama2", "llama3", "chatml", "mistral", "phi3", "gemma", "zephyr"}) {
    auto k = chat_template_from_name(name);
    ASSERT_TRUE(k.ok()) << name;
    EXPECT_STREQ(chat_template_name(*k), name);
  }
}

// The templates shipped in ../shared's vocabularies, end to end through the tokenizer.
TEST(ChatTemplate, RealVocabularies) {
  const fs::path vocab = fs::path(ZL_SHARED_DIR) / "vocab";
  if (!fs::exists(vocab)) GTEST_SKIP() << "no shared test data at " << ZL_SHARED_DIR;
  struct Row {
    const char* file;
    ChatTemplateKind expected;
  };
  for (const Row& r : {Row{"ggml-vocab-llama-bpe.gguf", ChatTemplateKind::kLlama3},
                       Row{"ggml-vocab-qwen2.gguf", ChatTemplateKind::kChatml},
                       Row{"ggml-vocab-phi-3.gguf", ChatTemplateKind::kPhi3},
                       Row{"ggml-vocab-gpt-2.gguf", ChatTemplateKind::kPlain}}) {
    auto tok = Tokenizer::load((vocab / r.file).string());
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    auto tmpl = ChatTemplate::for_vocab((*tok)->vocab());
    ASSERT_TRUE(tmpl.ok());
    EXPECT_EQ(tmpl->kind(), r.expected) << r.file;
    auto over = ChatTemplate::for_vocab((*tok)->vocab(), "chatml");
    ASSERT_TRUE(over.ok());
    EXPECT_EQ(over->kind(), ChatTemplateKind::kChatml);
  }
  // Llama 3: markup specials become single tokens, content specials do not.
  auto tok = Tokenizer::load((vocab / "ggml-vocab-llama-bpe.gguf").string());
  ASSERT_TRUE(tok.ok());
  const Tokenizer& t = **tok;
  auto p = ChatTemplate::for_vocab(t.vocab())->render(std::vector<ChatMessage>{{"user", "Hi<|eot_id|>"}});
  ASSERT_TRUE(p.ok());
  const auto ids = t.encode(p->segments(), /*add_special=*/true);
  ASSERT_GE(ids.size(), 6u);
  EXPECT_EQ(ids[0], 128000);  // BOS from the vocabulary
  EXPECT_EQ(ids[1], 128006);  // <|start_header_id|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 128009), 1);  // only the template's <|eot_id|>
  EXPECT_EQ(t.decode(ids, {.render_special = true}), "<|begin_of_text|>" + p->text());
}

}  // namespace
}  // namespace zl
