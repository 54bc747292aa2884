#include "grammar/utf8.h"

namespace tokenmill::grammar {

int utf8_continuation_bytes(uint8_t lead) {
  if (lead < 0x80) return 0;
  if (lead == 0xC0 || lead == 0xC1 || lead >= 0xF5) return -1;  // only overlong or past U+10FFFF
  if ((lead & 0xE0) == 0xC0) return 1;
  if ((lead & 0xF0) == 0xE0) return 2;
  if ((lead & 0xF8) == 0xF0) return 3;
  return -1;
}

bool utf8_scalar_ok(uint32_t cp, int length) {
  static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
  if (length < 1 || length > 4) return false;
  if (cp < kMinForLength[length - 1]) return false;  // overlong
  if (cp >= 0xD800 && cp <= 0xDFFF) return false;    // surrogate
  return cp <= 0x10FFFF;
}

std::optional<uint32_t> decode_utf8(std::string_view text, size_t& i) {
  if (i >= text.size()) return std::nullopt;
  const auto lead = static_cast<uint8_t>(text[i]);
  const int extra = utf8_continuation_bytes(lead);
  if (extra < 0) return std::nullopt;
  if (extra == 0) {
    ++i;
    return lead;
  }
  if (i + static_cast<size_t>(extra) >= text.size()) return std::nullopt;  // truncated
  uint32_t cp = lead & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) {
    const auto b = static_cast<uint8_t>(text[i + static_cast<size_t>(k)]);
    if ((b & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (!utf8_scalar_ok(cp, extra + 1)) return std::nullopt;
  i += static_cast<size_t>(extra) + 1;
  return cp;
}

}  // namespace tokenmill::grammar
