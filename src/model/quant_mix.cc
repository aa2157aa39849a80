#include "model/quant_mix.h"

#include <array>
#include <cctype>
#include <cstdlib>

namespace zl {
namespace {

constexpr std::array<std::pair<const char*, std::pair<GgmlType, uint32_t>>, 4> kMixes = {{
    {"Q4_K_M", {GgmlType::kQ4_K, 15}},
    {"Q4_K_S", {GgmlType::kQ4_K, 14}},
    {"Q5_K_M", {GgmlType::kQ5_K, 17}},
    {"Q3_K_M", {GgmlType::kQ3_K, 12}},
}};

// llama.cpp's use_more_bits: the first and last eighth of the layers and
// every third one in between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The layer of "blk.<i>.…", or -1.
int64_t layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  return std::strtoll(std::string(name.substr(4)).c_str(), nullptr, 10);
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace

std::optional<QuantMix> parse_quant_mix(std::string_view name) {
  for (const auto& [n, v] : kMixes) {
    const std::string_view want = n;
    if (want.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < want.size(); ++i) eq = eq && std::toupper(static_cast<unsigned char>(name[i])) == want[i];
    if (eq) return QuantMix{.name = n, .base = v.first, .file_type = v.second};
  }
  return std::nullopt;
}

std::string quant_mix_names() {
  std::string out;
  for (const auto& m : kMixes) out += (out.empty() ? "" : ", ") + std::string(m.first);
  return out;
}

GgmlType mix_tensor_type(const QuantMix& mix, std::string_view name, int64_t n_layer) {
  const bool q4_k_m = mix.name == "Q4_K_M", q5_k_m = mix.name == "Q5_K_M";
  const bool q4_k_s = mix.name == "Q4_K_S", q3_k_m = mix.name == "Q3_K_M";
  if (name == "output.weight") return GgmlType::kQ6_K;
  const int64_t il = layer_of(name);
  if (il < 0) return mix.base;  // token_embd
  // (Dense models have one attn_v and one ffn_down per layer, so
  // llama.cpp's counters of them equal the layer index.)
  if (contains(name, "attn_v.weight")) {
    if (q3_k_m) return il < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    if ((q4_k_m || q5_k_m) && use_more_bits(il, n_layer)) return GgmlType::kQ6_K;
    if (q4_k_s && il < 4) return GgmlType::kQ5_K;
    return mix.base;
  }
  if (contains(name, "ffn_down")) {
    if (q3_k_m) return il < n_layer / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    if ((q4_k_m || q5_k_m) && use_more_bits(il, n_layer)) return GgmlType::kQ6_K;
    if (q4_k_s && il < n_layer / 8) return GgmlType::kQ5_K;
    return mix.base;
  }
  if (contains(name, "attn_output.weight") && q3_k_m) return GgmlType::kQ4_K;
  return mix.base;
}

}  // namespace zl
