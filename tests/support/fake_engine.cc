#include "support/fake_engine.h"

#include <algorithm>
#include <cstdlib>
#include <deque>

#include "api/tool_prompt.h"

namespace zl::fake {

const std::vector<std::string> kStory = {
    "Once", " upon", " a", " time", ",", " there", " was", " a", " little", " girl", " named", " Lily", ".",
    " She", " loved", " to", " play", " outside", ".", " \"Hi!\"", " she", " said", ".\n", "The", " end", "."};

namespace {

constexpr int32_t kBos = 1;
constexpr int32_t kByteBase = 3;

void append_bytes(std::string_view text, std::vector<int32_t>* ids) {
  for (unsigned char c : text) ids->push_back(kByteBase + c);
}

// `text` as tokens of about 3 bytes, never splitting a UTF-8 character.
std::vector<std::string> tokens_of(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = std::min<size_t>(3, text.size() - i);
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    out.emplace_back(text.substr(i, n));
    i += n;
  }
  return out;
}

// The [[fake:tool=NAME:ARGS]] script of a prompt (empty: the story).
std::vector<std::string> tool_script(const std::string& prompt) {
  struct Call {
    std::string name, args;
  };
  std::vector<Call> calls;
  size_t last = std::string::npos;
  constexpr std::string_view kMarker = "[[fake:tool=";
  for (size_t at = prompt.find(kMarker); at != std::string::npos; at = prompt.find(kMarker, at + 1)) {
    const size_t colon = prompt.find(':', at + kMarker.size());
    const size_t end = colon == std::string::npos ? colon : prompt.find("]]", colon);
    if (end == std::string::npos) break;
    calls.push_back({prompt.substr(at + kMarker.size(), colon - at - kMarker.size()), prompt.substr(colon + 1, end - colon - 1)});
    last = end;
  }
  // A forced call (the prompt ends inside it) is continued.
  if (prompt.ends_with("\"arguments\":")) {
    std::string rest = " ";
    rest.append(calls.empty() ? std::string("{}") : calls[0].args).append("}\n</tool_call>");
    return tokens_of(rest);
  }
  if (prompt.ends_with("\"parameters\":")) {
    std::string rest = " ";
    rest.append(calls.empty() ? std::string("{}") : calls[0].args).append("}");
    return tokens_of(rest);
  }
  if (prompt.ends_with("{\"name\": \"")) {
    if (calls.empty()) return {};
    if (prompt.ends_with("<tool_call>\n{\"name\": \"")) {
      return tokens_of(calls[0].name + "\", \"arguments\": " + calls[0].args + "}\n</tool_call>");
    }
    return tokens_of(calls[0].name + "\", \"parameters\": " + calls[0].args + "}");  // Llama 3
  }
  if (calls.empty() || prompt.find("<|tool|>", last) != std::string::npos) return {};
  if (prompt.find("[[fake:syntax=mistral]]") != std::string::npos) {
    // Mistral (Ministral 3, Devstral): [TOOL_CALLS]name[ARGS]{…} per call.
    std::string text = "Checking.";
    for (const Call& c : calls) text += "[TOOL_CALLS]" + c.name + "[ARGS]" + c.args;
    return tokens_of(text);
  }
  if (prompt.find("[[fake:syntax=llama3]]") != std::string::npos) {
    // Llama 3: the answer is the calls, "; " between them.
    std::string text;
    for (const Call& c : calls) {
      if (!text.empty()) text += "; ";
      text += "{\"name\": \"" + c.name + "\", \"parameters\": " + c.args + "}";
    }
    return tokens_of(text);
  }
  std::string text = "Let me check.";
  for (const Call& c : calls) {
    text += "\n<tool_call>\n{\"name\": \"" + c.name + "\", \"arguments\": " + c.args + "}\n</tool_call>";
  }
  return tokens_of(text);
}

}  // namespace

std::string FakeCodec::render_chat(const api::ChatRequest& chat) const {
  std::string out;
  for (size_t i = 0; i < chat.messages.size(); ++i) {
    const api::ChatMessage& m = chat.messages[i];
    out += "<|" + m.role + "|>\n" + m.content;
    for (const auto& tc : m.tool_calls) out += "<tool_call " + tc.name + ">" + tc.arguments_json + "</tool_call>";
    const bool last = i + 1 == chat.messages.size();
    if (!(last && chat.continue_final_message)) out += "\n";
  }
  if (!chat.tools_json.empty()) out += "<|tools|>\n" + chat.tools_json + "\n";
  if (!chat.continue_final_message) {
    out += "<|assistant|>\n" + api::plan_tools(chat, syntax_).prefill;
  }
  return out;
}

Result<std::vector<int32_t>> FakeCodec::encode_chat(const api::ChatRequest& chat) const {
  return encode_text(render_chat(chat));
}

Result<std::vector<int32_t>> FakeCodec::encode_text(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() + 1);
  ids.push_back(kBos);
  append_bytes(text, &ids);
  return ids;
}

Result<std::string> FakeCodec::decode_prompt(std::span<const int32_t> ids) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= kVocab) {
      return invalid_argument("token id " + std::to_string(id) + " is outside the fake vocabulary",
                              {.reason = ErrorReason::kInvalidValue});
    }
  }
  return decode(std::vector<int32_t>(ids.begin(), ids.end()));
}

std::string FakeCodec::decode(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (id >= kByteBase && id < kByteBase + 256) out += static_cast<char>(id - kByteBase);
  }
  return out;
}

struct FakeEngine::Seq {
  Request request;
  std::shared_ptr<RequestChannel> channel;
  bool endless = false;
  bool fail = false;
  bool overload = false;
  bool empty = false;  // EOS as the first token
  std::chrono::microseconds token_time{0};
  std::chrono::steady_clock::time_point next_token{};
  std::vector<std::string> script;  // the tokens to write; empty: kStory
  std::string text;     // all generated text
  size_t n_emitted = 0; // bytes of `text` already sent
  // Request::logprobs: (where the token's text begins in `text`, its made-up entry), not yet
  // sent; an entry goes with the first event that sends part of its text, as the engine's.
  std::deque<std::pair<size_t, TokenLogprobs>> logprobs;
  Usage usage;
  Timings timings;
};

FakeEngine::FakeEngine(FakeEngineConfig config) : config_(config) { thread_ = std::thread([this] { loop(); }); }

FakeEngine::~FakeEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<RequestChannel> FakeEngine::submit(Request request) {
  auto seq = std::make_unique<Seq>();
  seq->channel = std::make_shared<RequestChannel>(request.id);
  const std::string prompt = FakeCodec::decode(request.prompt_ids);
  seq->endless = prompt.find("[[fake:long]]") != std::string::npos;
  seq->fail = prompt.find("[[fake:error]]") != std::string::npos;
  seq->overload = prompt.find("[[fake:overload]]") != std::string::npos;
  seq->empty = prompt.find("[[fake:empty]]") != std::string::npos;
  if (prompt.find("[[fake:slow]]") != std::string::npos) seq->token_time = std::chrono::milliseconds(50);
  if (const size_t at = prompt.find("[[fake:prefill="); at != std::string::npos) {
    const long ms = std::strtol(prompt.c_str() + at + 15, nullptr, 10);
    seq->next_token = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0L, ms));
  }
  seq->script = tool_script(prompt);
  seq->usage.n_prompt_tokens = static_cast<int64_t>(request.prompt_ids.size());
  seq->timings.t_submit = std::chrono::steady_clock::now();
  seq->request = std::move(request);
  auto channel = seq->channel;
  const int64_t live = n_live_.fetch_add(1) + 1;
  for (int64_t peak = max_live_.load(); live > peak && !max_live_.compare_exchange_weak(peak, live);) {
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back(std::move(seq));
  }
  cv_.notify_all();
  return channel;
}

EngineStats FakeEngine::stats() const {
  EngineStats s;
  s.n_running = n_running_.load();
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.n_waiting = static_cast<int64_t>(incoming_.size());
  }
  s.n_ctx = config_.n_ctx;
  s.max_seqs = config_.max_seqs;
  s.n_steps = n_steps_.load();
  s.kv_block_size = 16;
  const int64_t kv_tokens = config_.kv_tokens > 0 ? config_.kv_tokens : std::max<int64_t>(16384, config_.n_ctx);
  s.n_kv_blocks_total = (kv_tokens + 15) / 16;
  s.n_kv_blocks_used = std::min(n_kv_blocks_used_.load(), s.n_kv_blocks_total);
  s.n_prompt_tokens_total = n_prompt_total_.load();
  s.n_generated_tokens_total = n_generated_total_.load();
  return s;
}

void FakeEngine::loop() {
  std::vector<std::unique_ptr<Seq>> running;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (running.empty()) cv_.wait(lock, [&] { return stop_ || !incoming_.empty(); });
      if (stop_) break;
      for (auto& s : incoming_) {
        s->timings.t_scheduled = std::chrono::steady_clock::now();
        n_prompt_total_.fetch_add(s->usage.n_prompt_tokens);
        running.push_back(std::move(s));
      }
      incoming_.clear();
    }
    n_running_.store(static_cast<int64_t>(running.size()));
    n_steps_.fetch_add(1);
    std::erase_if(running, [&](const std::unique_ptr<Seq>& s) { return !step(*s); });
    n_running_.store(static_cast<int64_t>(running.size()));
    int64_t n_blocks = 0;
    for (const auto& s : running) n_blocks += (s->usage.n_prompt_tokens + s->usage.n_generated_tokens + 15) / 16;
    n_kv_blocks_used_.store(n_blocks);
    std::this_thread::sleep_for(config_.step_time);
  }
  // Shutdown: whatever is left is cancelled.
  for (auto& s : running) {
    Event e{.kind = EventKind::kFinish, .finish = FinishReason::kCancelled, .usage = s->usage};
    s->channel->push(std::move(e));
  }
}

bool FakeEngine::step(Seq& s) {
  auto take_logprobs = [&](Event& e) {
    while (!s.logprobs.empty() && s.logprobs.front().first < s.n_emitted) {
      e.logprobs.push_back(std::move(s.logprobs.front().second));
      s.logprobs.pop_front();
    }
  };
  // The last event: the request has ended before its consumer can see it (max_live).
  auto last = [&](Event e) {
    n_live_.fetch_sub(1);
    s.channel->push(std::move(e));
    return false;
  };
  auto finish = [&](FinishReason r, std::string stop = {}) {
    Event e;
    e.kind = EventKind::kFinish;
    e.finish = r;
    e.stop_sequence = std::move(stop);
    e.usage = s.usage;
    e.timings = s.timings;
    return last(std::move(e));
  };
  if (s.channel->cancelled()) {
    n_cancelled_.fetch_add(1);
    return finish(FinishReason::kCancelled);
  }
  const auto now = std::chrono::steady_clock::now();
  if (now < s.next_token) return true;
  if (s.overload) {
    return last(Event{.kind = EventKind::kError, .usage = s.usage,
                     .error = resource_exhausted("the engine is overloaded (fake)", {.reason = ErrorReason::kOverloaded})});
  }
  if (s.timings.t_prefilled == std::chrono::steady_clock::time_point{}) s.timings.t_prefilled = now;
  // Validate mode: the "prefill" (the [[fake:prefill=MS]] wait) is done.
  if (s.request.stop.prefill_only) return finish(FinishReason::kMaxTokens);
  s.next_token = now + s.token_time;
  if (s.empty) return finish(FinishReason::kEndOfSequence);

  const int64_t n_gen = s.usage.n_generated_tokens;
  const std::vector<std::string>& tokens = s.script.empty() ? kStory : s.script;
  if (!s.endless && n_gen >= static_cast<int64_t>(tokens.size())) {
    // The story is over: EOS. Held-back text (a partial stop match) is released first.
    if (s.n_emitted < s.text.size()) {
      Event e{.kind = EventKind::kText, .text = s.text.substr(s.n_emitted), .usage = s.usage};
      s.n_emitted = s.text.size();
      take_logprobs(e);
      s.channel->push(std::move(e));
    }
    return finish(FinishReason::kEndOfSequence);
  }
  const std::string& token = tokens[n_gen % tokens.size()];
  if (s.request.logprobs >= 0) {
    // Made up and deterministic: the chosen token first, alternatives one nat apart.
    const float lp = -0.25f * static_cast<float>(n_gen % 4);
    TokenLogprobs entry{.chosen = {.id = static_cast<int32_t>(n_gen), .logprob = lp, .piece = token}};
    for (int32_t j = 0; j < s.request.logprobs; ++j) {
      entry.top.push_back({.id = static_cast<int32_t>(n_gen) + j, .logprob = lp - static_cast<float>(j),
                           .piece = j == 0 ? token : "alt" + std::to_string(j)});
    }
    s.logprobs.emplace_back(s.text.size(), std::move(entry));
  }
  s.text += token;
  ++s.usage.n_generated_tokens;
  n_generated_total_.fetch_add(1);
  if (n_gen == 0) s.timings.t_first_token = now;
  s.timings.t_last_token = now;
  if (s.fail && s.usage.n_generated_tokens > 2) {
    return last(Event{.kind = EventKind::kError, .usage = s.usage, .error = internal_error("fake engine failure")});
  }

  // Stop strings: the earliest match ends the text before it; a suffix that
  // could still become a match is held back.
  size_t stop_pos = std::string::npos;
  std::string stop_str;
  size_t hold = 0;
  for (const std::string& stop : s.request.stop.stop_strings) {
    const size_t from = s.n_emitted;
    const size_t p = s.text.find(stop, from);
    if (p != std::string::npos && p < stop_pos) {
      stop_pos = p;
      stop_str = stop;
    }
    for (size_t k = std::min(stop.size() - 1, s.text.size() - from); k > hold; --k) {
      if (s.text.compare(s.text.size() - k, k, stop, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  const size_t end = stop_pos != std::string::npos ? stop_pos : s.text.size() - hold;
  if (end > s.n_emitted) {
    Event e{.kind = EventKind::kText, .text = s.text.substr(s.n_emitted, end - s.n_emitted), .usage = s.usage,
            .timings = s.timings};
    s.n_emitted = end;
    take_logprobs(e);
    s.channel->push(std::move(e));
  }
  if (stop_pos != std::string::npos) return finish(FinishReason::kStopSequence, stop_str);
  const int64_t n_total = s.usage.n_prompt_tokens + s.usage.n_generated_tokens;
  const bool window_full = n_total >= config_.n_ctx;
  const bool at_max = s.usage.n_generated_tokens >= s.request.stop.max_tokens;
  if (window_full || at_max) {
    if (s.n_emitted < s.text.size()) {
      Event e{.kind = EventKind::kText, .text = s.text.substr(s.n_emitted), .usage = s.usage};
      s.n_emitted = s.text.size();
      take_logprobs(e);
      s.channel->push(std::move(e));
    }
    return finish(at_max ? FinishReason::kMaxTokens : FinishReason::kContextWindow);
  }
  return true;
}

}  // namespace zl::fake

