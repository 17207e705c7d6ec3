// Well-formed UTF-8, one definition for every reader: the char-level tokenizer, meta.pkl's strings and
// poslab-tokenize's streamed check (header-only: that tool links no poslab library).
#pragma once
#include <cstddef>
#include <cstdint>

namespace poslab {

// Length of the sequence a lead byte starts (0: not a lead byte).
inline size_t utf8_lead_length(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
}

// Length of the character at p (n bytes readable), or 0 where it is not well-formed: not a lead byte, cut
// short, a bad continuation byte, an overlong form, a UTF-16 surrogate half (a lone one, as Python's
// surrogatepass writes it, is not text: JSON refuses it), or past U+10FFFF.
inline size_t utf8_char_at(const unsigned char* p, size_t n) {
  const size_t len = n == 0 ? 0 : utf8_lead_length(p[0]);
  if (len == 0 || len > n) return 0;
  uint32_t cp = len == 1 ? p[0] : len == 2 ? p[0] & 0x1F : len == 3 ? p[0] & 0x0F : p[0] & 0x07;
  for (size_t k = 1; k < len; ++k) {
    if ((p[k] >> 6) != 0x2) return 0;
    cp = cp << 6 | (p[k] & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};  // the shortest form only
  if (cp < kMin[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return len;
}

}  // namespace poslab
