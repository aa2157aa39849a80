// GPT-2 byte-level encoding: every byte maps to one printable code point, so
// that byte-level BPE vocabularies can store arbitrary bytes as text.
// Bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF map to themselves; the other 68
// bytes map, in increasing order, to U+0100, U+0101, ... (space -> 'Ġ' U+0120,
// newline -> 'Ċ' U+010A). Tables are built once; lookups are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace zl::byte_level {

// UTF-8 text (1 or 2 bytes) of the code point that stands for byte `b`.
const std::string& encode_byte(uint8_t b);
// Appends the encoding of every byte of `bytes`.
void encode(std::string_view bytes, std::string* out);
// The byte code point `cp` stands for, or -1 if `cp` is not in the mapping.
int decode_code_point(uint32_t cp);

}  // namespace zl::byte_level
