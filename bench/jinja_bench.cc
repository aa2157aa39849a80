// Chat template rendering cost on the request path: JinjaCodec::render (the
// context built from the request, the template walked) for a large request
// — 12 tools, 16 turns with tool calls and results — through real chat
// templates, against two baselines measured in the same run: the built-in
// ChatML renderer on the same request, and tokenizing the rendered prompt
// with the demo vocabulary (what every request does next anyway).
//
//   jinja_bench [TEMPLATE.jinja ...] [--reps N]
// Default templates: the larger ones of SHARED_DIR/templates (test data;
// the bench only reads them). Prints the median of N (default 200) renders.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/jinja_codec.h"
#include "api/openai/chat_completions.h"
#include "api/tokenizer_codec.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// An OpenAI request: 12 tools, a system prompt, 16 turns with tool calls.
std::string big_request() {
  std::string tools;
  for (int i = 0; i < 12; ++i) {
    if (i > 0) tools += ",";
    tools += R"({"type":"function","function":{"name":"tool_)" + std::to_string(i) +
             R"(","description":"Does thing number )" + std::to_string(i) +
             R"( with care, returning a short JSON report.","parameters":{"type":"object","properties":{)"
             R"("query":{"type":"string","description":"What to look for"},)"
             R"("limit":{"type":"integer","description":"At most this many results"},)"
             R"("mode":{"type":"string","enum":["fast","thorough"]},)"
             R"("tags":{"type":"array","items":{"type":"string"}}},"required":["query"]}}})";
  }
  std::string messages = R"({"role":"system","content":"You are a careful assistant. Use tools when needed."})";
  for (int t = 0; t < 4; ++t) {
    const std::string id = "call" + std::to_string(10000 + t);
    messages += R"(,{"role":"user","content":"Please look up item )" + std::to_string(t) +
                R"( and summarise what you find in two sentences."})";
    messages += R"(,{"role":"assistant","content":"","tool_calls":[{"id":")" + id +
                R"(","type":"function","function":{"name":"tool_)" + std::to_string(t) +
                R"(","arguments":"{\"query\": \"item )" + std::to_string(t) + R"(\", \"limit\": 3}"}}]})";
    messages += R"(,{"role":"tool","tool_call_id":")" + id +
                R"(","content":"{\"results\": [\"alpha\", \"beta\", \"gamma\"], \"took_ms\": 12}"})";
    messages += R"(,{"role":"assistant","content":"Item )" + std::to_string(t) +
                R"( has three results: alpha, beta and gamma. The lookup was quick."})";
  }
  return R"({"model":"m","messages":[)" + messages + R"(],"tools":[)" + tools + "]}";
}

template <typename F>
double median_us(int reps, F&& f) {
  std::vector<double> t;
  t.reserve(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    const auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 200;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      files.push_back(argv[i]);
    }
  }
  const std::string shared = ZL_SHARED_DIR;
  if (files.empty()) {
    for (const char* name : {"Qwen3.5-4B", "google-gemma-4-31B-it", "meetkai-functionary-medium-v3.2",
                             "meta-llama-Llama-3.3-70B-Instruct", "mistralai-Ministral-3-14B-Reasoning-2512",
                             "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use"}) {
      files.push_back(shared + "/templates/" + name + ".jinja");
    }
  }
  auto tok = zl::Tokenizer::load(shared + "/models/stories260K.gguf");
  if (!tok.ok()) {
    std::fprintf(stderr, "jinja_bench: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  auto req = zl::api::openai::parse_chat_request(big_request());
  if (!req.ok()) {
    std::fprintf(stderr, "jinja_bench: bad request: %s\n", req.error().message.c_str());
    return 1;
  }
  const zl::api::ChatRequest& chat = req.value();
  zl::api::TokenizerCodec chatml(tok->get(), zl::ChatTemplate(zl::ChatTemplateKind::kChatml));
  const double t_builtin = median_us(reps, [&] { (void)chatml.render(chat); });
  std::printf("request: 12 tools, %zu messages; median of %d; the machine is shared, so figures are noisy\n",
              chat.messages.size(), reps);
  std::printf("%-48s %10s %10s %12s %10s %10s\n", "template", "bytes", "render_us", "tokenize_us", "vs_tok", "vs_chatml");
  for (const std::string& file : files) {
    auto t = zl::tmpl::Template::parse(read_file(file), file);
    if (!t.ok()) {
      std::fprintf(stderr, "jinja_bench: %s\n", t.status().to_string().c_str());
      return 1;
    }
    zl::api::JinjaCodec codec(tok->get(), std::move(*t), file);
    auto first = codec.render_text(chat);
    if (!first.ok()) {
      std::fprintf(stderr, "jinja_bench: %s: %s\n", file.c_str(), first.status().to_string().c_str());
      continue;
    }
    const double t_render = median_us(reps, [&] { (void)codec.render(chat); });
    const double t_tok = median_us(reps, [&] { (void)(*tok)->encode(*first, {.add_special = true, .parse_special = true}); });
    std::printf("%-48s %10zu %10.1f %12.1f %10.2f %10.2f\n", std::filesystem::path(file).stem().c_str(),
                first->size(), t_render, t_tok, t_render / t_tok, t_render / t_builtin);
  }
  std::printf("chatml built-in render: %.1f us\n", t_builtin);
  return 0;
}
