#include "data/corpus.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/rng.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------------------------
// Text hygiene

bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    int len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

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

namespace {

int64_t count_words(const std::string& s) {
  int64_t n = 0;
  bool in = false;
  for (char c : s) {
    if (c == ' ') in = false;
    else if (!in) { in = true; ++n; }
  }
  return n;
}

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
// External sort by seeded content key

namespace {

struct Rec {
  uint64_t key;
  uint16_t source;
  std::string text;
  bool operator<(const Rec& o) const { return key != o.key ? key < o.key : text < o.text; }
};

bool write_rec(std::FILE* f, const Rec& r) {
  uint32_t n = r.text.size();
  return std::fwrite(&r.key, 8, 1, f) == 1 && std::fwrite(&r.source, 2, 1, f) == 1 &&
         std::fwrite(&n, 4, 1, f) == 1 && std::fwrite(r.text.data(), 1, n, f) == n;
}

// A write that failed (a full disk: ENOSPC): the file is closed and removed, and one error names it.
[[noreturn]] void fail_write(std::FILE* f, const std::string& path, int err) {
  if (f) std::fclose(f);
  std::remove(path.c_str());
  DAEI_FAIL("{}: write failed: {}", path, std::strerror(err ? err : EIO));
}

bool read_rec(std::FILE* f, Rec& r) {
  uint32_t n;
  if (std::fread(&r.key, 8, 1, f) != 1) return false;
  DAEI_CHECK(std::fread(&r.source, 2, 1, f) == 1 && std::fread(&n, 4, 1, f) == 1, "corpus sort: truncated run");
  r.text.resize(n);
  DAEI_CHECK(std::fread(r.text.data(), 1, n, f) == n, "corpus sort: truncated run");
  return true;
}

class ExternalSorter {
 public:
  ExternalSorter(std::string tmp_dir, size_t budget) : tmp_(std::move(tmp_dir)), budget_(budget) {}
  ~ExternalSorter() {
    for (auto& p : runs_) std::remove(p.c_str());
  }
  void add(Rec r) {
    bytes_ += r.text.size() + sizeof(Rec) + 16;
    buf_.push_back(std::move(r));
    if (bytes_ >= budget_) spill();
  }
  // Calls fn for each record in (key, text) order, duplicates (same text) dropped and counted.
  int64_t merge(const std::function<bool(const Rec&)>& fn) {
    std::sort(buf_.begin(), buf_.end());
    struct Src {
      std::FILE* f;
      Rec cur;
    };
    std::vector<Src> srcs;
    for (auto& p : runs_) {
      std::FILE* f = std::fopen(p.c_str(), "rb");
      DAEI_CHECK(f, "corpus sort: cannot reopen {}", p);
      std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
      Src s{f, {}};
      if (read_rec(f, s.cur)) srcs.push_back(std::move(s));
      else std::fclose(f);
    }
    size_t mem_pos = 0;
    auto cmp = [&](int a, int b) {  // heap of source indices; -1 = the in-memory buffer
      const Rec& x = a < 0 ? buf_[mem_pos] : srcs[a].cur;
      const Rec& y = b < 0 ? buf_[mem_pos] : srcs[b].cur;
      return y < x;
    };
    std::priority_queue<int, std::vector<int>, decltype(cmp)> pq(cmp);
    for (size_t i = 0; i < srcs.size(); ++i) pq.push(int(i));
    if (mem_pos < buf_.size()) pq.push(-1);
    int64_t dups = 0;
    bool have_last = false, stop = false;
    Rec last;
    while (!pq.empty()) {
      int s = pq.top();
      pq.pop();
      Rec r = s < 0 ? std::move(buf_[mem_pos]) : std::move(srcs[s].cur);
      if (s < 0) {
        if (++mem_pos < buf_.size()) pq.push(-1);
      } else if (read_rec(srcs[s].f, srcs[s].cur)) {
        pq.push(s);
      }
      if (stop) continue;
      if (have_last && last.key == r.key && last.text == r.text) {
        ++dups;
        continue;
      }
      if (!fn(r)) stop = true;  // keep draining only to count; cheap compared to the read
      last = std::move(r);
      have_last = true;
    }
    for (auto& s : srcs) std::fclose(s.f);
    buf_.clear();
    return dups;
  }

 private:
  void spill() {
    std::sort(buf_.begin(), buf_.end());
    std::string path = fmt::format("{}/run-{:04d}.bin", tmp_, runs_.size());
    std::FILE* f = std::fopen(path.c_str(), "wb");
    DAEI_CHECK(f, "corpus sort: cannot write {}: {}", path, std::strerror(errno));
    std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
    for (auto& r : buf_)
      if (!write_rec(f, r)) fail_write(f, path, errno);
    if (std::fflush(f) != 0) fail_write(f, path, errno);
    if (std::fclose(f) != 0) fail_write(nullptr, path, errno);
    runs_.push_back(path);
    buf_.clear();
    buf_.shrink_to_fit();
    bytes_ = 0;
  }
  std::string tmp_;
  size_t budget_, bytes_ = 0;
  std::vector<Rec> buf_;
  std::vector<std::string> runs_;
};

class SplitWriter {
 public:
  SplitWriter(std::string path) : path_(std::move(path)), tmp_(temp_sibling(path_)) {
    f_ = std::fopen(tmp_.c_str(), "wb");
    DAEI_CHECK(f_, "cannot write {}: {}", tmp_, std::strerror(errno));
    std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  }
  ~SplitWriter() {
    if (f_) std::fclose(f_);
    if (!committed_) std::remove(tmp_.c_str());  // closed but not committed: a later split failed
  }
  void add(const std::string& text, const std::string& source) {
    std::string line = json{{"id", rows_}, {"text", text}, {"source", source}}.dump() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), f_) != line.size()) fail();
    ++rows_;
  }
  int64_t rows() const { return rows_; }
  // The temporary file stays until commit(), so a failure elsewhere leaves the old split untouched.
  void close() {
    if (std::fflush(f_) != 0) fail();
    std::FILE* f = f_;
    f_ = nullptr;  // closed once, whatever fclose says (the destructor must not close it again)
    if (std::fclose(f) != 0) fail_write(nullptr, tmp_, errno);
  }
  void commit() {
    fs::rename(tmp_, path_);
    committed_ = true;
  }

 private:
  [[noreturn]] void fail() {
    const int err = errno;
    std::FILE* f = f_;
    f_ = nullptr;
    fail_write(f, tmp_, err);
  }
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  int64_t rows_ = 0;
  bool committed_ = false;
};

}  // namespace

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

CorpusStats build_corpus(const Config& cfg, const std::string& out_dir) {
  auto t0 = std::chrono::steady_clock::now();
  CorpusStats st;
  make_dirs(out_dir);
  const std::string tmp = out_dir + "/.sort-tmp";
  fs::remove_all(tmp);
  struct RemoveOnExit {  // the sort's run files go whether the build succeeds or fails (a full disk)
    std::string dir;
    ~RemoveOnExit() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove_sort_tmp{tmp};
  make_dirs(tmp);
  const size_t budget = size_t(cfg.integer("corpus.sort_buffer_mb")) << 20;
  const uint64_t seed = uint64_t(cfg.integer("corpus.seed"));
  const int64_t min_words = cfg.integer("corpus.min_words"), max_words = cfg.integer("corpus.max_words");
  const int64_t max_chars = cfg.integer("corpus.max_chars");
  std::string assets = cfg.str("assets.dir");
  if (assets.empty()) {
    const char* a = std::getenv("DAEI_ASSETS");
    const char* x = std::getenv("XDG_CACHE_HOME");
    const char* h = std::getenv("HOME");
    assets = a && *a ? a : x && *x ? std::string(x) + "/daei" : std::string(h ? h : ".") + "/.cache/daei";
  }
  std::vector<std::string> source_names;

  // corpus.synthesize_to: clauses of the in-domain texts, recombined below (see synthesize_clauses).
  const int64_t synth_to = cfg.integer("corpus.synthesize_to");
  std::vector<std::string> clauses;
  int64_t real_kept = 0;
  bool collect_clauses = false;
  auto run_sources = [&](const std::vector<std::string>& sources, int64_t extra_max_chars,
                         ExternalSorter& sorter) {
    for (const auto& src : sources) {
      uint16_t sid = uint16_t(source_names.size());
      std::string name = src;
      std::function<void(const std::function<void(std::string)>&)> reader;
      if (src == "wordnet") {
        reader = [&](auto& e) { read_wordnet(cfg.str("corpus.wordnet_dir"), e); };
      } else if (src == "sotu") {
        std::string d = cfg.str("corpus.sotu_dir");
        if (d.empty()) d = assets + "/sotu";
        reader = [d](auto& e) { read_sotu(d, e); };
      } else if (src == "fortunes") {
        reader = [&](auto& e) { read_fortunes(cfg.str("corpus.fortunes_dir"), e); };
      } else if (src.find('/') != std::string::npos || src.find('.') != std::string::npos) {
        name = "file:" + fs::path(src).filename().string();
        reader = [&, src](auto& e) {
          read_user_file(src, cfg.str("corpus.text_field"), cfg.integer("corpus.tsv_column"), e);
        };
      } else {
        throw UsageError(fmt::format("unknown corpus source '{}' (wordnet, sotu, fortunes, or a file path)", src));
      }
      source_names.push_back(name);
      int64_t& read = st.read[name];
      std::string norm;
      reader([&](std::string raw) {
        ++read;
        if (!normalize_text(raw, norm)) { ++st.invalid_utf8; return; }
        if (norm.empty()) { ++st.empty; return; }
        int64_t w = count_words(norm);
        if (w < min_words) { ++st.too_short; return; }
        if (w > max_words || int64_t(norm.size()) > max_chars ||
            (extra_max_chars > 0 && int64_t(norm.size()) > extra_max_chars)) {
          ++st.too_long;
          return;
        }
        uint64_t key = splitmix64(seed ^ hash_key(norm));
        if (collect_clauses) {
          ++real_kept;
          split_clauses(norm, clauses);
        }
        sorter.add(Rec{key, sid, std::move(norm)});
        norm.clear();
      });
    }
  };

  // In domain.
  std::vector<std::string> sources = cfg.strings("corpus.sources");
  for (auto& f : cfg.strings("corpus.files")) sources.push_back(f);
  DAEI_CHECK(!sources.empty(), "corpus.sources and corpus.files are both empty: nothing to build a corpus from");
  const int64_t n_test = cfg.integer("corpus.test_size"), n_val = cfg.integer("corpus.val_size");
  const int64_t n_train_cfg = cfg.integer("corpus.train_size"), cap = cfg.integer("corpus.max_examples");
  DAEI_CHECK(synth_to >= 0, "corpus.synthesize_to must be >= 0, got {}", synth_to);
  DAEI_CHECK(synth_to == 0 || cap == 0 || synth_to <= cap, "corpus.synthesize_to ({}) is above corpus.max_examples ({})",
             synth_to, cap);
  DAEI_CHECK(synth_to == 0 || n_train_cfg == 0, "corpus.synthesize_to sets the total size; leave corpus.train_size 0");
  std::vector<std::unique_ptr<SplitWriter>> writers;
  {
    ExternalSorter sorter(tmp, budget);
    collect_clauses = synth_to > 0;
    run_sources(sources, 0, sorter);
    collect_clauses = false;
    if (synth_to > real_kept) {
      // Recombined clauses of the real texts, seeded; the sort below shuffles them in with the real texts and
      // drops duplicates (of each other and of real texts). A quarter extra covers the duplicates (18 % were seen
      // on a small, repetitive source); the cap then cuts the merged stream at exactly synthesize_to.
      const uint16_t sid = uint16_t(source_names.size());
      source_names.push_back("synth");
      const int64_t want = (synth_to - real_kept) + (synth_to - real_kept) / 4 + 1000;
      int64_t made = synthesize_clauses(clauses, want, seed, min_words, max_words, max_chars, [&](std::string t) {
        uint64_t key = splitmix64(seed ^ hash_key(t));
        sorter.add(Rec{key, sid, std::move(t)});
      });
      st.read["synth"] = made;
      LOG_INFO("[corpus] synthesize_to {}: {} real texts, {} clauses, {} recombined texts generated", synth_to,
               real_kept, clauses.size(), made);
    }
    std::vector<std::string>().swap(clauses);
    const int64_t cap_in = synth_to > 0 ? synth_to : cap;
    auto& test = *writers.emplace_back(std::make_unique<SplitWriter>(out_dir + "/test.jsonl"));
    auto& val = *writers.emplace_back(std::make_unique<SplitWriter>(out_dir + "/val.jsonl"));
    auto& train = *writers.emplace_back(std::make_unique<SplitWriter>(out_dir + "/train.jsonl"));
    int64_t total = 0;
    st.duplicates += sorter.merge([&](const Rec& r) {
      if (cap_in > 0 && total >= cap_in) return false;
      if (test.rows() < n_test) test.add(r.text, source_names[r.source]);
      else if (val.rows() < n_val) val.add(r.text, source_names[r.source]);
      else if (n_train_cfg > 0 && train.rows() >= n_train_cfg) return false;
      else train.add(r.text, source_names[r.source]);
      ++total;
      return true;
    });
    DAEI_CHECK(total > 0, "corpus: no usable text in {} (read {}, invalid UTF-8 {}, empty {}, too short {}, too long {})",
               fmt::join(sources, ", "), [&] { int64_t n = 0; for (auto& [k, v] : st.read) n += v; return n; }(),
               st.invalid_utf8, st.empty, st.too_short, st.too_long);
    if (synth_to > 0 && total < synth_to)
      LOG_WARN("[corpus] synthesize_to {}: only {} distinct texts (too many duplicates among the recombinations)",
               synth_to, total);
    // Nothing to train on: every later step would fail, so the build fails here and writes nothing.
    DAEI_CHECK(train.rows() > 0,
               "corpus: the train split is empty: only {} usable distinct texts, taken by test ({} of corpus.test_size "
               "{}) and val ({} of corpus.val_size {}); add text or lower those sizes (nothing was written)",
               total, test.rows(), n_test, val.rows(), n_val);
    if (test.rows() < n_test || val.rows() < n_val)
      LOG_WARN("[corpus] only {} usable texts: test {}, val {}, train {}", total, test.rows(), val.rows(),
               train.rows());
    st.split_rows["test"] = test.rows();
    st.split_rows["val"] = val.rows();
    st.split_rows["train"] = train.rows();
  }
  // Out of domain: one file each.
  for (const auto& ood : cfg.strings("corpus.ood")) {
    ExternalSorter sorter(tmp, budget);
    run_sources({ood}, ood == "fortunes" ? cfg.integer("corpus.fortune_max_chars") : 0, sorter);
    std::string name = "ood-" + (ood.find('/') != std::string::npos ? fs::path(ood).stem().string() : ood);
    auto& w = *writers.emplace_back(std::make_unique<SplitWriter>(out_dir + "/" + name + ".jsonl"));
    const int64_t n_ood = cfg.integer("corpus.ood_size");
    st.duplicates += sorter.merge([&](const Rec& r) {
      if (n_ood > 0 && w.rows() >= n_ood) return false;
      w.add(r.text, source_names[r.source]);
      return true;
    });
    DAEI_CHECK(w.rows() > 0, "corpus: no usable text in out-of-domain source {}", ood);
    st.split_rows[name] = w.rows();
  }
  for (auto& w : writers) w->close();
  for (auto& w : writers) w->commit();
  fs::remove_all(tmp);
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

void for_each_corpus_row(const std::string& path,
                         const std::function<void(int64_t row, int64_t id, std::string text)>& fn) {
  std::ifstream in(path, std::ios::binary);
  DAEI_CHECK(in, "cannot read corpus file {} (run `daei corpus build` first)", path);
  std::string line;
  int64_t row = 0;
  while (std::getline(in, line)) {
    json j;
    try {
      j = json::parse(line);
    } catch (const std::exception& e) {
      DAEI_FAIL("{}:{}: not JSON ({})", path, row + 1, e.what());
    }
    DAEI_CHECK(j.is_object() && j.contains("text") && j["text"].is_string() && j.contains("id") &&
                   j["id"].is_number_integer(),
               "{}:{}: a corpus line needs an integer \"id\" and a string \"text\"", path, row + 1);
    fn(row, j["id"].get<int64_t>(), j["text"].get<std::string>());
    ++row;
  }
  DAEI_CHECK(!in.bad(), "read error on {}", path);
}

}  // namespace daei
