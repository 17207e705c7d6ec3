// Helpers of poslab-tokenize that need no SentencePiece: UTF-8 validation of whole files (streamed),
// and where the validation split starts. Header-only so the tool stays one translation unit.
#pragma once
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "util/utf8.h"

namespace poslab::tok {

// Bad input: the tool prints "poslab: error: <what>" and exits 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Offset of the first character in [data, data+n) that is not well-formed UTF-8 (util/utf8.h), with `base`
// added, or -1. A sequence cut by the end of the buffer counts as valid only when `more` (the next buffer
// continues it); then `*carry` is how many trailing bytes to carry into the next buffer.
inline int64_t invalid_utf8_at(const char* data, size_t n, int64_t base, bool more, size_t* carry) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  size_t i = 0;
  *carry = 0;
  while (i < n) {
    const size_t len = utf8_lead_length(p[i]);
    if (len == 0) return base + static_cast<int64_t>(i);
    if (i + len > n) {
      for (size_t k = i + 1; k < n; ++k)
        if ((p[k] >> 6) != 0x2) return base + static_cast<int64_t>(i);
      if (!more) return base + static_cast<int64_t>(i);
      *carry = n - i;
      return -1;
    }
    if (utf8_char_at(p + i, len) == 0) return base + static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

// SentencePiece's space marker, U+2581 ('▁'): text holding it decodes with a space in its place.
inline constexpr char kSpaceMarker[] = "\xe2\x96\x81";

// Reads `path` in 1 MiB blocks and refuses it, naming the byte, at the first invalid UTF-8. Returns how many
// U+2581 it holds (a sequence cut by a block's end is carried whole into the next, so none is missed).
inline int64_t check_utf8_file(const std::string& path, const std::string& source) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(source + ": cannot read");
  std::vector<char> buf(1 << 20);
  size_t carry = 0;
  int64_t base = 0, markers = 0;
  while (true) {
    in.read(buf.data() + carry, static_cast<std::streamsize>(buf.size() - carry));
    const size_t n = carry + static_cast<size_t>(in.gcount());
    const bool more = static_cast<bool>(in);
    const int64_t bad = invalid_utf8_at(buf.data(), n, base, more, &carry);
    if (bad >= 0)
      throw InputError(source + ": invalid UTF-8 at byte " + std::to_string(bad) +
                       " (the tokenizer needs UTF-8 text; convert the file, e.g. with iconv)");
    const std::string_view whole(buf.data(), n - carry);
    for (size_t at = whole.find(kSpaceMarker); at != std::string_view::npos; at = whole.find(kSpaceMarker, at + 3)) ++markers;
    if (!more) return markers;
    std::copy(buf.begin() + static_cast<std::ptrdiff_t>(n - carry), buf.begin() + static_cast<std::ptrdiff_t>(n), buf.begin());
    base += static_cast<int64_t>(n - carry);
  }
}

}  // namespace poslab::tok
