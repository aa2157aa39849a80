// `zerolayer generate`, `logits` and `inspect`: debugging tools on the
// reference forward pass.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "api/json_util.h"  // append_json_string
#include "cli/draft_setup.h"
#include "cli/engine_fit.h"
#include "cli/model_loading.h"
#include "core/log.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "spec/ngram_draft.h"  // kMaxNgram
#include "tokenizer/tokenizer.h"
#include "model/forward.h"
#include "model/model.h"

namespace zl::cli {
namespace {

void append_float(std::string& out, float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  out += buf;
}

void append_ids(std::string& out, const std::vector<int32_t>& ids) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
}

// A string value as inspect shows it: whole with --all, else cut to 120 bytes.
std::string shown_string(const std::string& s, bool all) {
  return all || s.size() <= 120 ? s : s.substr(0, 117) + "...";
}

std::string describe_value(const GgufValue& v, bool all) {
  if (const std::string* s = v.as_string()) {
    std::string out;
    api::append_json_string(out, shown_string(*s, all));
    return out;
  }
  if (const GgufArray* a = v.as_array()) {
    std::string out = "[";
    out.append(gguf_value_type_name(a->elem_type)).append(" x ").append(std::to_string(a->items.size())).append("]");
    const size_t shown = all ? a->items.size() : std::min<size_t>(a->items.size(), 8);
    if (shown) out += " ";
    for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + describe_value(a->items[i], all);
    if (shown < a->items.size()) out += ", ...";
    return out;
  }
  if (auto b = v.as_bool()) return *b ? "true" : "false";
  if (v.is_integer()) {
    if (auto i = v.as_int()) return std::to_string(*i);
    return std::to_string(*v.as_uint());
  }
  if (auto f = v.as_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", *f);
    return buf;
  }
  return "?";
}

// A metadata value in `inspect --json`, as the text output shows it: a
// string (cut the same way), a number (null when not finite), a boolean, or
// an array as {"type", "count", "items"} with the items shown (the first 8,
// all with --all).
void append_value_json(std::string& out, const GgufValue& v, bool all) {
  if (const std::string* s = v.as_string()) {
    api::append_json_string(out, shown_string(*s, all));
  } else if (const GgufArray* a = v.as_array()) {
    out += "{\"type\": ";
    api::append_json_string(out, gguf_value_type_name(a->elem_type));
    out += ", \"count\": " + std::to_string(a->items.size()) + ", \"items\": [";
    const size_t shown = all ? a->items.size() : std::min<size_t>(a->items.size(), 8);
    for (size_t i = 0; i < shown; ++i) {
      if (i) out += ", ";
      append_value_json(out, a->items[i], all);
    }
    out += "]}";
  } else if (auto b = v.as_bool()) {
    out += *b ? "true" : "false";
  } else if (v.is_integer()) {
    auto i = v.as_int();
    out += i ? std::to_string(*i) : std::to_string(*v.as_uint());
  } else if (auto f = v.as_float(); f && std::isfinite(*f)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", *f);
    out += buf;
  } else {
    out += "null";
  }
}

// `inspect --json` up to the model: the file, its metadata in file order,
// its tensors and their totals.
std::string inspect_file_json(const GgufFile& f, bool all) {
  std::string out = "{\"file\": ";
  api::append_json_string(out, f.path());
  out += ", \"version\": " + std::to_string(f.version()) + ", \"alignment\": " + std::to_string(f.alignment()) +
         ", \"file_size\": " + std::to_string(f.file_size()) + ", \"metadata\": {";
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    const auto& [key, value] = f.metadata()[i];
    out += i ? ", " : "";
    api::append_json_string(out, key);
    out += ": ";
    append_value_json(out, value, all);
  }
  out += "}, \"tensors\": [";
  int64_t n_params = 0;
  uint64_t n_bytes = 0;
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const GgufTensor& t = f.tensors()[i];
    out += i ? ",\n  {\"name\": " : "\n  {\"name\": ";
    api::append_json_string(out, t.name);
    out += ", \"type\": ";
    api::append_json_string(out, ggml_type_name(t.type));
    out += ", \"shape\": [";
    for (int d = 0; d < t.n_dims; ++d) out += (d ? ", " : "") + std::to_string(t.ne[d]);
    out += "], \"offset\": " + std::to_string(t.offset) + ", \"n_bytes\": " + std::to_string(t.n_bytes) + "}";
    n_params += t.n_elements();
    n_bytes += t.n_bytes;
  }
  char totals[160];
  std::snprintf(totals, sizeof totals, "], \"n_params\": %" PRId64 ", \"tensor_bytes\": %" PRIu64 ", \"bits_per_weight\": %.3f",
                n_params, n_bytes, n_params ? 8.0 * static_cast<double>(n_bytes) / static_cast<double>(n_params) : 0.0);
  return out + totals;
}

// Sliding-window layers (gemma3, phi3, gpt-oss): how many, their window and
// rope base (the last local layer's), for inspect's two outputs.
struct SlidingLayers {
  int64_t n_local = 0, window = 0;
  float rope_base = 0;
};
SlidingLayers sliding_layers(const ModelConfig& c) {
  SlidingLayers s{.rope_base = c.rope_freq_base};
  for (const LayerConfig& l : c.layers) {
    if (l.sliding_window == 0) continue;
    ++s.n_local, s.window = l.sliding_window, s.rope_base = c.ropes[l.rope].freq_base;
  }
  return s;
}

// `inspect --json`'s "model" member: what the text output's model lines say.
std::string inspect_model_json(const Model& m) {
  const ModelConfig& c = m.config;
  std::string out = "\"model\": {\"arch\": ";
  api::append_json_string(out, c.arch_name);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                ", \"n_layer\": %" PRId64 ", \"n_embd\": %" PRId64 ", \"n_head\": %" PRId64 ", \"n_head_kv\": %" PRId64
                ", \"head_dim\": %" PRId64 ", \"n_ff\": %" PRId64 ", \"n_vocab\": %" PRId64 ", \"n_ctx_train\": %" PRId64
                ", \"rope_freq_base\": %.9g, \"tied_output\": %s, \"rope_freqs\": %s",
                c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab, c.n_ctx_train,
                static_cast<double>(c.rope_freq_base), c.tied_output ? "true" : "false", m.rope_freqs ? "true" : "false");
  out += buf;
  if (const SlidingLayers sw = sliding_layers(c); sw.n_local > 0) {
    std::snprintf(buf, sizeof buf,
                  ", \"sliding_window\": {\"window\": %" PRId64 ", \"n_layers\": %" PRId64 ", \"rope_freq_base\": %.9g}",
                  sw.window, sw.n_local, static_cast<double>(sw.rope_base));
    out += buf;
  } else {
    out += ", \"sliding_window\": null";
  }
  if (m.rope_factors_long) {
    std::snprintf(buf, sizeof buf, ", \"long_rope\": {\"original_context\": %" PRId64 ", \"attn_factor\": %.9g}",
                  c.rope_orig_ctx, static_cast<double>(c.rope_attn_factor));
    out += buf;
  } else {
    out += ", \"long_rope\": null";
  }
  return out + "}";
}

// The --ids list sizes everything `logits` allocates: an F32 KV cache of
// n_ids tokens, one forward's scratch with n_ids logits rows, and the JSON
// text of those rows (up to 14 bytes a value). ResourceExhausted when that
// does not fit in the memory available now.
Status check_logits_fit(const ModelConfig& c, int64_t n_ids) {
  const uint64_t n_values = saturating_mul(static_cast<uint64_t>(n_ids), static_cast<uint64_t>(c.n_vocab));
  const uint64_t need = saturating_add(saturating_add(KvStorage::bytes_for(c, 1, n_ids, KvType::kF32),
                                                      ModelRunner::step_bytes(c, n_ids, n_ids)),
                                       saturating_mul(n_values, 14));
  RETURN_IF_ERROR(check_memory_budget(need, "the KV cache, logits and output of " + std::to_string(n_ids) +
                                                " tokens (" + std::to_string(c.n_vocab) + " logits each)",
                                      available_memory_bytes()));
  return {};
}

}  // namespace

int cmd_logits(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(argc, argv, first, "logits", "--model PATH --ids 1,2,3",
                            {{"model", true, "GGUF model file"},
                             {"ids", true, "comma-separated token ids, fed in one batch"},
                             {"threads", true, "compute threads (default: all cores)"},
                             {"kv-type", true, "KV cache type: f32 (default, the reference), f16 or q8_0"}},
                            &code);
  if (!args) return code;
  if (!args->has("model") || !args->has("ids")) return report_error("logits", invalid_argument("--model and --ids are required"));
  KvType kv_type = KvType::kF32;
  if (!parse_kv_type(args->get_or("kv-type", "f32").c_str(), &kv_type)) {
    return report_error("logits", invalid_argument("--kv-type must be f32, f16 or q8_0"));
  }
  auto ids = parse_id_list(*args->get("ids"));
  if (!ids.ok()) return report_error("logits", ids.status());
  if (ids->empty()) return report_error("logits", invalid_argument("--ids is empty"));
  auto threads = args->get_int_in("threads", 0, 0, kMaxThreads);
  if (!threads.ok()) return report_error("logits", threads.status());
  auto loaded = load_model_with_progress(*args->get("model"));
  if (!loaded.ok()) return report_error("logits", loaded.status());
  const Model& model = *loaded->model;
  if (Status st = check_logits_fit(model.config, static_cast<int64_t>(ids->size())); !st.ok()) {
    return report_error("logits", st);
  }
  ThreadPool pool(static_cast<int>(*threads));
  if (!kv_type_fits(kv_type, model.config.kv_dim())) {
    return report_error("logits", invalid_argument(std::string("--kv-type ") + kv_type_name(kv_type) +
                                                   " needs K/V rows of a multiple of 32 values; this model has " +
                                                   std::to_string(model.config.kv_dim())));
  }
  warn_kv_type(model.config, kv_type);
  ReferenceForward fwd(model, static_cast<int64_t>(ids->size()), &pool, loaded->weights, kv_type);
  auto logits = fwd.forward(*ids, /*all_logits=*/true);
  if (!logits.ok()) return report_error("logits", logits.status());
  const int64_t n_vocab = model.config.n_vocab;
  std::string out = "{\"logits\": [";
  out.reserve(logits->size() * 14);
  for (size_t t = 0; t < ids->size(); ++t) {
    out += t ? ",\n[" : "\n[";
    for (int64_t i = 0; i < n_vocab; ++i) {
      if (i) out += ',';
      append_float(out, (*logits)[t * n_vocab + i]);
    }
    out += ']';
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

int cmd_generate(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(
      argc, argv, first, "generate", "[--model PATH] (--prompt TEXT | --prompt-ids 1,2,3) [-n N] [flags]",
      {{"model", true, "GGUF model file (default: the built-in demo model)"},
       {"prompt", true, "prompt text (tokenized with the model's tokenizer, BOS as the model asks)"},
       {"prompt-ids", true, "prompt as comma-separated token ids (fed verbatim)"},
       {"n", true, "tokens to generate at most (default 32)"},
       {"temperature", true, "0 = greedy (default 0.8)"},
       {"top-k", true, "keep the k most likely tokens (default 40, 0 = off)"},
       {"top-p", true, "nucleus sampling (default 0.95, 1 = off)"},
       {"seed", true, "sampling seed (default 42)"},
       {"threads", true, "compute threads (default: all cores)"},
       {"ctx", true, "context size in tokens (default: prompt + n)"},
       {"kv-type", true, "KV cache type: f16 (default), q8_0 or f32"},
       {"ignore-eos", false, "do not stop at the end-of-sequence token"},
       {"speculative", true,
        "off (default without --draft-model), ngram (n-gram / prompt-lookup drafts) or draft (drafts from "
        "--draft-model; the default with it): lossless speculative decoding"},
       {"draft-model", true, "GGUF draft model with the model's vocabulary: speculative drafts from it"},
       {"draft-p-min", true, "the draft model drafts while it gives its token at least this probability (default 0.8; 0: always)"},
       {"spec-draft-max", true, "speculative draft tokens per step at most (default 8, 1 to 32)"},
       {"spec-ngram-min", true, "shortest n-gram looked up for a draft (default 2)"},
       {"json", false,
        "print {prompt_ids, generated_ids, text, finish_reason, prefill_tokens_per_s, decode_tokens_per_s, "
        "spec_draft_tokens, spec_accepted_tokens, spec_passes} as one JSON object"}},
      &code);
  if (!args) return code;
  if (args->has("prompt") == args->has("prompt-ids")) {
    return report_error("generate", invalid_argument("give exactly one of --prompt and --prompt-ids"));
  }
  auto n_gen = args->get_int("n", 32);
  auto temperature = args->get_double("temperature", 0.8);
  auto top_k = args->get_int_in("top-k", 40, 0, INT32_MAX);
  auto top_p = args->get_double("top-p", 0.95);
  auto seed = args->get_int("seed", 42);
  auto threads = args->get_int_in("threads", 0, 0, kMaxThreads);
  auto n_ctx = args->get_int("ctx", 0);
  auto spec_draft_max = args->get_int_in("spec-draft-max", 8, 1, kMaxSpecDraft);
  auto spec_ngram_min = args->get_int_in("spec-ngram-min", 2, 1, spec::kMaxNgram);
  auto draft_p_min = args->get_double("draft-p-min", EngineConfig{}.draft_p_min);
  for (const Status* s : {&n_gen.status(), &temperature.status(), &top_k.status(), &top_p.status(), &seed.status(),
                          &threads.status(), &n_ctx.status(), &spec_draft_max.status(), &spec_ngram_min.status(),
                          &draft_p_min.status()}) {
    if (!s->ok()) return report_error("generate", *s);
  }
  if (!(*draft_p_min >= 0 && *draft_p_min <= 1)) {
    return report_error("generate", invalid_argument("--draft-p-min must be a fraction in [0, 1], got '" +
                                                     args->get_or("draft-p-min", "") + "'"));
  }
  if (*n_gen < 1 || *n_gen > (1 << 20)) return report_error("generate", invalid_argument("-n must be in [1, 1048576]"));
  if (*n_ctx < 0 || *n_ctx > INT32_MAX) {
    return report_error("generate", invalid_argument("--ctx must be in [0, " + std::to_string(INT32_MAX) + "]"));
  }
  if (!(*temperature >= 0)) return report_error("generate", invalid_argument("--temperature must be >= 0"));
  if (!(*top_p > 0 && *top_p <= 1)) return report_error("generate", invalid_argument("--top-p must be in (0, 1]"));
  KvType kv_type = KvType::kF16;
  if (!parse_kv_type(args->get_or("kv-type", "f16").c_str(), &kv_type)) {
    return report_error("generate", invalid_argument("--kv-type must be f16, q8_0 or f32"));
  }
  const std::string draft_path = args->get_or("draft-model", "");
  if (args->has("draft-model") && draft_path.empty()) {
    return report_error("generate", invalid_argument("--draft-model needs a path"));
  }
  const std::string spec_value = args->get_or("speculative", "");
  if (args->has("speculative") && spec_value != "off" && spec_value != "ngram" && spec_value != "draft") {
    return report_error("generate", invalid_argument("--speculative must be off, ngram or draft, got '" + spec_value + "'"));
  }
  auto speculative = resolve_spec_method(spec_value, "--speculative " + spec_value, draft_path, "--draft-model " + draft_path,
                                         /*config_sources=*/false);
  if (!speculative.ok()) return report_error("generate", speculative.status());

  auto model_path = args->has("model") ? Result<std::string>(*args->get("model")) : default_model_path();
  if (!model_path.ok()) return report_error("generate", model_path.status());
  auto loaded = load_model_with_progress(*model_path);
  if (!loaded.ok()) return report_error("generate", loaded.status());
  const Model& model = *loaded->model;
  auto tokenizer = Tokenizer::from_gguf(*model.file);
  if (!tokenizer.ok()) return report_error("generate", tokenizer.status());
  std::unique_ptr<LoadedDraft> draft;
  if (!draft_path.empty()) {
    auto d = load_draft_model(draft_path, "--draft-model " + draft_path, model, **tokenizer);
    if (!d.ok()) return report_error("generate", d.status());
    draft = std::move(d).value();
  }

  Request request{.id = "generate"};
  if (args->has("prompt-ids")) {
    auto ids = parse_id_list(*args->get("prompt-ids"));
    if (!ids.ok()) return report_error("generate", ids.status());
    request.prompt_ids = *ids;
  } else {
    request.prompt_ids = (*tokenizer)->encode(*args->get("prompt"), EncodeOptions{.add_special = true});
  }
  if (request.prompt_ids.empty()) return report_error("generate", invalid_argument("the prompt has no tokens"));
  const int64_t n_prompt = static_cast<int64_t>(request.prompt_ids.size());
  request.sampling.temperature = static_cast<float>(*temperature);
  request.sampling.top_k = static_cast<int32_t>(*top_k);
  request.sampling.top_p = static_cast<float>(*top_p);
  request.sampling.seed = static_cast<uint64_t>(*seed);
  request.stop.max_tokens = static_cast<int32_t>(*n_gen);
  request.stop.ignore_eos = args->has("ignore-eos");
  request.return_token_ids = true;

  const int64_t ctx = *n_ctx > 0 ? *n_ctx : n_prompt + *n_gen;
  EngineConfig ec{.n_ctx = ctx, .max_seqs = 1, .n_kv_tokens = ctx,
                  .kv_type = kv_type, .n_threads = static_cast<int>(*threads),
                  .speculative = *speculative != "off",
                  .spec_draft_max = static_cast<int32_t>(*spec_draft_max),
                  .spec_ngram_min = static_cast<int32_t>(*spec_ngram_min),
                  .spec_ngram_max = std::max(static_cast<int32_t>(*spec_ngram_min), 4)};
  attach_draft_model(draft.get(), /*draft_slots=*/1, &ec);
  ec.draft_p_min = static_cast<float>(*draft_p_min);
  const std::string ctx_source = *n_ctx > 0 ? "--ctx " + std::to_string(*n_ctx)
                                            : "the prompt (" + std::to_string(n_prompt) + " tokens) + -n " +
                                                  std::to_string(*n_gen);
  auto engine = create_engine(model, **tokenizer, ec, {.ctx = ctx_source, .parallel = "generate (one sequence)"}, loaded->weights);
  if (!engine.ok()) return report_error("generate", engine.status());
  const bool json = args->has("json");
  const std::vector<int32_t> prompt_ids = request.prompt_ids;
  auto channel = (*engine)->submit(std::move(request));
  std::vector<int32_t> generated;
  std::string text;
  Event last;
  bool done = false;
  while (!done) {
    for (Event& e : channel->wait_and_drain(std::chrono::milliseconds(100))) {
      generated.insert(generated.end(), e.token_ids.begin(), e.token_ids.end());
      if (e.kind == EventKind::kText) {
        text += e.text;
        if (!json) {
          std::fwrite(e.text.data(), 1, e.text.size(), stdout);
          std::fflush(stdout);
        }
        continue;
      }
      last = std::move(e);
      done = true;
    }
  }
  if (last.kind == EventKind::kError) return report_error("generate", last.error);
  (*engine)->stop();  // its last counters published
  const EngineStats stats = (*engine)->stats();
  // Rates from the engine's own timings (timing the process would add the
  // model load): prefill = prompt tokens computed / (scheduled -> first
  // token), decode = tokens after the first / (first -> last token).
  const Timings& t = last.timings;
  const double prefill_ms = t.t_prefill_ms(), tg_ms = t.t_decode_ms();
  const int64_t n_out = last.usage.n_generated_tokens;
  const int64_t n_prefilled = n_prompt - last.usage.n_cached_tokens;
  // A rate with nothing to measure (-n 1: no decode step; a prompt served from the cache: no
  // prefill) is no rate: null in --json, left out of the log line.
  const bool has_prefill = n_prefilled > 0 && prefill_ms > 0;
  const bool has_decode = n_out > 1 && tg_ms > 0;
  const double prefill_tps = has_prefill ? n_prefilled * 1000.0 / prefill_ms : 0.0;
  const double decode_tps = has_decode ? (n_out - 1) * 1000.0 / tg_ms : 0.0;
  auto rate = [](bool has, double tps) {
    if (!has) return std::string("null");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", tps);
    return std::string(buf);
  };
  if (json) {
    std::string out = "{\"prompt_ids\": ";
    append_ids(out, prompt_ids);
    out += ", \"generated_ids\": ";
    append_ids(out, generated);
    out += ", \"text\": ";
    api::append_json_string(out, text);
    out += ", \"finish_reason\": ";
    api::append_json_string(out, finish_reason_name(last.finish));
    char rates[320];
    std::snprintf(rates, sizeof rates,
                  ", \"prefill_tokens_per_s\": %s, \"decode_tokens_per_s\": %s, \"spec_draft_tokens\": %lld, "
                  "\"spec_accepted_tokens\": %lld, \"spec_passes\": %lld}\n",
                  rate(has_prefill, prefill_tps).c_str(), rate(has_decode, decode_tps).c_str(),
                  static_cast<long long>(stats.n_spec_draft_tokens),
                  static_cast<long long>(stats.n_spec_accepted_tokens), static_cast<long long>(stats.n_spec_passes));
    out += rates;
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);  // the text before the stats line on stderr
  if (has_decode) {
    log::info("generated", {{"t_load_ms", loaded->t_load_ms}, {"n_prompt_tokens", n_prompt},
                            {"t_prefill_ms", prefill_ms}, {"n_generated_tokens", n_out},
                            {"prefill_tokens_per_s", prefill_tps}, {"tokens_per_s", decode_tps},
                            {"finish", finish_reason_name(last.finish)}});
  } else {  // no decode step: no decode rate (a fresh engine always prefills the prompt)
    log::info("generated", {{"t_load_ms", loaded->t_load_ms}, {"n_prompt_tokens", n_prompt},
                            {"t_prefill_ms", prefill_ms}, {"n_generated_tokens", n_out},
                            {"prefill_tokens_per_s", prefill_tps}, {"finish", finish_reason_name(last.finish)}});
  }
  return kExitOk;
}

int cmd_inspect(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(argc, argv, first, "inspect", "--model PATH [--all] [--json]",
                            {{"model", true, "GGUF model file"},
                             {"all", false, "print long arrays and strings in full"},
                             {"json", false,
                              "print one JSON object: file, version, alignment, file_size, metadata (arrays as "
                              "{type, count, items}), tensors, n_params, tensor_bytes, bits_per_weight and model "
                              "(or model_error when it does not load)"}},
                            &code);
  if (!args) return code;
  if (!args->has("model")) return report_error("inspect", invalid_argument("--model is required"));
  auto file = GgufFile::open(*args->get("model"));
  if (!file.ok()) return report_error("inspect", file.status());
  const GgufFile& f = **file;
  if (args->has("json")) {
    std::string out = inspect_file_json(f, args->has("all"));
    auto model = load_model(std::move(file).value());
    if (model.ok()) {
      out += ",\n" + inspect_model_json(**model) + "}\n";
    } else {
      out += ",\n\"model\": null, \"model_error\": ";
      api::append_json_string(out, model.status().to_string());
      out += "}\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return model.ok() ? kExitOk : kExitRuntime;
  }
  std::printf("file: %s\nGGUF version %u, alignment %" PRIu64 ", %zu metadata keys, %zu tensors, %" PRIu64 " bytes\n",
              f.path().c_str(), f.version(), f.alignment(), f.metadata().size(), f.tensors().size(), f.file_size());
  if (auto desc = f.get_string("general.description"); desc.ok()) std::printf("description: %s\n", desc->c_str());
  std::printf("\nmetadata:\n");
  for (const auto& [key, value] : f.metadata()) {
    std::printf("  %-48s %s\n", key.c_str(), describe_value(value, args->has("all")).c_str());
  }
  std::printf("\ntensors:\n");
  int64_t n_params = 0;
  uint64_t n_bytes = 0;
  for (const auto& t : f.tensors()) {
    std::string shape;
    for (int d = 0; d < t.n_dims; ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
    std::printf("  %-40s %-6s [%s] %" PRIu64 " bytes\n", t.name.c_str(), ggml_type_name(t.type).c_str(), shape.c_str(),
                t.n_bytes);
    n_params += t.n_elements();
    n_bytes += t.n_bytes;
  }
  std::printf("\nparameters: %" PRId64 " (%.3f M), tensor data: %.2f MiB, %.3f bits/weight\n", n_params, n_params / 1e6,
              n_bytes / 1048576.0, n_params ? 8.0 * n_bytes / n_params : 0.0);
  auto model = load_model(std::move(file).value());
  if (!model.ok()) {
    std::printf("model: not loadable: %s\n", model.status().to_string().c_str());
    return kExitRuntime;
  }
  const ModelConfig& c = (*model)->config;
  std::printf("model: %s, %" PRId64 " layers, n_embd %" PRId64 ", %" PRId64 " heads (%" PRId64 " kv, head_dim %" PRId64
              "), n_ff %" PRId64 ", vocab %" PRId64 ", context %" PRId64 ", rope base %g%s%s\n",
              c.arch_name.c_str(), c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab,
              c.n_ctx_train, c.rope_freq_base, c.tied_output ? ", tied output" : "",
              (*model)->rope_freqs ? ", rope_freqs" : "");
  if (const SlidingLayers sw = sliding_layers(c); sw.n_local > 0) {
    std::printf("sliding window: %" PRId64 " positions on %" PRId64 " of %" PRId64 " layers (rope base %g there)\n",
                sw.window, sw.n_local, c.n_layer, static_cast<double>(sw.rope_base));
  }
  if ((*model)->rope_factors_long) {
    std::printf("LongRoPE: long factors past %" PRId64 " tokens of context, attention factor %g\n", c.rope_orig_ctx,
                c.rope_attn_factor);
  }
  return kExitOk;
}

}  // namespace zl::cli
