#include "model/make_model.h"

#include <cmath>
#include <cstring>
#include <cstdio>
#include <memory>
#include <unordered_set>
#include <vector>

#include "core/memory.h"
#include "kernels/attention.h"  // attention_simd_head_dim
#include "kernels/quant.h"
#include "format/gguf.h"
#include "model/model.h"  // load_model: the written file must load

namespace zl {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// 65536 standard-normal samples drawn once (Box-Muller on a fixed stream);
// each weight picks one with 16 random bits: fast, deterministic, and normal
// enough for random-weight models.
const std::vector<float>& normal_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    uint64_t s = 0x5eed;
    for (size_t i = 0; i < t.size(); i += 2) {
      double u1 = (static_cast<double>(splitmix64(s) >> 11) + 1.0) / 9007199254740993.0;
      double u2 = static_cast<double>(splitmix64(s) >> 11) / 9007199254740992.0;
      double r = std::sqrt(-2.0 * std::log(u1));
      t[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
      t[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
    }
    return t;
  }();
  return table;
}

// Fills `out` with n values mean + std * N(0,1), keyed by (seed, tensor, row).
void random_row(uint64_t seed, uint64_t tensor_hash, int64_t row, float mean, float std, float* out, int64_t n) {
  const auto& table = normal_table();
  uint64_t s = seed * 0x9e3779b97f4a7c15ull ^ tensor_hash ^ (static_cast<uint64_t>(row) * 0xd1b54a32d192ed03ull);
  for (int64_t i = 0; i < n; i += 4) {
    uint64_t r = splitmix64(s);
    for (int64_t j = 0; j < 4 && i + j < n; ++j) out[i + j] = mean + std * table[(r >> (16 * j)) & 0xffff];
  }
}

uint32_t llama_file_type(GgmlType t) {
  switch (t) {
    case GgmlType::kF32: return 0;
    case GgmlType::kF16: return 1;
    case GgmlType::kQ4_0: return 2;
    case GgmlType::kQ8_0: return 7;
    case GgmlType::kQ4_K: return 15;  // Q4_K_M is the closest named mix
    case GgmlType::kQ6_K: return 18;
    case GgmlType::kBF16: return 32;
    case GgmlType::kQ4_1: return 3;
    case GgmlType::kQ5_0: return 8;
    case GgmlType::kQ2_K: return 10;
    case GgmlType::kQ3_K: return 11;  // Q3_K_S, the closest named mix
    case GgmlType::kQ5_K: return 16;  // Q5_K_S
    case GgmlType::kIQ4_NL: return 25;
    case GgmlType::kIQ4_XS: return 30;
    case GgmlType::kMXFP4: return 38;
    default: return 0;
  }
}

// Llama 3.1/3.2 rope scaling (factor 32, low 1, high 4, original context 8192)
// expressed as per-dimension theta divisors, as converters write rope_freqs.
std::vector<float> llama3_rope_factors(int64_t head_dim, float base) {
  const double factor = 32.0, low_ff = 1.0, high_ff = 4.0, old_ctx = 8192.0;
  const double low_wavelen = old_ctx / low_ff, high_wavelen = old_ctx / high_ff;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(base, static_cast<double>(i) / head_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_ctx / wavelen - low_ff) / (high_ff - low_ff);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// The type a [ne0, ne1] matrix is written in: `type`, or Q8_0/F16 when the
// row length is not a multiple of its block (as llama-quantize does).
GgmlType matrix_type(GgmlType type, int64_t ne0) {
  if (ne0 % ggml_type_traits(static_cast<uint32_t>(type))->block_size == 0) return type;
  return ne0 % 32 == 0 ? GgmlType::kQ8_0 : GgmlType::kF16;
}

// GgufWriter::write fills one tensor at a time in a buffer of its bytes,
// each thread with a row of floats: the largest matrix (every shape
// dimension checked positive; products up to 2^66 overflow) must fit.
Status check_writer_memory(const ModelShape& s, const MakeModelOptions& opts, int n_threads) {
  const int64_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  const bool fused = s.arch == "phi3";  // attn_qkv, and ffn_up with gate and up
  const struct {
    const char* name;
    int64_t ne0, ne1;
  } matrices[] = {{"token_embd", s.n_embd, s.n_vocab},
                  {fused ? "attn_qkv" : "attn_q", s.n_embd, fused ? q_dim + 2 * kv_dim : q_dim},
                  {"attn_k", s.n_embd, kv_dim},
                  {"attn_output", q_dim, s.n_embd},
                  {"ffn_up", s.n_embd, fused ? 2 * s.n_ff : s.n_ff},
                  {"ffn_down", s.n_ff, s.n_embd},
                  {"ffn_gate_exps", s.n_embd, std::max<int64_t>(1, s.n_ff_exp) * std::max<int64_t>(1, s.n_expert)}};
  const uint64_t available = opts.memory_budget ? *opts.memory_budget : available_memory_bytes();
  for (const auto& m : matrices) {
    // (A mix's largest type is Q6_K.)
    const GgmlType t = matrix_type(opts.mix ? GgmlType::kQ6_K : opts.type, m.ne0);
    const std::optional<uint64_t> bytes = checked_mul(row_size(t, m.ne0), static_cast<uint64_t>(m.ne1));
    const uint64_t rows = saturating_mul(saturating_mul(static_cast<uint64_t>(m.ne0), 4), static_cast<uint64_t>(n_threads));
    const std::string what = std::string("the ") + m.name + " tensor [" + std::to_string(m.ne0) + ", " +
                             std::to_string(m.ne1) + "] in " + ggml_type_name(t);
    RETURN_IF_ERROR(check_memory_budget(saturating_add(bytes.value_or(UINT64_MAX), rows), what, available));
  }
  return {};
}

// The shape rules the loader (model.cc) applies, checked before anything is
// written, each with the flags to change. Row lengths that are not a
// multiple of the type's block need no check: matrix_type falls back.
Status check_shape(const ModelShape& s, bool moe, bool gpt_oss) {
  const struct {
    const char* flag;
    int64_t v;
  } dims[] = {{"--n-embd", s.n_embd}, {"--n-layer", s.n_layer}, {"--n-head", s.n_head}, {"--n-head-kv", s.n_head_kv},
              {"--n-ff", s.n_ff},     {"--n-ctx", s.n_ctx}};
  for (const auto& d : dims) {
    if (d.v <= 0) return invalid_argument(std::string(d.flag) + " must be positive, not " + std::to_string(d.v));
  }
  if (s.head_dim < 0) return invalid_argument("--head-dim must be positive, not " + std::to_string(s.head_dim));
  if (s.head_dim == 0 && s.n_embd % s.n_head != 0) {
    return invalid_argument("--n-embd " + std::to_string(s.n_embd) + " is not a multiple of --n-head " +
                            std::to_string(s.n_head) + " (or give --head-dim)");
  }
  const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  if (head_dim % 2 != 0) {
    return invalid_argument("the head dimension " + std::to_string(head_dim) + " must be even (rope rotates pairs)");
  }
  if (s.n_head % s.n_head_kv != 0) {
    return invalid_argument("--n-head " + std::to_string(s.n_head) + " is not a multiple of --n-head-kv " +
                            std::to_string(s.n_head_kv));
  }
  // gpt-oss's attention sinks: only the SIMD kernels compute them
  // (ModelRunner::check_kernels refuses the model otherwise).
  if (gpt_oss && !attention_simd_head_dim(head_dim)) {
    return invalid_argument("gpt-oss's attention sinks need a head dimension that is a multiple of 8 up to " +
                            std::to_string(kMaxHeadDim) + ", not " + std::to_string(head_dim) +
                            " (--n-embd / --n-head, or --head-dim)");
  }
  if (moe) {
    if (s.n_expert <= 0 || s.n_ff_exp <= 0 || s.n_expert_used <= 0) {
      return invalid_argument(s.arch + " needs experts: --n-expert, --n-expert-used and --n-ff-exp positive " +
                              "(or use --shape qwen3-30b-a3b, gpt-oss-20b or tiny-moe)");
    }
    if (s.n_expert_used > s.n_expert) {
      return invalid_argument("--n-expert-used " + std::to_string(s.n_expert_used) + " exceeds --n-expert " +
                              std::to_string(s.n_expert));
    }
  }
  if (s.arch == "gemma3" && s.sliding_window > 0 && s.sliding_window_pattern <= 0) {
    return invalid_argument("the sliding window pattern must be positive");
  }
  return {};
}

// An item of `type` (an integer type) holding v.
GgufValue integer_item(GgufValueType type, int64_t v) {
  switch (type) {
    case GgufValueType::kUint8: return GgufValue::u8(static_cast<uint8_t>(v));
    case GgufValueType::kInt8: return GgufValue::i8(static_cast<int8_t>(v));
    case GgufValueType::kUint16: return GgufValue::u16(static_cast<uint16_t>(v));
    case GgufValueType::kInt16: return GgufValue::i16(static_cast<int16_t>(v));
    case GgufValueType::kUint32: return GgufValue::u32(static_cast<uint32_t>(v));
    case GgufValueType::kUint64: return GgufValue::u64(static_cast<uint64_t>(v));
    case GgufValueType::kInt64: return GgufValue::i64(v);
    default: return GgufValue::i32(static_cast<int32_t>(v));
  }
}

// Pads the tokenizer that `vocab` holds (already copied into w) to n_vocab
// tokens, as llama.cpp's converters pad a vocabulary smaller than the
// embedding: placeholders "[PAD<id>]" (made unique), token type UNUSED
// (never matched in text, never rendered), score -1000 when the vocabulary
// has scores. Merges only name existing tokens and stay as they are.
Status pad_vocabulary(const GgufFile& vocab, int64_t n_vocab, GgufWriter& w) {
  constexpr int32_t kNormal = 1, kUnused = 5;
  const GgufArray& tokens = *vocab.get_array("tokenizer.ggml.tokens");
  const int64_t n_have = static_cast<int64_t>(tokens.items.size());
  std::unordered_set<std::string> seen;
  GgufArray texts{.elem_type = GgufValueType::kString, .items = tokens.items};
  for (const auto& t : tokens.items) {
    if (const std::string* str = t.as_string()) seen.insert(*str);
  }
  for (int64_t id = n_have; id < n_vocab; ++id) {
    std::string text = "[PAD" + std::to_string(id) + "]";
    while (!seen.insert(text).second) text += "_";
    texts.items.push_back(GgufValue::string(std::move(text)));
  }
  w.set("tokenizer.ggml.tokens", GgufValue::array(std::move(texts)));

  const GgufArray* types = vocab.get_array("tokenizer.ggml.token_type");
  GgufArray new_types{.elem_type = types ? types->elem_type : GgufValueType::kInt32};
  if (types) {
    if (static_cast<int64_t>(types->items.size()) != n_have) {
      return invalid_argument("the vocabulary's token_type array does not match its tokens");
    }
    new_types.items = types->items;
  } else {
    new_types.items.assign(n_have, GgufValue::i32(kNormal));
  }
  for (int64_t id = n_have; id < n_vocab; ++id) new_types.items.push_back(integer_item(new_types.elem_type, kUnused));
  w.set("tokenizer.ggml.token_type", GgufValue::array(std::move(new_types)));

  if (const GgufArray* scores = vocab.get_array("tokenizer.ggml.scores")) {
    if (static_cast<int64_t>(scores->items.size()) != n_have) {
      return invalid_argument("the vocabulary's scores array does not match its tokens");
    }
    GgufArray padded{.elem_type = scores->elem_type, .items = scores->items};
    const GgufValue pad = scores->elem_type == GgufValueType::kFloat64 ? GgufValue::f64(-1000.0) : GgufValue::f32(-1000.0f);
    padded.items.resize(n_vocab, pad);
    w.set("tokenizer.ggml.scores", GgufValue::array(std::move(padded)));
  }
  return {};
}

}  // namespace

std::optional<ModelShape> model_shape_preset(const std::string& name) {
  ModelShape s;
  if (name == "tiny") {
    s = {.n_embd = 256, .n_layer = 4, .n_head = 8, .n_head_kv = 4, .n_ff = 768, .n_ctx = 512};
  } else if (name == "stories260k") {
    s = {.n_embd = 64, .n_layer = 5, .n_head = 8, .n_head_kv = 4, .n_ff = 172, .n_ctx = 512};
  } else if (name == "llama3.2-1b") {
    s = {.n_embd = 2048, .n_layer = 16, .n_head = 32, .n_head_kv = 8, .head_dim = 64, .n_ff = 8192,
         .n_ctx = 131072, .rope_freq_base = 500000.0f, .tied_output = true, .llama3_rope = true};
  } else if (name == "tinyllama-1.1b") {
    s = {.n_embd = 2048, .n_layer = 22, .n_head = 32, .n_head_kv = 4, .n_ff = 5632, .n_ctx = 2048};
  } else if (name == "gemma3-1b") {
    s = {.arch = "gemma3", .n_vocab = 262144, .n_embd = 1152, .n_layer = 26, .n_head = 4, .n_head_kv = 1,
         .head_dim = 256, .n_ff = 6912, .n_ctx = 32768, .rope_freq_base = 1000000.0f, .rms_eps = 1e-6f,
         .tied_output = true, .sliding_window = 512, .sliding_window_pattern = 6};
  } else if (name == "phi3.5-mini") {
    s = {.arch = "phi3", .n_vocab = 32064, .n_embd = 3072, .n_layer = 32, .n_head = 32, .n_head_kv = 32,
         .n_ff = 8192, .n_ctx = 131072, .sliding_window = 262144, .rope_orig_ctx = 4096};
  } else if (name == "qwen3-30b-a3b") {
    s = {.arch = "qwen3moe", .n_vocab = 151936, .n_embd = 2048, .n_layer = 48, .n_head = 32, .n_head_kv = 4,
         .head_dim = 128, .n_ff = 6144, .n_ctx = 40960, .rope_freq_base = 1000000.0f, .rms_eps = 1e-6f,
         .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768};
  } else if (name == "gpt-oss-20b") {
    s = {.arch = "gpt-oss", .n_vocab = 201088, .n_embd = 2880, .n_layer = 24, .n_head = 64, .n_head_kv = 8,
         .head_dim = 64, .n_ff = 2880, .n_ctx = 131072, .rope_freq_base = 150000.0f, .sliding_window = 128,
         .rope_orig_ctx = 4096, .yarn_factor = 32.0f, .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880};
  } else if (name == "tiny-moe") {
    // (sliding_window: written for --arch gpt-oss only, whose even layers
    // then attend to the last 32 positions, as tiny-gpt-oss-F32 does.)
    s = {.arch = "qwen3moe", .n_embd = 256, .n_layer = 4, .n_head = 8, .n_head_kv = 4, .n_ff = 768, .n_ctx = 512,
         .sliding_window = 32, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64};
  } else {
    return std::nullopt;
  }
  return s;
}

std::vector<std::string> model_shape_preset_names() {
  return {"tiny", "stories260k", "llama3.2-1b", "tinyllama-1.1b", "gemma3-1b", "phi3.5-mini", "qwen3-30b-a3b", "gpt-oss-20b", "tiny-moe"};
}

Status make_model(const MakeModelOptions& opts, ThreadPool* pool,
                  const std::function<void(uint64_t, uint64_t)>& progress) {
  ModelShape s = opts.shape;
  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3" && s.arch != "gemma3" && s.arch != "phi3" &&
      s.arch != "qwen3moe" && s.arch != "gpt-oss") {
    return invalid_argument("--arch must be llama, qwen2, qwen3, gemma3, phi3, qwen3moe or gpt-oss, not '" + s.arch + "'");
  }
  const bool gpt_oss = s.arch == "gpt-oss";
  const bool moe = s.arch == "qwen3moe" || gpt_oss;
  const bool gemma3 = s.arch == "gemma3", phi3 = s.arch == "phi3";
  auto traits = ggml_type_traits(static_cast<uint32_t>(opts.type));
  if (!traits || !traits->supported) return invalid_argument("unsupported tensor type " + ggml_type_name(opts.type) + " (supported: " + supported_ggml_type_names() + ")");
  RETURN_IF_ERROR(check_shape(s, moe, gpt_oss));
  ASSIGN_OR_RETURN(auto vocab, GgufFile::open(opts.vocab_path));
  const GgufArray* tokens = vocab->get_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->items.empty()) {
    return invalid_argument(opts.vocab_path + " has no tokenizer.ggml.tokens array");
  }
  const int64_t vocab_size = static_cast<int64_t>(tokens->items.size());
  if (s.n_vocab == 0) s.n_vocab = vocab_size;
  if (s.n_vocab < vocab_size) {
    return invalid_argument("the shape's " + std::to_string(s.n_vocab) + " embedding rows are fewer than the " +
                            std::to_string(vocab_size) + " tokens of " + opts.vocab_path +
                            " (give a smaller vocabulary or --n-vocab " + std::to_string(vocab_size) + ")");
  }
  if (s.head_dim == 0) s.head_dim = s.n_embd / s.n_head;
  const int64_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  RETURN_IF_ERROR(check_writer_memory(s, opts, pool ? pool->n_threads() : 1));

  GgufWriter w;
  const std::string a = s.arch + ".";
  w.set("general.architecture", GgufValue::string(s.arch));
  w.set("general.name", GgufValue::string(opts.name.empty() ? "zerolayer random " + s.arch : opts.name));
  w.set("general.file_type", GgufValue::u32(opts.mix ? opts.mix->file_type : llama_file_type(opts.type)));
  w.set("general.quantization_version", GgufValue::u32(2));
  w.set(a + "vocab_size", GgufValue::u32(static_cast<uint32_t>(s.n_vocab)));
  w.set(a + "context_length", GgufValue::u32(static_cast<uint32_t>(s.n_ctx)));
  w.set(a + "embedding_length", GgufValue::u32(static_cast<uint32_t>(s.n_embd)));
  w.set(a + "block_count", GgufValue::u32(static_cast<uint32_t>(s.n_layer)));
  w.set(a + "feed_forward_length", GgufValue::u32(static_cast<uint32_t>(s.n_ff)));
  w.set(a + "attention.head_count", GgufValue::u32(static_cast<uint32_t>(s.n_head)));
  w.set(a + "attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(s.n_head_kv)));
  if (s.head_dim * s.n_head != s.n_embd) {
    w.set(a + "attention.key_length", GgufValue::u32(static_cast<uint32_t>(s.head_dim)));
    w.set(a + "attention.value_length", GgufValue::u32(static_cast<uint32_t>(s.head_dim)));
  }
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(s.rms_eps));
  w.set(a + "rope.freq_base", GgufValue::f32(s.rope_freq_base));
  w.set(a + "rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(s.head_dim)));
  if (s.sliding_window > 0 && (gemma3 || phi3 || gpt_oss)) {
    w.set(a + "attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(s.sliding_window)));
  }
  if (gemma3) {
    w.set(a + "attention.sliding_window_pattern", GgufValue::u32(static_cast<uint32_t>(s.sliding_window_pattern)));
    w.set(a + "rope.freq_base_swa", GgufValue::f32(s.rope_freq_base_swa));
  }
  const bool long_rope = phi3 && s.rope_orig_ctx > 0 && s.rope_orig_ctx < s.n_ctx;
  if (long_rope) {
    const double scale = static_cast<double>(s.n_ctx) / static_cast<double>(s.rope_orig_ctx);
    w.set(a + "rope.scaling.original_context_length", GgufValue::u32(static_cast<uint32_t>(s.rope_orig_ctx)));
    w.set(a + "rope.scaling.attn_factor",
          GgufValue::f32(static_cast<float>(std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(s.rope_orig_ctx))))));
  }
  if (gpt_oss && s.yarn_factor > 1) {
    w.set(a + "rope.scaling.type", GgufValue::string("yarn"));
    w.set(a + "rope.scaling.factor", GgufValue::f32(s.yarn_factor));
    w.set(a + "rope.scaling.original_context_length", GgufValue::u32(static_cast<uint32_t>(s.rope_orig_ctx)));
  }
  if (moe) {
    w.set(a + "expert_count", GgufValue::u32(static_cast<uint32_t>(s.n_expert)));
    w.set(a + "expert_used_count", GgufValue::u32(static_cast<uint32_t>(s.n_expert_used)));
    w.set(a + "expert_feed_forward_length", GgufValue::u32(static_cast<uint32_t>(s.n_ff_exp)));
  }
  for (const auto& [key, value] : vocab->metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
  }
  if (s.n_vocab > vocab_size) RETURN_IF_ERROR(pad_vocabulary(*vocab, s.n_vocab, w));

  const uint64_t seed = opts.seed;
  // A weight matrix [ne0, ne1] in opts.type, falling back to Q8_0/F16 when the
  // row length is not a multiple of the type's block (as llama-quantize does).
  // ne2 > 1: a stack of ne2 matrices (experts), rows numbered across them.
  auto matrix = [&](const std::string& name, int64_t ne0, int64_t ne1, int64_t ne2 = 1, bool f32 = false) {
    GgmlType t = matrix_type(opts.mix ? mix_tensor_type(*opts.mix, name, s.n_layer) : opts.type, ne0);
    if (f32) t = GgmlType::kF32;
    const uint64_t h = hash_name(name);
    std::vector<int64_t> shape = {ne0, ne1};
    if (ne2 > 1) shape.push_back(ne2);
    ne1 *= ne2;
    w.add_tensor(name, t, shape, [=](uint8_t* dst, uint64_t n_bytes) {
      const size_t rb = row_size(t, ne0);
      auto rows = [&](int64_t r0, int64_t r1) {
        std::vector<float> buf(ne0);
        for (int64_t r = r0; r < r1; ++r) {
          random_row(seed, h, r, 0.0f, 0.02f, buf.data(), ne0);
          quantize_row(t, buf.data(), dst + r * rb, ne0);
        }
      };
      if (pool) pool->parallel_for(ne1, rows, 64); else rows(0, ne1);
    });
  };
  auto vector = [&](const std::string& name, int64_t n, float mean, float std) {
    const uint64_t h = hash_name(name);
    w.add_tensor(name, GgmlType::kF32, {n}, [=](uint8_t* dst, uint64_t) {
      random_row(seed, h, 0, mean, std, reinterpret_cast<float*>(dst), n);
    });
  };

  matrix("token_embd.weight", s.n_embd, s.n_vocab);
  vector("output_norm.weight", s.n_embd, 1.0f, 0.05f);
  if (!s.tied_output) matrix("output.weight", s.n_embd, s.n_vocab);
  if (s.llama3_rope) {
    auto factors = llama3_rope_factors(s.head_dim, s.rope_freq_base);
    w.add_tensor("rope_freqs.weight", GgmlType::kF32, {static_cast<int64_t>(factors.size())},
                 [factors](uint8_t* dst, uint64_t n) { std::memcpy(dst, factors.data(), n); });
  }
  if (long_rope) {
    // LongRoPE-like factors: short ones near 1, long ones growing to 40 over
    // the rotated dimensions (what matters for speed is that they exist).
    std::vector<float> short_f, long_f;
    for (int64_t i = 0; i < s.head_dim / 2; ++i) {
      const float t = static_cast<float>(i) / static_cast<float>(s.head_dim / 2);
      short_f.push_back(1.0f + 0.1f * t);
      long_f.push_back(1.0f + 39.0f * t * t);
    }
    // (No structured binding: clang before 16 cannot capture one in a lambda.)
    for (const auto& entry : {std::pair{"rope_factors_long.weight", long_f}, std::pair{"rope_factors_short.weight", short_f}}) {
      const std::vector<float> f = entry.second;
      w.add_tensor(entry.first, GgmlType::kF32, {static_cast<int64_t>(f.size())},
                   [f](uint8_t* dst, uint64_t n) { std::memcpy(dst, f.data(), n); });
    }
  }
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    vector(p + "attn_norm.weight", s.n_embd, 1.0f, 0.05f);
    if (phi3) {
      matrix(p + "attn_qkv.weight", s.n_embd, q_dim + 2 * kv_dim);
    } else {
      matrix(p + "attn_q.weight", s.n_embd, q_dim);
      matrix(p + "attn_k.weight", s.n_embd, kv_dim);
      matrix(p + "attn_v.weight", s.n_embd, kv_dim);
    }
    matrix(p + "attn_output.weight", q_dim, s.n_embd);
    if (s.arch == "qwen2" || gpt_oss) {
      vector(p + "attn_q.bias", q_dim, 0.0f, 0.02f);
      vector(p + "attn_k.bias", kv_dim, 0.0f, 0.02f);
      vector(p + "attn_v.bias", kv_dim, 0.0f, 0.02f);
    }
    if (gpt_oss) {
      vector(p + "attn_output.bias", s.n_embd, 0.0f, 0.02f);
      vector(p + "attn_sinks.weight", s.n_head, 0.0f, 1.0f);
    }
    if (s.arch == "qwen3" || gemma3 || s.arch == "qwen3moe") {  // (gpt-oss has no q/k norms)
      vector(p + "attn_q_norm.weight", s.head_dim, 1.0f, 0.05f);
      vector(p + "attn_k_norm.weight", s.head_dim, 1.0f, 0.05f);
    }
    if (gemma3) vector(p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.05f);
    vector(p + (gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), s.n_embd, 1.0f, 0.05f);
    if (moe) {  // the router stays F32, as llama-quantize leaves it
      matrix(p + "ffn_gate_inp.weight", s.n_embd, s.n_expert, 1, /*f32=*/true);
      matrix(p + "ffn_gate_exps.weight", s.n_embd, s.n_ff_exp, s.n_expert);
      matrix(p + "ffn_up_exps.weight", s.n_embd, s.n_ff_exp, s.n_expert);
      matrix(p + "ffn_down_exps.weight", s.n_ff_exp, s.n_embd, s.n_expert);
      if (gpt_oss) {  // biases, F32
        vector(p + "ffn_gate_inp.bias", s.n_expert, 0.0f, 0.02f);
        matrix(p + "ffn_gate_exps.bias", s.n_ff_exp, s.n_expert, 1, true);
        matrix(p + "ffn_up_exps.bias", s.n_ff_exp, s.n_expert, 1, true);
        matrix(p + "ffn_down_exps.bias", s.n_embd, s.n_expert, 1, true);
      }
      continue;
    }
    if (phi3) {
      matrix(p + "ffn_up.weight", s.n_embd, 2 * s.n_ff);  // gate rows, then up rows
    } else {
      matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
      matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
    }
    matrix(p + "ffn_down.weight", s.n_ff, s.n_embd);
    if (gemma3) vector(p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.05f);
  }
  RETURN_IF_ERROR(w.write(opts.out_path, progress));
  // The file must load (the checks above should make this hold): never
  // leave a file behind that the loader refuses.
  if (auto m = load_model(opts.out_path); !m.ok()) {
    std::remove(opts.out_path.c_str());
    return internal_error("make-model wrote a model its loader refuses (" + m.status().message() + "); removed " +
                          opts.out_path);
  }
  return {};
}

}  // namespace zl
