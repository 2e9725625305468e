// The text sources of `daei corpus build` (corpus.h): WordNet glosses, GCIDE definitions and quotations, fortunes
// and user files, the text hygiene every text passes, and the clause recombination behind corpus.synthesize_to. The
// build itself (external sort, splits) is corpus.cpp.
#include "data/corpus.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <zlib.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/rng.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------------------------
// Text hygiene

bool normalize_text(const std::string& in, std::string& out) {
  if (!valid_utf8(in)) return false;
  std::string r;
  r.reserve(in.size());
  bool space = false;
  for (unsigned char c : in) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      space = true;
      continue;
    }
    if (c < 0x20 || c == 0x7F) continue;  // other control characters: dropped
    if (space && !r.empty()) r.push_back(' ');
    space = false;
    r.push_back(static_cast<char>(c));
  }
  out = std::move(r);
  return true;
}

int64_t count_words(const std::string& s) {
  int64_t n = 0;
  bool in = false;
  for (char c : s) {
    if (c == ' ') in = false;
    else if (!in) { in = true; ++n; }
  }
  return n;
}

namespace {

std::ifstream open_or_fail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DAEI_CHECK(in, "cannot read corpus source {}: {}", path, std::strerror(errno));
  return in;
}

std::vector<std::string> sorted_files(const std::string& dir, const std::function<bool(const fs::path&)>& keep) {
  DAEI_CHECK(fs::is_directory(dir), "corpus source folder {} does not exist (run launch/setup.sh)", dir);
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && keep(e.path())) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Sources

void read_wordnet(const std::string& dir, const std::function<void(std::string)>& emit) {
  int files = 0;
  for (const char* pos : {"noun", "verb", "adj", "adv"}) {
    const std::string path = dir + "/data." + pos;
    auto in = open_or_fail(path);
    ++files;
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("  ", 0) == 0) continue;  // licence header
      auto bar = line.find(" | ");
      if (bar == std::string::npos) continue;
      std::string gloss = line.substr(bar + 3);
      // definition(s) before the first quote; each "quoted" part is an example sentence
      auto q = gloss.find('"');
      std::string def = gloss.substr(0, q);
      while (!def.empty() && (def.back() == ' ' || def.back() == ';')) def.pop_back();
      if (!def.empty()) emit(def);
      while (q != std::string::npos) {
        auto e = gloss.find('"', q + 1);
        if (e == std::string::npos) break;
        emit(gloss.substr(q + 1, e - q - 1));
        q = gloss.find('"', e + 1);
      }
    }
  }
  DAEI_CHECK(files == 4, "wordnet: data files missing in {}", dir);
}

std::vector<std::string> split_sentences(const std::string& text) {
  static const char* abbrev[] = {"Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "Gen", "Col", "Gov", "Hon", "No",
                                 "U.S", "U.S.A", "vs", "etc", "i.e", "e.g", "Jan", "Feb", "Aug", "Sept", "Oct",
                                 "Nov", "Dec", "Rev", "Lt", "Capt", "Sen", "Rep", "Prof", "Cf", "cf", "esp",
                                 "var", "viz", "pl", "fr", "Gr", "Fig", "fig", "Ave"};
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c != '.' && c != '!' && c != '?') continue;
    size_t j = i + 1;
    while (j < text.size() && (text[j] == '"' || text[j] == '\'' || text[j] == ')')) ++j;
    if (j >= text.size()) break;
    if (text[j] != ' ') continue;
    size_t k = j;
    while (k < text.size() && text[k] == ' ') ++k;
    if (k >= text.size()) break;
    unsigned char nx = text[k];
    if (!(std::isupper(nx) || nx == '"' || nx == '\'' || nx >= 0x80)) continue;
    if (c == '.') {
      size_t w = i;
      while (w > start && text[w - 1] != ' ') --w;
      std::string word = text.substr(w, i - w);
      bool ab = word.size() == 1 && std::isupper(static_cast<unsigned char>(word[0]));  // initials
      for (const char* a : abbrev) ab = ab || word == a;
      if (ab) continue;
    }
    out.push_back(text.substr(start, j - start));
    start = k;
    i = k - 1;
  }
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// GCIDE (Debian dict-gcide): dictd's gcide.index (headword, offset, length; numbers in dictd's base64) and
// gcide.dict.dz (dictzip, which is gzip: read through zlib as one stream).

namespace {

// A dictd number: base64 digits (A-Z a-z 0-9 + /), most significant first.
bool dictd_number(std::string_view s, uint64_t& v) {
  if (s.empty() || s.size() > 10) return false;
  v = 0;
  for (char c : s) {
    int d;
    if (c >= 'A' && c <= 'Z') d = c - 'A';
    else if (c >= 'a' && c <= 'z') d = c - 'a' + 26;
    else if (c >= '0' && c <= '9') d = c - '0' + 52;
    else if (c == '+') d = 62;
    else if (c == '/') d = 63;
    else return false;
    v = v * 64 + uint64_t(d);
  }
  return true;
}

std::string_view trim_view(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
  return s.substr(a, b - a);
}

bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// A subject label: "Anat.", "Mar. Law", "Eccl. Hist.", "Law" (capitalised words, letters, dots and hyphens).
bool is_label(std::string_view s) {
  if (s.empty() || s.size() > 30) return false;
  bool word_start = true;
  for (char c : s) {
    if (c == ' ') { word_start = true; continue; }
    if (word_start) {
      if (!(std::isupper(static_cast<unsigned char>(c)) || c == '&')) return false;
      word_start = false;
    } else if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '.' || c == '-')) {
      return false;
    }
  }
  return true;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

std::string collapse_spaces(const std::string& s) {
  std::string r;
  r.reserve(s.size());
  for (char c : s) {
    if (c == ' ' && (r.empty() || r.back() == ' ')) continue;
    r += c;
  }
  while (!r.empty() && r.back() == ' ') r.pop_back();
  return r;
}

// One paragraph (its lines joined by spaces) as plain text, or "" where markup is left that cannot be removed
// cleanly (accented letters written as "caf['e]", pronunciations).
std::string clean_gcide_paragraph(std::string p) {
  // the attribution of a quotation (" --Shak.", " --Sir T. Browne."), and all after it
  for (size_t i = 0; i + 2 < p.size(); ++i)
    if (p[i] == '-' && p[i + 1] == '-' && (i == 0 || p[i - 1] == ' ') && p[i + 2] != ' ' && p[i + 2] != '-') {
      p.resize(i);
      break;
    }
  // bracketed etymologies, sources and usage labels ("[Obs.]"); a bracket touching a letter is character markup
  std::string r;
  int depth = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '[') {
      if (i > 0 && alnum(p[i - 1])) return {};
      ++depth;
    } else if (c == ']') {
      if (depth == 0 || (i + 1 < p.size() && alnum(p[i + 1]))) return {};
      --depth;
    } else if (depth == 0) {
      r += c;
    }
  }
  if (depth != 0 || r.find('\\') != std::string::npos) return {};
  r = collapse_spaces(r);
  // a leading list of the words a usage note compares: "{To Abandon}, {Desert}, {Forsake}."
  if (starts(r, "{")) {
    size_t i = 0;
    while (i < r.size() && r[i] == '{') {
      const size_t e = r.find('}', i);
      if (e == std::string::npos) break;
      i = e + 1;
      while (i < r.size() && (r[i] == ',' || r[i] == ' ')) ++i;
      if (r.compare(i, 4, "and ") == 0) i += 4;
    }
    if (i > 0 && i < r.size() && r[i] == '.') r = r.substr(i + 1);
  }
  r.erase(std::remove_if(r.begin(), r.end(), [](char c) { return c == '{' || c == '}'; }), r.end());
  // sense numbers ("1.", "(a)", WordNet's "1. 1"), subject labels at the start ("(Anat.)", "(physiol)")
  bool numbered = false;
  for (bool more = true; more;) {
    more = false;
    r = std::string(trim_view(r));
    size_t d = 0;
    while (d < r.size() && std::isdigit(static_cast<unsigned char>(r[d]))) ++d;
    if (d > 0 && d < 4 && d < r.size() && r[d] == '.' && (d + 1 == r.size() || r[d + 1] == ' ')) {
      r.erase(0, d + 1), more = numbered = true;
    } else if (d > 0 && d < 3 && numbered && d < r.size() && r[d] == ' ') {
      r.erase(0, d), more = true;
    } else if (starts(r, "(")) {
      const size_t e = r.find(')');
      if (e != std::string::npos && e <= 41) r.erase(0, e + 1), more = true;
    }
  }
  // the markers of sub-senses after the first: "(a) The markhoor. (b) The secretary bird."
  for (size_t o = r.find(" ("); o != std::string::npos; o = r.find(" (", o + 1))
    if (o > 0 && std::strchr(".;:", r[o - 1]) && o + 4 < r.size() && std::islower(static_cast<unsigned char>(r[o + 2])) &&
        r[o + 3] == ')' && r[o + 4] == ' ')
      r.erase(o, 4);
  // subject labels elsewhere: "{Abdominal ring} (Anat.), a fancied ..."
  for (size_t o = r.find('('); o != std::string::npos; o = r.find('(', o + 1)) {
    const size_t e = r.find(')', o);
    if (e == std::string::npos) break;
    if (is_label(std::string_view(r).substr(o + 1, e - o - 1))) {
      r.erase(o, e - o + 1);
      if (o > 0) --o;
    }
  }
  r = collapse_spaces(r);
  replace_all(r, "; -- ", "; ");
  replace_all(r, ", -- ", ", ");
  replace_all(r, " -- ", ", ");
  for (const char* p2 : {" ,", " .", " ;", " :", " )"}) replace_all(r, p2, p2 + 1);
  replace_all(r, "( ", "(");
  replace_all(r, ",,", ",");
  replace_all(r, "()", "");
  r = collapse_spaces(r);
  while (!r.empty() && (r[0] == ',' || r[0] == ';' || r[0] == ':' || r[0] == ' ')) r.erase(0, 1);
  return r;
}

// A line that closes paragraphs with their source: "[1913 Webster]", "[WordNet 1.5 +PJC]", a lone "[Obs.]".
bool is_source_line(std::string_view t) {
  if (!starts(t, "[")) return false;
  const size_t e = t.find(']');
  if (e == std::string::npos) return false;
  const std::string_view in = t.substr(1, e - 1);
  for (const char* k : {"Webster", "WordNet", "PJC", "Suppl", "Century"})
    if (in.find(k) != std::string_view::npos) return true;
  return e + 1 == t.size();
}

}  // namespace

void gcide_entry_texts(const std::string& entry, const std::function<void(std::string)>& emit) {
  std::vector<std::string_view> lines;
  for (size_t s = 0; s <= entry.size();) {
    size_t e = entry.find('\n', s);
    if (e == std::string::npos) e = entry.size();
    lines.push_back(std::string_view(entry).substr(s, e - s));
    s = e + 1;
  }
  // The head: headword, pronunciation, part of speech, etymology; its brackets may run over several lines, and a
  // line that starts with a pronunciation or a bracket continues it.
  size_t i = 0;
  int depth = 0;
  while (i < lines.size()) {
    const std::string_view t = trim_view(lines[i]);
    if (i > 0 && depth == 0 && !(starts(t, "\\") || starts(t, "([") || (starts(t, "[") && !is_source_line(t))))
      break;
    for (char c : t) depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (depth < 0) depth = 0;
    ++i;
  }
  // The body: paragraphs end at blank lines and source lines; a source line decides the paragraphs since the last
  // one: those from WordNet alone are left out (the wordnet source has them, in WordNet 3.0's words).
  std::vector<std::string> pending;
  std::string para;
  auto end_paragraph = [&] {
    if (!para.empty()) pending.push_back(std::move(para));
    para.clear();
  };
  auto decide = [&](bool keep) {
    end_paragraph();
    if (keep)
      for (auto& p : pending) {
        std::string_view v(p);
        if (starts(v, "Syn:") || starts(v, "Syn.") || starts(v, "Antonym:") || starts(v, "See:")) continue;
        for (const char* label : {"Note:", "Usage:", "Specifically:", "Hence:"})
          if (starts(v, label)) v.remove_prefix(std::strlen(label));
        const std::string text = clean_gcide_paragraph(std::string(v));
        for (auto& s : split_sentences(text)) {
          s = std::string(trim_view(s));
          if (s.find_first_of("\\[]{}*^`|<>_~") != std::string::npos || s.find("--") != std::string::npos) continue;
          if (starts(s, "See ") || starts(s, "Same as ") || starts(s, "Syn") || starts(s, "Cf.")) continue;
          if (s.size() > 4 && s.compare(s.size() - 4, 4, " Cf.") == 0) s.resize(s.size() - 3);
          if (s.empty() || !std::strchr(".!?\"')", s.back())) continue;  // a fragment
          if (std::none_of(s.begin(), s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); }))
            continue;
          emit(std::move(s));
        }
      }
    pending.clear();
  };
  for (; i < lines.size(); ++i) {
    const std::string_view t = trim_view(lines[i]);
    if (t.empty()) {
      end_paragraph();
    } else if (is_source_line(t)) {
      const std::string_view src = t.substr(0, t.find(']'));
      decide(!(src.find("WordNet") != std::string_view::npos && src.find("Webster") == std::string_view::npos));
    } else {
      if (!para.empty()) para += ' ';
      para += t;
    }
  }
  decide(true);
}

void read_gcide(const std::string& dir, const std::function<void(std::string)>& emit) {
  const std::string index_path = dir + "/gcide.index", dict_path = dir + "/gcide.dict.dz";
  for (const auto& p : {index_path, dict_path})
    DAEI_CHECK(fs::is_regular_file(p), "gcide: {} is missing (install the Debian package dict-gcide)", p);
  // The entries, by offset into the uncompressed text (several headwords may share one).
  std::vector<std::pair<uint64_t, uint64_t>> entries;
  {
    auto in = open_or_fail(index_path);
    std::string line;
    int64_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      const size_t t1 = line.find('\t'), t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
      uint64_t off = 0, len = 0;
      DAEI_CHECK(t2 != std::string::npos && dictd_number(std::string_view(line).substr(t1 + 1, t2 - t1 - 1), off) &&
                     dictd_number(std::string_view(line).substr(t2 + 1), len),
                 "gcide: {}:{}: not an index line (headword, offset, length in dictd's base64)", index_path, lineno);
      DAEI_CHECK(len <= (1u << 20), "gcide: {}:{}: an entry of {} bytes (damaged index?)", index_path, lineno, len);
      if (starts(line, "00-")) continue;  // the database's own notes: 00-database-info, 00-web1913-info, ...
      if (len > 0) entries.emplace_back(off, len);
    }
    DAEI_CHECK(!in.bad(), "read error on corpus source {}", index_path);
  }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  DAEI_CHECK(!entries.empty(), "gcide: {} lists no entries", index_path);

  // One pass over the text: a window [base, base + buf.size()) of it, grown to cover each entry, then cut.
  struct GzCloser {
    void operator()(gzFile_s* f) const { gzclose(f); }
  };
  std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(dict_path.c_str(), "rb"));
  DAEI_CHECK(gz, "cannot read corpus source {}: {}", dict_path, std::strerror(errno));
  gzbuffer(gz.get(), 1 << 17);
  std::string buf;      // the text from offset base on
  uint64_t base = 0;
  std::vector<char> chunk(1 << 16);
  bool eof = false, checked_gzip = false;
  auto read_more = [&] {
    const int n = gzread(gz.get(), chunk.data(), unsigned(chunk.size()));
    int err = Z_OK;
    const char* msg = gzerror(gz.get(), &err);
    DAEI_CHECK(n >= 0 && err == Z_OK, "gcide: {}: damaged or truncated ({})", dict_path,
               err == Z_ERRNO ? std::strerror(errno) : msg);
    if (!checked_gzip) {  // zlib would pass a file that is not gzip through as it is
      DAEI_CHECK(!gzdirect(gz.get()), "gcide: {}: not a gzip (dictzip) file", dict_path);
      checked_gzip = true;
    }
    if (n == 0) eof = true;
    buf.append(chunk.data(), size_t(n));
  };
  for (const auto& [off, len] : entries) {
    if (off > base && off - base >= (1u << 20)) {  // the text before off is not needed again (sorted offsets)
      const uint64_t drop = std::min<uint64_t>(off - base, buf.size());
      buf.erase(0, size_t(drop));
      base += drop;
    }
    while (!eof && base + buf.size() < off + len) read_more();
    DAEI_CHECK(base + buf.size() >= off + len,
               "gcide: {} points past the end of {} (an entry at {} of {} bytes, the text has {}): truncated or "
               "damaged", index_path, dict_path, off, len, base + buf.size());
    gcide_entry_texts(buf.substr(size_t(off - base), size_t(len)), emit);
  }
  while (!eof) {  // the rest, so that zlib checks the stream's length and CRC
    read_more();
    buf.clear();
  }
}

void read_fortunes(const std::string& dir, const std::function<void(std::string)>& emit) {
  auto files = sorted_files(dir, [](const fs::path& p) { return !p.has_extension(); });
  DAEI_CHECK(!files.empty(), "fortunes: no fortune files in {} (install the Debian package fortunes)", dir);
  for (const auto& f : files) {
    auto in = open_or_fail(f);
    std::string line, rec;
    auto flush = [&] {
      if (!rec.empty()) emit(rec);
      rec.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%") { flush(); continue; }
      size_t first = line.find_first_not_of(" \t");
      if (first != std::string::npos && line.compare(first, 2, "--") == 0) continue;  // attribution
      rec += line;
      rec += '\n';
    }
    flush();
  }
}

void read_user_file(const std::string& path, const std::string& field, int64_t column,
                    const std::function<void(std::string)>& emit) {
  auto in = open_or_fail(path);
  const std::string ext = fs::path(path).extension().string();
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (ext == ".jsonl") {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json j;
      try {
        j = json::parse(line);
      } catch (const std::exception& e) {
        DAEI_FAIL("{}:{}: not JSON ({})", path, lineno, e.what());
      }
      DAEI_CHECK(j.is_object() && j.contains(field) && j[field].is_string(), "{}:{}: no string field \"{}\"", path,
                 lineno, field);
      emit(j[field].get<std::string>());
    } else if (ext == ".tsv") {
      size_t s = 0;
      for (int64_t c = 0; c < column && s != std::string::npos; ++c) {
        s = line.find('\t', s);
        if (s != std::string::npos) ++s;
      }
      if (s == std::string::npos) continue;  // short row: no text
      emit(line.substr(s, line.find('\t', s) - s));
    } else {
      emit(line);
    }
  }
  DAEI_CHECK(!in.bad(), "read error on corpus source {}", path);
}

// ---------------------------------------------------------------------------------------------------------------
// Reaching a given size from the real sources (corpus.synthesize_to)

void split_clauses(const std::string& text, std::vector<std::string>& out) {
  // Clauses end at ",", ";" or ":" followed by a space (the mark is dropped); the final one keeps its end
  // punctuation. A piece of fewer than two words is glued to the next one (the last to the one before).
  std::vector<std::string> pieces;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if ((c == ',' || c == ';' || c == ':') && i + 1 < text.size() && text[i + 1] == ' ' && count_words(cur) >= 2) {
      pieces.push_back(cur);
      cur.clear();
      ++i;  // the space
      continue;
    }
    cur += c;
  }
  if (!cur.empty()) {
    if (count_words(cur) < 2 && !pieces.empty())
      pieces.back() += text[text.size() - cur.size() - 2] + std::string(" ") + cur;
    else
      pieces.push_back(cur);
  }
  for (auto& p : pieces)
    if (count_words(p) >= 2) out.push_back(std::move(p));
}

int64_t synthesize_clauses(const std::vector<std::string>& clauses, int64_t n, uint64_t seed, int64_t min_words,
                           int64_t max_words, int64_t max_chars, const std::function<void(std::string)>& emit) {
  if (clauses.size() < 2 || n <= 0) return 0;
  SplitMix rng(splitmix64(seed ^ 0x5E7F11E5ULL));
  int64_t made = 0, tries = 0;
  const int64_t max_tries = 20 * n + 1000;
  while (made < n && tries++ < max_tries) {
    // 2 clauses (3 with probability 1/4), joined by ", " or "; ", the text ends with the last clause's ending
    const int k = rng.below(4) == 0 ? 3 : 2;
    std::string t;
    for (int j = 0; j < k; ++j) {
      std::string c = clauses[rng.below(clauses.size())];
      if (j + 1 < k)
        while (!c.empty() && std::strchr(".!?;:,", c.back())) c.pop_back();
      if (j > 0) t += rng.below(3) == 0 ? "; " : ", ";
      t += c;
    }
    const int64_t w = count_words(t);
    if (w < min_words || w > max_words || int64_t(t.size()) > max_chars) continue;
    emit(std::move(t));
    ++made;
  }
  return made;
}

}  // namespace daei
