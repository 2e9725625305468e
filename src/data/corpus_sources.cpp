// The text sources of `daei corpus build` (corpus.h): WordNet glosses, State of the Union speeches, fortunes and
// user files, the text hygiene every text passes, and the clause recombination behind corpus.synthesize_to. The
// build itself (external sort, splits) is corpus.cpp.
#include "data/corpus.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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
                                 "Nov", "Dec", "Rev", "Lt", "Capt", "Sen", "Rep"};
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

void read_sotu(const std::string& dir, const std::function<void(std::string)>& emit) {
  auto files = sorted_files(dir, [](const fs::path& p) { return p.extension() == ".txt"; });
  DAEI_CHECK(!files.empty(), "sotu: no .txt speeches in {} (run launch/setup.sh)", dir);
  for (const auto& f : files) {
    std::string text = read_file(f);
    std::string norm;
    if (!normalize_text(text, norm)) norm = text;  // invalid UTF-8 is dropped per sentence below
    for (auto& s : split_sentences(norm)) emit(std::move(s));
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
