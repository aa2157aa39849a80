// Context editing cost (api/context_edits.h): the time apply_context_edits
// takes on an agent conversation of about 100K tokens, as a multiple of one
// render + tokenize of the same prompt (what every request pays anyway).
// Single-threaded; the conversation is generated here (deterministic).
//
//   context_edits_bench [VOCAB_GGUF] [--turns N] [--result-bytes B]
// VOCAB_GGUF defaults to ZL_SHARED_DIR/vocab/ggml-vocab-qwen2.gguf (ChatML,
// Hermes tool format).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "api/anthropic/messages.h"
#include "api/context_edits.h"
#include "api/tokenizer_codec.h"
#include "core/json_escape.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string tool_result(int i, size_t n_bytes) {
  static const char* kLines[] = {
      "  for (size_t i = 0; i < n_blocks; ++i) table[i] = pool.allocate(block_size);\n",
      "// The scheduler admits waiting requests while KV blocks remain free.\n",
      "if (status != Status::kOk) return make_error(ErrorReason::kInvalidValue, \"bad value\");\n",
      "src/engine/scheduler.cc:142: warning: unused variable 'n_free' [-Wunused-variable]\n",
  };
  std::string s = "File " + std::to_string(i) + ":\n";
  for (size_t k = 0; s.size() < n_bytes; ++k) s += kLines[(k + static_cast<size_t>(i)) % 4];
  return s;
}

std::string body(int turns, size_t result_bytes, const std::string& cm) {
  std::string msgs = R"([{"role":"user","content":"Fix the failing scheduler test."})";
  for (int i = 0; i < turns; ++i) {
    const std::string id = "toolu_" + std::to_string(i);
    msgs += R"(,{"role":"assistant","content":[{"type":"text","text":"Reading the next file."},)"
            R"({"type":"tool_use","id":")" + id + R"(","name":"read_file","input":{"path":"src/f)" +
            std::to_string(i) + R"(.cc"}}]})";
    std::string r;
    zl::append_json_string(r, tool_result(i, result_bytes));
    msgs += R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":")" + id + R"(","content":)" + r + "}]}";
  }
  return R"({"model":"m","max_tokens":100,"messages":)" + msgs + "]" + (cm.empty() ? "" : R"(,"context_management":)" + cm) + "}";
}

template <typename Fn>
double best_ms(int reps, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string vocab = std::string(ZL_SHARED_DIR) + "/vocab/ggml-vocab-qwen2.gguf";
  int turns = 40;
  size_t result_bytes = 10000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--turns") && i + 1 < argc) {
      turns = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--result-bytes") && i + 1 < argc) {
      result_bytes = static_cast<size_t>(std::atol(argv[++i]));
    } else {
      vocab = argv[i];
    }
  }
  auto tok = zl::Tokenizer::load(vocab);
  if (!tok.ok()) {
    std::fprintf(stderr, "cannot load %s: %s\n", vocab.c_str(), tok.status().message().c_str());
    return 1;
  }
  auto tmpl = zl::ChatTemplate::for_vocab((*tok)->vocab());
  if (!tmpl.ok()) return 1;
  const zl::api::TokenizerCodec codec(tok->get(), *tmpl);

  auto plain = zl::api::anthropic::parse_messages_request(body(turns, result_bytes, ""));
  if (!plain.ok()) return 1;
  int64_t n_tokens = 0;
  const double render_ms = best_ms(3, [&] { n_tokens = static_cast<int64_t>(codec.encode_chat(plain.value())->size()); });
  std::printf("%d round trips, results of %zu bytes: %lld tokens, one render+tokenize %.1f ms\n", turns, result_bytes,
              static_cast<long long>(n_tokens), render_ms);
  struct Case {
    const char* name;
    std::string cm;
  };
  const Case cases[] = {
      {"under the trigger", R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":100000000}}]})"},
      {"all but keep 3", R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":30000}}]})"},
      {"clear_at_least 20000", R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":30000},"clear_at_least":{"type":"input_tokens","value":20000}}]})"},
  };
  for (const Case& c : cases) {
    auto parsed = zl::api::anthropic::parse_messages_request(body(turns, result_bytes, c.cm));
    if (!parsed.ok()) return 1;
    zl::api::ContextEditReport report;
    const double ms = best_ms(3, [&] {
      zl::api::ChatRequest chat = parsed.value();
      report = zl::api::apply_context_edits(&chat, codec).value();
    });
    const int64_t cleared = report.applied.empty() ? 0 : report.applied[0].n_cleared;
    std::printf("%-22s %8.1f ms = %4.1f renders; %lld -> %lld tokens, %lld tool uses cleared\n", c.name, ms,
                ms / render_ms, static_cast<long long>(report.n_original_tokens),
                static_cast<long long>(report.n_tokens), static_cast<long long>(cleared));
  }
  return 0;
}
