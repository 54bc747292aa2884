#include "tokenizer/unicode.h"

#include <array>

namespace tokenmill::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

constexpr bool byte_maps_to_itself(int b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

struct ByteLevelTables {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 324> to_byte{};  // code points 0..323; -1 = not in the alphabet
};

constexpr ByteLevelTables make_byte_level_tables() {
  ByteLevelTables t{};
  for (auto& b : t.to_byte) b = -1;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    char32_t cp = byte_maps_to_itself(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
    t.to_unicode[b] = cp;
    t.to_byte[cp] = static_cast<int16_t>(b);
  }
  return t;
}

constexpr ByteLevelTables kByteLevel = make_byte_level_tables();

// Decodes the code point of a sequence that utf8_check_sequence accepted.
char32_t decode_sequence(std::string_view s, int len) {
  auto b = [&](int i) { return static_cast<char32_t>(static_cast<uint8_t>(s[i])); };
  switch (len) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void replace_all(std::string_view text, std::string_view from, std::string_view to, std::string& out) {
  size_t pos = 0;
  while (true) {
    size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int utf8_check_sequence(std::string_view text) {
  const uint8_t lead = static_cast<uint8_t>(text[0]);
  if (lead < 0x80) return 1;
  int len = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlongs
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlongs
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return -1;  // continuation byte, C0/C1 or F5..FF
  }
  for (int i = 1; i < len; ++i) {
    if (static_cast<size_t>(i) >= text.size()) return 0;
    const uint8_t c = static_cast<uint8_t>(text[i]);
    const uint8_t min = i == 1 ? lo : 0x80;
    const uint8_t max = i == 1 ? hi : 0xBF;
    if (c < min || c > max) return -i;
  }
  return len;
}

bool is_valid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    int n = utf8_check_sequence(text.substr(pos));
    if (n <= 0) return false;
    pos += static_cast<size_t>(n);
  }
  return true;
}

size_t append_complete_utf8(std::string_view text, bool at_end, std::string& out) {
  size_t pos = 0;
  while (pos < text.size()) {
    int n = utf8_check_sequence(text.substr(pos));
    if (n > 0) {
      out.append(text.substr(pos, static_cast<size_t>(n)));
      pos += static_cast<size_t>(n);
    } else if (n < 0) {
      out.append(kReplacement);
      pos += static_cast<size_t>(-n);
    } else if (at_end) {
      out.append(kReplacement);
      pos = text.size();
    } else {
      break;
    }
  }
  return pos;
}

char32_t byte_to_unicode(uint8_t byte) { return kByteLevel.to_unicode[byte]; }

std::string byte_level_encode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) append_utf8(out, kByteLevel.to_unicode[static_cast<uint8_t>(c)]);
  return out;
}

std::string byte_level_decode(std::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  size_t pos = 0;
  while (pos < encoded.size()) {
    int n = utf8_check_sequence(encoded.substr(pos));
    if (n <= 0) {  // not UTF-8: keep the byte as it is
      out.push_back(encoded[pos++]);
      continue;
    }
    char32_t cp = decode_sequence(encoded.substr(pos), n);
    if (cp < kByteLevel.to_byte.size() && kByteLevel.to_byte[cp] >= 0) {
      out.push_back(static_cast<char>(kByteLevel.to_byte[cp]));
    } else {
      out.append(encoded.substr(pos, static_cast<size_t>(n)));
    }
    pos += static_cast<size_t>(n);
  }
  return out;
}

std::string spm_escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  replace_all(text, " ", kSpmSpace, out);
  return out;
}

std::string spm_unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  replace_all(text, kSpmSpace, " ", out);
  return out;
}

}  // namespace tokenmill::tokenizer
