// UTF-8 encoding and decoding, and code-point range tables: the one decoder of the text code (text metrics,
// WordPiece tokenizer, corpus hygiene). The callers differ only in what an invalid byte becomes, so the policy is a
// parameter and the decoding loop is written once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace daei {

inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// What an invalid byte becomes. Valid UTF-8 is the shortest form of a scalar value (no overlong forms, no
// surrogates, nothing above U+10FFFF); everything else is invalid.
enum class InvalidUtf8 {
  kReplaceEachByte,  // one U+FFFD per invalid byte, decoding resumes at the next byte (the text metrics)
  kDrop,             // an invalid sequence (its lead byte and the continuation bytes read with it) is dropped,
                     // like Python's decode(errors="ignore") (the WordPiece tokenizer, as BERT reads text)
  kStop,             // decoding stops at the first invalid byte and returns false (corpus hygiene)
};

// Decodes s into out (when out is not null, code points are appended). Returns false when s held invalid bytes.
inline bool decode_utf8(std::string_view s, InvalidUtf8 policy, std::u32string* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  bool all_valid = true;
  std::size_t i = 0;
  while (i < n) {
    const unsigned char lead = p[i];
    if (lead < 0x80) {
      if (out) out->push_back(lead);
      ++i;
      continue;
    }
    std::size_t len = 0;
    char32_t cp = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
      len = 2, cp = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      len = 3, cp = lead & 0x0F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      len = 4, cp = lead & 0x07;
    }
    // read: the lead byte and the continuation bytes that follow it, up to the length the lead announces.
    std::size_t read = 1;
    for (; read < len && i + read < n && (p[i + read] & 0xC0) == 0x80; ++read) cp = (cp << 6) | (p[i + read] & 0x3F);
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (len > 0 && read == len && !overlong && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF)) {
      if (out) out->push_back(cp);
      i += len;
      continue;
    }
    all_valid = false;
    switch (policy) {
      case InvalidUtf8::kReplaceEachByte:
        if (out) out->push_back(0xFFFD);
        ++i;
        break;
      case InvalidUtf8::kDrop:
        i += read;
        break;
      case InvalidUtf8::kStop:
        return false;
    }
  }
  return all_valid;
}

inline std::u32string decode_utf8(std::string_view s, InvalidUtf8 policy) {
  std::u32string out;
  out.reserve(s.size());
  decode_utf8(s, policy, &out);
  return out;
}

inline bool valid_utf8(std::string_view s) { return decode_utf8(s, InvalidUtf8::kStop, nullptr); }

// A closed range of code points, as the generated Unicode tables (*_tables.inc) list them, sorted and disjoint.
struct CodePointRange {
  uint32_t lo, hi;
};

// Whether c lies in one of the sorted, disjoint ranges r (binary search).
template <std::size_t N>
bool in_ranges(const CodePointRange (&r)[N], char32_t c) {
  std::size_t lo = 0, hi = N;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (c < r[mid].lo) {
      hi = mid;
    } else if (c > r[mid].hi) {
      lo = mid + 1;
    } else {
      return true;
    }
  }
  return false;
}

}  // namespace daei
