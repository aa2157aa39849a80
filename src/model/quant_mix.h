// llama-quantize's named mixes (Q4_K_M, Q4_K_S, Q5_K_M, Q3_K_M): the type
// each weight matrix of a llama-style model gets, so that make-model writes
// files laid out like the ones users download.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "format/ggml_type.h"

namespace zl {

struct QuantMix {
  std::string name;     // "Q4_K_M"
  GgmlType base;        // the type of most matrices (and of token_embd)
  uint32_t file_type;   // general.file_type (llama_ftype)
};

// A mix by name (case-insensitive); nullopt for anything else (plain types
// are parsed by parse_ggml_type).
std::optional<QuantMix> parse_quant_mix(std::string_view name);

// "Q4_K_M, Q4_K_S, Q5_K_M, Q3_K_M".
std::string quant_mix_names();

// The type of tensor `name` ("blk.3.attn_v.weight", "output.weight", …) in
// a model of n_layer layers, by llama.cpp's llama_tensor_get_type rules for
// these mixes (dense models): output Q6_K; attn_v and ffn_down one or two
// steps up in the first, last and every third layer (Q4_K_M, Q5_K_M: Q6_K),
// the first layers (Q4_K_S: Q5_K; Q3_K_M: Q5_K then Q4_K), attn_output Q4_K
// in Q3_K_M; the base type elsewhere.
GgmlType mix_tensor_type(const QuantMix& mix, std::string_view name, int64_t n_layer);

}  // namespace zl
