#include "tokenizer/byte_level.h"

#include <array>

#include "core/utf8.h"

namespace zl::byte_level {
namespace {

bool maps_to_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Tables {
  std::array<std::string, 256> encoded;
  std::array<int16_t, 512> decoded;  // code points < 512 only
  Tables() {
    decoded.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = maps_to_itself(b) ? static_cast<uint32_t>(b) : 256u + n++;
      encoded[b] = utf8::encode(cp);
      decoded[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& encode_byte(uint8_t b) { return tables().encoded[b]; }

void encode(std::string_view bytes, std::string* out) {
  const Tables& t = tables();
  for (char c : bytes) *out += t.encoded[static_cast<uint8_t>(c)];
}

int decode_code_point(uint32_t cp) { return cp < 512 ? tables().decoded[cp] : -1; }

}  // namespace zl::byte_level
