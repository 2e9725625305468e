// The tokenisers of the text metrics (eval/metrics.h): NLTK's word tokenizer, sacrebleu's 13a and rouge-score's. They
// apply the reference regular expressions one by one, each as a left-to-right scan over code points with Python's
// non-overlapping re.sub semantics; the comment above each scan gives the pattern it stands for.
#include "model/text/words.h"

#include "core/utf8.h"
#include "model/text/unicode_classes.h"

#include <string>
#include <vector>

namespace daei::metrics {
namespace {

using U32 = std::u32string;

// An invalid byte reads as U+FFFD (no Python reference can hold one; see tests/fixtures/metrics/README.md).
U32 decode(const std::string& s) { return decode_utf8(s, InvalidUtf8::kReplaceEachByte); }

// ---------------------------------------------------------------------------------------------------------------
// Python `re` character classes on str.

#include "model/text/metrics_tables.inc"

bool is_word(char32_t c) {  // \w
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  return in_ranges(kWord, c);
}
bool is_space(char32_t c) {  // \s, str.isspace(), str.split()
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return is_python_space(c);
}
bool is_decimal(char32_t c) {  // \d
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_ranges(kDecimal, c);
}
bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }


// Python (?i) against an ASCII lowercase letter of a pattern: the letter, its capital, and the non-ASCII code
// points `re` also folds onto it (found by matching every code point with Python 3.11).
bool ci_eq(char32_t c, char lower) {
  if (c == static_cast<char32_t>(lower)) return true;
  if (lower >= 'a' && lower <= 'z' && c == static_cast<char32_t>(lower - 'a' + 'A')) return true;
  switch (lower) {
    case 'i': return c == 0x130 || c == 0x131;
    case 'k': return c == 0x212A;
    case 's': return c == 0x17F;
    default: return false;
  }
}

// Case-insensitive literal at position i (apostrophes and other non-letters compare exactly).
bool ci_at(const U32& t, std::size_t i, const char* lit) {
  for (std::size_t k = 0; lit[k]; ++k) {
    if (i + k >= t.size() || !ci_eq(t[i + k], lit[k])) return false;
  }
  return true;
}

bool word_at(const U32& t, std::size_t i) { return i < t.size() && is_word(t[i]); }
// \b at position i: the characters either side differ in \w-ness (outside the string counts as non-word).
bool boundary(const U32& t, std::size_t i) { return (i > 0 && is_word(t[i - 1])) != word_at(t, i); }

void append(U32& out, const char* ascii) {
  for (; *ascii; ++ascii) out.push_back(static_cast<unsigned char>(*ascii));
}

// Python re.sub with a pattern given as `match(t, i) -> length of the match at i, 0 for none` and a replacement
// `emit(out, t, i, len)`; scans left to right, resumes after each match (no pattern here matches empty).
template <class Match, class Emit>
U32 sub(const U32& t, Match match, Emit emit) {
  U32 out;
  out.reserve(t.size() + t.size() / 4 + 8);
  std::size_t i = 0;
  while (i < t.size()) {
    const std::size_t len = match(t, i);
    if (len > 0) {
      emit(out, t, i, len);
      i += len;
    } else {
      out.push_back(t[i]);
      ++i;
    }
  }
  return out;
}

// Pads every character accepted by `pred` with a space on both sides: r"[...]" -> r" \g<0> ".
template <class Pred>
U32 pad_chars(const U32& t, Pred pred) {
  return sub(
      t, [&](const U32& s, std::size_t i) -> std::size_t { return pred(s[i]) ? 1 : 0; },
      [](U32& out, const U32& s, std::size_t i, std::size_t) {
        out.push_back(' ');
        out.push_back(s[i]);
        out.push_back(' ');
      });
}

// Pads every occurrence of a literal: r"lit" -> r" lit ".
U32 pad_literal(const U32& t, const char* lit) {
  const std::size_t n = std::char_traits<char>::length(lit);
  return sub(
      t,
      [&](const U32& s, std::size_t i) -> std::size_t {
        for (std::size_t k = 0; k < n; ++k) {
          if (i + k >= s.size() || s[i + k] != static_cast<unsigned char>(lit[k])) return 0;
        }
        return n;
      },
      [&](U32& out, const U32&, std::size_t, std::size_t) {
        out.push_back(' ');
        append(out, lit);
        out.push_back(' ');
      });
}

// r"(A)(B)" over two single characters, A accepted by `first` and B by `second`, replaced by `repl`, in which
// '1' and '2' stand for \1 and \2 and every other character is literal (" 1 2" is r" \1 \2").
template <class First, class Second>
U32 sub_pair(const U32& t, First first, Second second, const char* repl) {
  return sub(
      t,
      [&](const U32& s, std::size_t i) -> std::size_t {
        return first(s[i]) && i + 1 < s.size() && second(s[i + 1]) ? 2 : 0;
      },
      [&](U32& out, const U32& s, std::size_t i, std::size_t) {
        for (const char* r = repl; *r; ++r) {
          if (*r == '1') {
            out.push_back(s[i]);
          } else if (*r == '2') {
            out.push_back(s[i + 1]);
          } else {
            out.push_back(static_cast<unsigned char>(*r));
          }
        }
      });
}

// r'([^\.])(\.)([CLASS]*)\s*$' -> r"\1 \2 \3 " (spaced_after_period) or r"\1 \2\3 ": the period before the closing
// brackets/quotes and whitespace that end the string. At most one match (the tail after it holds no period).
template <class InClass>
U32 final_period(const U32& t, InClass in_class, bool spaced_after_period) {
  std::size_t e = t.size();
  while (e > 0 && is_space(t[e - 1])) --e;
  while (e > 0 && in_class(t[e - 1])) --e;
  // t[e - 1] must be the period, t[e - 2] a non-period.
  if (e < 2 || t[e - 1] != '.' || t[e - 2] == '.') return t;
  const std::size_t p = e - 1;
  std::size_t a = p + 1;  // greedy class run after the period; the rest is whitespace
  while (a < t.size() && in_class(t[a])) ++a;
  U32 out(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(p));
  out.push_back(' ');
  out.push_back('.');
  if (spaced_after_period) out.push_back(' ');
  out.append(t, p + 1, a - (p + 1));
  out.push_back(' ');
  return out;
}

std::vector<std::string> split_ws(const U32& t) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < t.size()) {
    while (i < t.size() && is_space(t[i])) ++i;
    if (i >= t.size()) break;
    std::string tok;
    while (i < t.size() && !is_space(t[i])) append_utf8(tok, t[i++]);
    out.push_back(std::move(tok));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// NLTKWordTokenizer.tokenize (nltk/tokenize/destructive.py, NLTK 3.8), rule by rule in its order.

U32 nltk_starting_quotes(U32 t) {
  // ([«“‘„]|[`]+) -> " \1 "
  t = sub(
      t,
      [](const U32& s, std::size_t i) -> std::size_t {
        const char32_t c = s[i];
        if (c == U'\u00AB' || c == U'\u201C' || c == U'\u2018' || c == U'\u201E') return 1;
        std::size_t j = i;
        while (j < s.size() && s[j] == '`') ++j;
        return j - i;
      },
      [](U32& out, const U32& s, std::size_t i, std::size_t len) {
        out.push_back(' ');
        out.append(s, i, len);
        out.push_back(' ');
      });
  // ^\" -> ``
  if (!t.empty() && t[0] == '"') {
    t.replace(0, 1, U"``");
  }
  // (``) -> " \1 "
  t = pad_literal(t, "``");
  // ([ \(\[{<])(\"|\'{2}) -> "\1 `` "
  t = sub(
      t,
      [](const U32& s, std::size_t i) -> std::size_t {
        const char32_t c = s[i];
        if (!(c == ' ' || c == '(' || c == '[' || c == '{' || c == '<')) return 0;
        if (i + 1 < s.size() && s[i + 1] == '"') return 2;
        if (i + 2 < s.size() && s[i + 1] == '\'' && s[i + 2] == '\'') return 3;
        return 0;
      },
      [](U32& out, const U32& s, std::size_t i, std::size_t) {
        out.push_back(s[i]);
        append(out, " `` ");
      });
  // (?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b -> "\1 \2". The \b after one \w means the next character is not \w, so of
  // the lookahead only the one-letter alternatives can apply.
  t = sub(
      t,
      [](const U32& s, std::size_t i) -> std::size_t {
        if (s[i] != '\'' || !word_at(s, i + 1) || word_at(s, i + 2)) return 0;
        for (char l : {'m', 't', 's', 'd', 'n'}) {
          if (ci_eq(s[i + 1], l)) return 0;
        }
        return 2;
      },
      [](U32& out, const U32& s, std::size_t i, std::size_t) {
        out.push_back('\'');
        out.push_back(' ');
        out.push_back(s[i + 1]);
      });
  return t;
}

U32 nltk_punctuation(U32 t) {
  // ([^\.])(\.)([\]\)}>"\'»”’ ]*)\s*$ -> "\1 \2 \3 "
  t = final_period(
      t,
      [](char32_t c) {
        return c == ']' || c == ')' || c == '}' || c == '>' || c == '"' || c == '\'' || c == U'\u00BB' ||
               c == U'\u201D' || c == U'\u2019' || c == ' ';
      },
      true);
  // ([:,])([^\d]) -> " \1 \2"
  t = sub_pair(
      t, [](char32_t c) { return c == ':' || c == ','; }, [](char32_t c) { return !is_decimal(c); }, " 1 2");
  // ([:,])$ -> " \1 "   ($: the end, or before a final newline)
  t = sub(
      t,
      [](const U32& s, std::size_t i) -> std::size_t {
        const std::size_t n = s.size();
        return (s[i] == ':' || s[i] == ',') && (i + 1 == n || (i + 2 == n && s[n - 1] == '\n')) ? 1 : 0;
      },
      [](U32& out, const U32& s, std::size_t i, std::size_t) {
        out.push_back(' ');
        out.push_back(s[i]);
        out.push_back(' ');
      });
  // \.{2,} -> " \g<0> "
  t = sub(
      t,
      [](const U32& s, std::size_t i) -> std::size_t {
        std::size_t j = i;
        while (j < s.size() && s[j] == '.') ++j;
        return j - i >= 2 ? j - i : 0;
      },
      [](U32& out, const U32& s, std::size_t i, std::size_t len) {
        out.push_back(' ');
        out.append(s, i, len);
        out.push_back(' ');
      });
  // [;@#$%&] -> " \g<0> "
  t = pad_chars(t, [](char32_t c) { return c == ';' || c == '@' || c == '#' || c == '$' || c == '%' || c == '&'; });
  // ([^\.])(\.)([\]\)}>"\']*)\s*$ -> "\1 \2\3 "
  t = final_period(
      t, [](char32_t c) { return c == ']' || c == ')' || c == '}' || c == '>' || c == '"' || c == '\''; }, false);
  // [?!] -> " \g<0> "
  t = pad_chars(t, [](char32_t c) { return c == '?' || c == '!'; });
  // ([^'])' -> "\1 ' "
  t = sub(
      t,
      [](const U32& s, std::size_t i) -> std::size_t {
        return s[i] != '\'' && i + 2 < s.size() && s[i + 1] == '\'' && s[i + 2] == ' ' ? 3 : 0;
      },
      [](U32& out, const U32& s, std::size_t i, std::size_t) {
        out.push_back(s[i]);
        append(out, " ' ");
      });
  // [*] -> " \g<0> "
  t = pad_chars(t, [](char32_t c) { return c == '*'; });
  return t;
}

U32 nltk_ending_quotes(U32 t) {
  // ([»”’]) -> " \1 "
  t = pad_chars(t, [](char32_t c) { return c == U'\u00BB' || c == U'\u201D' || c == U'\u2019'; });
  // '' -> " '' "
  t = pad_literal(t, "''");
  // " -> " '' "
  t = sub(
      t, [](const U32& s, std::size_t i) -> std::size_t { return s[i] == '"' ? 1 : 0; },
      [](U32& out, const U32&, std::size_t, std::size_t) { append(out, " '' "); });
  // ([^' ])('[sS]|'[mM]|'[dD]|') -> "\1 \2 "
  t = sub(
      t,
      [](const U32& s, std::size_t i) -> std::size_t {
        if (s[i] == '\'' || s[i] == ' ' || i + 1 >= s.size() || s[i + 1] != '\'') return 0;
        if (i + 3 < s.size() && s[i + 3] == ' ') {
          const char32_t x = s[i + 2];
          if (x == 's' || x == 'S' || x == 'm' || x == 'M' || x == 'd' || x == 'D') return 4;
        }
        return i + 2 < s.size() && s[i + 2] == ' ' ? 3 : 0;
      },
      [](U32& out, const U32& s, std::size_t i, std::size_t len) {
        out.push_back(s[i]);
        out.push_back(' ');
        out.append(s, i + 1, len - 2);  // the clitic without the space that closed the match
        out.push_back(' ');
      });
  // ([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) -> "\1 \2 "
  t = sub(
      t,
      [](const U32& s, std::size_t i) -> std::size_t {
        if (s[i] == '\'' || s[i] == ' ' || i + 4 >= s.size() || s[i + 4] != ' ') return 0;
        static const char32_t* const kClitics[] = {U"'ll", U"'LL", U"'re", U"'RE", U"'ve", U"'VE", U"n't", U"N'T"};
        for (const char32_t* c : kClitics) {
          if (s[i + 1] == c[0] && s[i + 2] == c[1] && s[i + 3] == c[2]) return 5;
        }
        return 0;
      },
      [](U32& out, const U32& s, std::size_t i, std::size_t) {
        out.push_back(s[i]);
        out.push_back(' ');
        out.append(s, i + 1, 3);
        out.push_back(' ');
      });
  return t;
}

// (?i)\b(A)(B)\b -> " \1 \2 " (or (?=\s) instead of the closing \b).
U32 nltk_contraction(const U32& t, const char* a, const char* b, bool space_after) {
  const std::size_t la = std::char_traits<char>::length(a), lb = std::char_traits<char>::length(b);
  return sub(
      t,
      [&](const U32& s, std::size_t i) -> std::size_t {
        if (!boundary(s, i) || !ci_at(s, i, a) || !ci_at(s, i + la, b)) return 0;
        const std::size_t e = i + la + lb;
        if (space_after ? !(e < s.size() && is_space(s[e])) : !boundary(s, e)) return 0;
        return la + lb;
      },
      [&](U32& out, const U32& s, std::size_t i, std::size_t) {
        out.push_back(' ');
        out.append(s, i, la);
        out.push_back(' ');
        out.append(s, i + la, lb);
        out.push_back(' ');
      });
}

// (?i) ('t)(B)\b -> " \1 \2 "
U32 nltk_contraction_t(const U32& t, const char* b) {
  const std::size_t lb = std::char_traits<char>::length(b);
  return sub(
      t,
      [&](const U32& s, std::size_t i) -> std::size_t {
        if (s[i] != ' ' || !ci_at(s, i + 1, "'t") || !ci_at(s, i + 3, b) || !boundary(s, i + 3 + lb)) return 0;
        return 3 + lb;
      },
      [&](U32& out, const U32& s, std::size_t i, std::size_t) {
        out.push_back(' ');
        out.append(s, i + 1, 2);
        out.push_back(' ');
        out.append(s, i + 3, lb);
        out.push_back(' ');
      });
}

// ---------------------------------------------------------------------------------------------------------------
// sacrebleu 13a

void replace_all(U32& t, const U32& from, const U32& to) {
  if (from.empty()) return;
  U32 out;
  std::size_t i = 0;
  for (;;) {
    const std::size_t j = t.find(from, i);
    if (j == U32::npos) break;
    out.append(t, i, j - i);
    out += to;
    i = j + from.size();
  }
  if (i == 0) return;
  out.append(t, i, U32::npos);
  t = std::move(out);
}

U32 rstrip(const U32& t) {
  std::size_t e = t.size();
  while (e > 0 && is_space(t[e - 1])) --e;
  return t.substr(0, e);
}

bool in_13a_punct(char32_t c) {  // [\{-\~\[-\` -\&\(-\+\:-\@\/]
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
         (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == '/';
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The tokenisers

std::vector<std::string> word_tokenize(const std::string& s) {
  U32 t = decode(s);
  t = nltk_starting_quotes(std::move(t));
  t = nltk_punctuation(std::move(t));
  // [\]\[\(\)\{\}\<\>] -> " \g<0> "
  t = pad_chars(t, [](char32_t c) {
    return c == ']' || c == '[' || c == '(' || c == ')' || c == '{' || c == '}' || c == '<' || c == '>';
  });
  // -- -> " -- "
  t = pad_literal(t, "--");
  t = U" " + t + U" ";
  t = nltk_ending_quotes(std::move(t));
  // CONTRACTIONS2 then CONTRACTIONS3 (CONTRACTIONS4 is unused by NLTK)
  t = nltk_contraction(t, "can", "not", false);
  t = nltk_contraction(t, "d", "'ye", false);
  t = nltk_contraction(t, "gim", "me", false);
  t = nltk_contraction(t, "gon", "na", false);
  t = nltk_contraction(t, "got", "ta", false);
  t = nltk_contraction(t, "lem", "me", false);
  t = nltk_contraction(t, "more", "'n", false);
  t = nltk_contraction(t, "wan", "na", true);
  t = nltk_contraction_t(t, "is");
  t = nltk_contraction_t(t, "was");
  return split_ws(t);
}

std::vector<std::string> tokenize_13a(const std::string& s) {
  U32 t = rstrip(decode(s));
  replace_all(t, U"<skipped>", U"");
  replace_all(t, U"-\n", U"");
  replace_all(t, U"\n", U" ");
  if (t.find(U'&') != U32::npos) {
    replace_all(t, U"&quot;", U"\"");
    replace_all(t, U"&amp;", U"&");
    replace_all(t, U"&lt;", U"<");
    replace_all(t, U"&gt;", U">");
  }
  t = U" " + t + U" ";
  t = pad_chars(t, in_13a_punct);
  const auto period_or_comma = [](char32_t c) { return c == '.' || c == ','; };
  const auto not_digit = [](char32_t c) { return !is_ascii_digit(c); };
  // ([^0-9])([\.,]) -> "\1 \2 "
  t = sub_pair(t, not_digit, period_or_comma, "1 2 ");
  // ([\.,])([^0-9]) -> " \1 \2"
  t = sub_pair(t, period_or_comma, not_digit, " 1 2");
  // ([0-9])(-) -> "\1 \2 "
  t = sub_pair(t, is_ascii_digit, [](char32_t c) { return c == '-'; }, "1 2 ");
  return split_ws(t);
}

std::vector<std::string> rouge_tokenize(const std::string& s) {
  // text.lower(), then runs of [a-z0-9]. Outside ASCII only U+0130 (lowercases to "i" + U+0307) and U+212A
  // KELVIN SIGN (lowercases to "k") yield ASCII letters.
  const U32 t = decode(s);
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(std::move(cur));
    cur.clear();
  };
  for (char32_t c : t) {
    if (c >= 'A' && c <= 'Z') {
      cur.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      cur.push_back(static_cast<char>(c));
    } else if (c == 0x212A) {
      cur.push_back('k');
    } else if (c == 0x130) {
      cur.push_back('i');
      flush();  // the combining dot above ends the run
    } else {
      flush();
    }
  }
  flush();
  return out;
}

}  // namespace daei::metrics
