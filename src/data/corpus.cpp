// `daei corpus build` (corpus.h): the external sort by a seeded content key, which shuffles and drops duplicates,
// and the split writers; the sources it reads are corpus_sources.cpp.
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
// The build

namespace {

// The sizes of the in-domain splits.
struct SplitSizes {
  int64_t test = 0, val = 0, train = 0;  // train 0: the rest
  int64_t cap = 0;                       // corpus.max_examples, 0: none
  int64_t synth_to = 0;                  // corpus.synthesize_to, 0: off
};

SplitSizes split_sizes(const Config& cfg, int64_t synth_to) {
  SplitSizes n;
  n.synth_to = synth_to;
  n.test = cfg.integer("corpus.test_size");
  n.val = cfg.integer("corpus.val_size");
  n.train = cfg.integer("corpus.train_size");
  n.cap = cfg.integer("corpus.max_examples");
  DAEI_CHECK(synth_to >= 0, "corpus.synthesize_to must be >= 0, got {}", synth_to);
  DAEI_CHECK(synth_to == 0 || n.cap == 0 || synth_to <= n.cap,
             "corpus.synthesize_to ({}) is above corpus.max_examples ({})", synth_to, n.cap);
  DAEI_CHECK(synth_to == 0 || n.train == 0, "corpus.synthesize_to sets the total size; leave corpus.train_size 0");
  return n;
}

// One build (build_corpus): the filters every text passes, the sources read so far, and the split writers, which
// commit together at the end.
struct CorpusBuild {
  CorpusBuild(const Config& cfg_, const std::string& out_dir_, const std::string& tmp_, CorpusStats& st_)
      : cfg(cfg_), out_dir(out_dir_), tmp(tmp_), st(st_),
        budget(size_t(cfg.integer("corpus.sort_buffer_mb")) << 20),
        seed(uint64_t(cfg.integer("corpus.seed"))),
        min_words(cfg.integer("corpus.min_words")), max_words(cfg.integer("corpus.max_words")),
        max_chars(cfg.integer("corpus.max_chars")) {}

  const Config& cfg;
  const std::string& out_dir;
  const std::string& tmp;  // the sort's run files
  CorpusStats& st;
  const size_t budget;
  const uint64_t seed;
  const int64_t min_words, max_words, max_chars;
  std::vector<std::string> source_names;  // by the source id of a record
  // corpus.synthesize_to: clauses of the in-domain texts, recombined below (see synthesize_clauses).
  std::vector<std::string> clauses;
  int64_t real_kept = 0;
  bool collect_clauses = false;
  std::vector<std::unique_ptr<SplitWriter>> writers;

  using Reader = std::function<void(const std::function<void(std::string)>&)>;

  // The reader of a source (wordnet, gcide, fortunes, or a file path) and its name in the stats and the splits.
  Reader reader_of(const std::string& src, std::string& name) const {
    name = src;
    if (src == "wordnet") return [this](auto& e) { read_wordnet(cfg.str("corpus.wordnet_dir"), e); };
    if (src == "gcide") return [this](auto& e) { read_gcide(cfg.str("corpus.gcide_dir"), e); };
    if (src == "fortunes") return [this](auto& e) { read_fortunes(cfg.str("corpus.fortunes_dir"), e); };
    if (src.find('/') != std::string::npos || src.find('.') != std::string::npos) {
      name = "file:" + fs::path(src).filename().string();
      return [this, src](auto& e) {
        read_user_file(src, cfg.str("corpus.text_field"), cfg.integer("corpus.tsv_column"), e);
      };
    }
    throw UsageError(fmt::format("unknown corpus source '{}' (wordnet, gcide, fortunes, or a file path)", src));
  }

  // Every text of the sources, normalised and filtered (counted by reason), into the sorter under its seeded key.
  void run_sources(const std::vector<std::string>& sources, int64_t extra_max_chars, ExternalSorter& sorter) {
    for (const auto& src : sources) {
      uint16_t sid = uint16_t(source_names.size());
      std::string name;
      const Reader reader = reader_of(src, name);
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
  }

  // Recombined clauses of the real texts, seeded; the sort shuffles them in with the real texts and drops
  // duplicates (of each other and of real texts). A quarter extra covers the duplicates (18 % were seen on a small,
  // repetitive source); the cap then cuts the merged stream at exactly synthesize_to.
  void synthesize(int64_t synth_to, ExternalSorter& sorter) {
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

  SplitWriter& new_split(const std::string& name) {
    return *writers.emplace_back(std::make_unique<SplitWriter>(out_dir + "/" + name + ".jsonl"));
  }

  // test, val and train: the sources (and the recombined texts) sorted, deduplicated and dealt in that order.
  void in_domain(const std::vector<std::string>& sources, const SplitSizes& n) {
    ExternalSorter sorter(tmp, budget);
    collect_clauses = n.synth_to > 0;
    run_sources(sources, 0, sorter);
    collect_clauses = false;
    if (n.synth_to > real_kept) synthesize(n.synth_to, sorter);
    std::vector<std::string>().swap(clauses);
    const int64_t cap_in = n.synth_to > 0 ? n.synth_to : n.cap;
    auto& test = new_split("test");
    auto& val = new_split("val");
    auto& train = new_split("train");
    int64_t total = 0;
    st.duplicates += sorter.merge([&](const Rec& r) {
      if (cap_in > 0 && total >= cap_in) return false;
      if (test.rows() < n.test) test.add(r.text, source_names[r.source]);
      else if (val.rows() < n.val) val.add(r.text, source_names[r.source]);
      else if (n.train > 0 && train.rows() >= n.train) return false;
      else train.add(r.text, source_names[r.source]);
      ++total;
      return true;
    });
    DAEI_CHECK(total > 0, "corpus: no usable text in {} (read {}, invalid UTF-8 {}, empty {}, too short {}, too long {})",
               fmt::join(sources, ", "), [&] { int64_t k = 0; for (auto& [s, v] : st.read) k += v; return k; }(),
               st.invalid_utf8, st.empty, st.too_short, st.too_long);
    if (n.synth_to > 0 && total < n.synth_to)
      LOG_WARN("[corpus] synthesize_to {}: only {} distinct texts (too many duplicates among the recombinations)",
               n.synth_to, total);
    // Nothing to train on: every later step would fail, so the build fails here and writes nothing.
    DAEI_CHECK(train.rows() > 0,
               "corpus: the train split is empty: only {} usable distinct texts, taken by test ({} of corpus.test_size "
               "{}) and val ({} of corpus.val_size {}); add text or lower those sizes (nothing was written)",
               total, test.rows(), n.test, val.rows(), n.val);
    if (test.rows() < n.test || val.rows() < n.val)
      LOG_WARN("[corpus] only {} usable texts: test {}, val {}, train {}", total, test.rows(), val.rows(),
               train.rows());
    st.split_rows["test"] = test.rows();
    st.split_rows["val"] = val.rows();
    st.split_rows["train"] = train.rows();
  }

  // An out-of-domain source: one split of its own, ood-NAME.
  void out_of_domain(const std::string& ood) {
    ExternalSorter sorter(tmp, budget);
    run_sources({ood}, ood == "fortunes" ? cfg.integer("corpus.fortune_max_chars") : 0, sorter);
    std::string name = "ood-" + (ood.find('/') != std::string::npos ? fs::path(ood).stem().string() : ood);
    auto& w = new_split(name);
    const int64_t n_ood = cfg.integer("corpus.ood_size");
    st.duplicates += sorter.merge([&](const Rec& r) {
      if (n_ood > 0 && w.rows() >= n_ood) return false;
      w.add(r.text, source_names[r.source]);
      return true;
    });
    DAEI_CHECK(w.rows() > 0, "corpus: no usable text in out-of-domain source {}", ood);
    st.split_rows[name] = w.rows();
  }
};

}  // namespace

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
  CorpusBuild build(cfg, out_dir, tmp, st);
  const int64_t synth_to = cfg.integer("corpus.synthesize_to");
  std::vector<std::string> sources = cfg.strings("corpus.sources");
  for (auto& f : cfg.strings("corpus.files")) sources.push_back(f);
  DAEI_CHECK(!sources.empty(), "corpus.sources and corpus.files are both empty: nothing to build a corpus from");
  build.in_domain(sources, split_sizes(cfg, synth_to));
  for (const auto& ood : cfg.strings("corpus.ood")) build.out_of_domain(ood);
  for (auto& w : build.writers) w->close();
  for (auto& w : build.writers) w->commit();
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
