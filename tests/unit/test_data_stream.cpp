// Issue 9 item 13 / issue 16 item 1: the chunk-buffered cache reader, the cheap checks at open (issue 14, Caches),
// and corpus.synthesize_to.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <torch/torch.h>
#include <unistd.h>

#include "../support/error_of.h"
#include "../support/temp_dir.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "dist/communicator.h"
#include "dist/shard_plan.h"
#include "model/release/embedder.h"

using namespace daei;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

using test::error_of;

const std::string kMini = std::string(DAEI_FIXTURES) + "/glove/mini";

// The rows as the files hold them, read whole with the HDF5 C API (independent of the reader under test).
struct Reference {
  std::vector<std::vector<float>> vec;
  std::vector<std::string> text;
  std::vector<int64_t> ids;
};

Reference read_reference(const std::string& dir) {
  Reference r;
  json man = json::parse(read_file(dir + "/manifest.json"));
  const int64_t d = man.at("dim");
  for (const auto& s : man.at("shards")) {
    const std::string path = dir + "/" + s.at("file").get<std::string>();
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    EXPECT_GE(f, 0) << path;
    const int64_t n = s.at("rows");
    std::vector<float> v(n * d);
    std::vector<int64_t> ids(n), offs(n + 1);
    auto rd = [&](const char* name, hid_t t, void* out) {
      hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
      EXPECT_GE(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), 0) << name;
      H5Dclose(ds);
    };
    rd("noisy", H5T_NATIVE_FLOAT, v.data());  // HDF5 converts float16 to float32
    rd("ids", H5T_NATIVE_INT64, ids.data());
    rd("text_offsets", H5T_NATIVE_INT64, offs.data());
    std::vector<char> blob(std::max<int64_t>(1, offs[n]));
    rd("text", H5T_NATIVE_UINT8, blob.data());
    H5Fclose(f);
    for (int64_t i = 0; i < n; ++i) {
      r.vec.emplace_back(v.begin() + i * d, v.begin() + (i + 1) * d);
      r.text.emplace_back(blob.data() + offs[i], blob.data() + offs[i + 1]);
      r.ids.push_back(ids[i]);
    }
  }
  return r;
}

class StreamFixture : public ::testing::Test {
 protected:
  TempDir d{"stream"};
  std::shared_ptr<GloveEmbedder> glove = std::make_shared<GloveEmbedder>(kMini);
  std::shared_ptr<NoisyEmbedder> emb = std::make_shared<NoisyEmbedder>(glove, 0.04, 11);
  LocalCommunicator comm;
  static constexpr int kRows = 701;

  static std::string corpus_text(uint64_t salt) {
    const char* words[] = {"the", "cat", "sat", "on", "mat", "dog", "union", "(", ")", "do", "n't", "caf\xc3\xa9"};
    std::string corpus;
    for (int i = 0; i < kRows; ++i) {
      std::string t;
      const int len = 1 + int((i * 13 + salt) % 17);  // 1..17 words: texts cross 1 KB chunk boundaries
      for (int k = 0; k < len; ++k) t += std::string(k ? " " : "") + words[(i * 7 + k * 5 + salt) % 12];
      corpus += json{{"id", i}, {"text", t}, {"source", "test"}}.dump() + "\n";
    }
    return corpus;
  }
  void SetUp() override { write(d.p / "corpus/train.jsonl", corpus_text(0)); }
  CacheBuildOptions opts(const std::string& split, const std::string& dtype, int64_t chunk_kb) {
    CacheBuildOptions o;
    o.split = split;
    o.corpus_file = (d.p / "corpus" / (split + ".jsonl")).string();
    o.cache_dir = (d.p / "cache" / split).string();
    o.shard_rows = 157;  // shards do not align with chunks or batches
    o.batch_size = 64;
    o.dtype = dtype;
    o.chunk_kb = chunk_kb;  // 1 KB: many chunks per shard, texts across chunk boundaries
    return o;
  }
  std::string dir(const std::string& split) { return (d.p / "cache" / split).string(); }

  // Every batch of every rank of world sizes 1, 2, 3 (epochs 0 and 1), and a resume mid-epoch with a fresh reader:
  // the same rows as the reference, in the same order.
  void check_plans(const CacheReadOptions& ro) {
    const Reference ref = read_reference(dir("train"));
    ASSERT_EQ(int64_t(ref.vec.size()), kRows);
    const int64_t dim = int64_t(ref.vec[0].size());
    for (int world : {1, 2, 3}) {
      const int64_t local = 24 / world;
      for (int rank = 0; rank < world; ++rank) {
        for (int64_t epoch : {0, 1}) {
          auto plan = shard_plan(kRows, world, rank, epoch, 7, local);
          const int64_t nb = int64_t(plan.size()) / local, resume_at = nb / 2;
          auto c = NoisyCache::open(dir("train"), {}, ro);
          for (int64_t b = 0; b < nb; ++b) {
            if (b == resume_at) c = NoisyCache::open(dir("train"), {}, ro);  // resume: a new process, cold buffer
            std::vector<int64_t> rows;
            for (int64_t k = b * local; k < (b + 1) * local; ++k)
              if (plan[k] >= 0) rows.push_back(plan[k]);
            if (b + 1 < nb) {  // read-ahead of the next batch (a no-op when read_ahead is off)
              std::vector<int64_t> next;
              for (int64_t k = (b + 1) * local; k < (b + 2) * local; ++k)
                if (plan[k] >= 0) next.push_back(plan[k]);
              c->prefetch(next, true);
            }
            at::Tensor y = c->noisy(rows);
            auto t = c->texts(rows);
            auto ids = c->ids(rows);
            ASSERT_EQ(y.size(0), int64_t(rows.size()));
            ASSERT_EQ(y.size(1), dim);
            for (size_t i = 0; i < rows.size(); ++i) {
              const float* got = y[int64_t(i)].data_ptr<float>();
              ASSERT_TRUE(std::equal(got, got + dim, ref.vec[rows[i]].begin()))
                  << "world " << world << " rank " << rank << " batch " << b << " row " << rows[i];
              ASSERT_EQ(t[i], ref.text[rows[i]]) << "row " << rows[i];
              ASSERT_EQ(ids[i], ref.ids[rows[i]]);
            }
            const auto st = c->read_stats();
            ASSERT_LE(st.buffer_bytes, ro.buffer_bytes);
            ASSERT_LE(st.peak_buffer_bytes, ro.buffer_bytes);
          }
        }
      }
    }
  }
};

}  // namespace

TEST_F(StreamFixture, SameRowsAsTheFilesForWorldSizes123AndAcrossAResume) {
  build_cache(opts("train", "float16", 1), *emb, comm);
  CacheReadOptions ro;
  ro.read_ahead = false;
  check_plans(ro);
}

TEST_F(StreamFixture, SameRowsWithReadAheadAndFloat32) {
  build_cache(opts("train", "float32", 1), *emb, comm);
  CacheReadOptions ro;
  ro.read_ahead = true;
  check_plans(ro);
}

TEST_F(StreamFixture, RepeatsUnsortedRowsAndWholeRange) {
  build_cache(opts("train", "float16", 1), *emb, comm);
  const Reference ref = read_reference(dir("train"));
  auto c = NoisyCache::open(dir("train"));
  std::vector<int64_t> idx = {700, 0, 156, 157, 157, 3, 700, 400};
  at::Tensor y = c->noisy(idx);
  auto t = c->texts(idx);
  for (size_t i = 0; i < idx.size(); ++i) {
    EXPECT_TRUE(std::equal(y[int64_t(i)].data_ptr<float>(), y[int64_t(i)].data_ptr<float>() + y.size(1),
                           ref.vec[idx[i]].begin()));
    EXPECT_EQ(t[i], ref.text[idx[i]]);
  }
  at::Tensor all = c->all_noisy();
  ASSERT_EQ(all.size(0), kRows);
  for (int64_t i = 0; i < kRows; ++i)
    ASSERT_TRUE(std::equal(all[i].data_ptr<float>(), all[i].data_ptr<float>() + all.size(1), ref.vec[i].begin()));
  at::Tensor mid = c->noisy_range(150, 320);
  EXPECT_TRUE(torch::equal(mid, all.slice(0, 150, 320)));
  EXPECT_EQ(c->noisy({}).size(0), 0);
  EXPECT_TRUE(c->texts({}).empty());
  EXPECT_NE(error_of([&] { c->noisy({kRows}); }).find("outside"), std::string::npos);
  EXPECT_NE(error_of([&] { c->texts({-1}); }).find("outside"), std::string::npos);
}

TEST_F(StreamFixture, BufferBoundIsRespected) {
  build_cache(opts("train", "float16", 1), *emb, comm);
  CacheReadOptions ro;
  ro.buffer_bytes = 6 << 10;  // six 1 KB chunks: far less than the cache
  ro.read_ahead = true;
  auto c = NoisyCache::open(dir("train"), {}, ro);
  auto plan = shard_plan(kRows, 1, 0, 0, 3, 16);
  int64_t worst_extra = 0;
  for (size_t b = 0; b + 16 <= plan.size(); b += 16) {
    std::vector<int64_t> rows;
    for (size_t k = b; k < b + 16; ++k)
      if (plan[k] >= 0) rows.push_back(plan[k]);  // -1: padding of the last batch
    c->prefetch(rows, true);
    c->noisy(rows);
    c->texts(rows);
    auto st = c->read_stats();
    EXPECT_LE(st.buffer_bytes, ro.buffer_bytes);
    worst_extra = std::max(worst_extra, st.peak_pinned_bytes - ro.buffer_bytes);
  }
  c->wait_prefetch();
  auto st = c->read_stats();
  EXPECT_LE(st.peak_buffer_bytes, ro.buffer_bytes);
  // held at once = the buffer + one call's chunks: 16 rows × (1 vector chunk, or 2 offset chunks, or the text
  // chunks a row spans: at most 2 here) of at most 1 KB each
  EXPECT_LE(st.peak_pinned_bytes, ro.buffer_bytes + 16 * 2 * 1024) << worst_extra;
  EXPECT_GT(st.chunk_misses, 0);
  // a buffer that holds the whole cache reads each chunk once over two epochs
  CacheReadOptions big;
  big.read_ahead = false;
  auto c2 = NoisyCache::open(dir("train"), {}, big);
  for (int64_t e : {0, 1}) {
    auto p = shard_plan(kRows, 1, 0, e, 3, 16);
    for (size_t b = 0; b + 16 <= p.size(); b += 16) {
      std::vector<int64_t> rows;
      for (size_t k = b; k < b + 16; ++k)
        if (p[k] >= 0) rows.push_back(p[k]);
      c2->noisy(rows);
    }
  }
  auto s2 = c2->read_stats();
  // 157-row shards of 8-byte float16 rows of dim 4 in 1 KB chunks: 2 chunks in each of the 4 full shards, 1 in the
  // last (701 − 4·157 = 73 rows, 584 bytes)
  EXPECT_EQ(s2.chunk_misses, 9);
}

TEST_F(StreamFixture, OpenRefusesAShardFromAnotherCorpusNamingIt) {
  build_cache(opts("train", "float16", 1), *emb, comm);
  // another corpus, same embedder, σ and size
  write(d.p / "other/corpus/train.jsonl", corpus_text(5));
  CacheBuildOptions o = opts("train", "float16", 1);
  o.corpus_file = (d.p / "other/corpus/train.jsonl").string();
  o.cache_dir = (d.p / "other/cache/train").string();
  build_cache(o, *emb, comm);
  EXPECT_EQ(error_of([&] { NoisyCache::open(dir("train")); }), "");
  fs::copy_file(d.p / "other/cache/train/shard-00002.h5", dir("train") + "/shard-00002.h5",
                fs::copy_options::overwrite_existing);
  std::string e = error_of([&] { NoisyCache::open(dir("train")); });
  EXPECT_NE(e.find("shard-00002.h5: corpus_sha256"), std::string::npos) << e;
  e = error_of([&] { verify_cache(dir("train")); });
  EXPECT_NE(e.find("shard-00002.h5"), std::string::npos) << e;
  // the whole cache of the other corpus put in place (manifest too): caught against the run's corpus file
  fs::remove_all(dir("train"));
  fs::copy(d.p / "other/cache/train", dir("train"));
  e = error_of([&] { NoisyCache::open(dir("train")); });
  EXPECT_NE(e.find("built from another corpus"), std::string::npos) << e;
  EXPECT_NE(e.find("corpus/train.jsonl"), std::string::npos) << e;
  CacheExpect skip;
  skip.corpus_file = "-";
  EXPECT_EQ(error_of([&] { NoisyCache::open(dir("train"), skip); }), "");
  // a content digest that differs from the manifest's (a shard rebuilt from changed rows)
  fs::remove_all(dir("train"));
  fs::copy(d.p / "other/cache/train", dir("train"));
  json man = json::parse(read_file(dir("train") + "/manifest.json"));
  man["shards"][1]["content_sha256"] = std::string(64, '0');
  write(dir("train") + "/manifest.json", man.dump());
  e = error_of([&] { NoisyCache::open(dir("train"), skip); });
  EXPECT_NE(e.find("shard-00001.h5: content_sha256"), std::string::npos) << e;
}

TEST(CorpusSynth, ClausesAndSeededRecombination) {
  std::vector<std::string> cl;
  split_clauses("We came, we saw; he said: it is done, ok.", cl);
  ASSERT_EQ(cl.size(), 4u) << json(cl).dump();
  EXPECT_EQ(cl[0], "We came");
  EXPECT_EQ(cl[1], "we saw");
  EXPECT_EQ(cl[2], "he said");
  EXPECT_EQ(cl[3], "it is done, ok.");
  cl.clear();
  split_clauses("a, b, c d, e", cl);  // one-word pieces glue forward, a one-word end backward
  ASSERT_EQ(cl.size(), 2u) << json(cl).dump();
  EXPECT_EQ(cl[0], "a, b");
  EXPECT_EQ(cl[1], "c d, e");
  std::vector<std::string> pool = {"the cat sat", "on the mat.", "a dog barked loudly", "in the night!"};
  std::vector<std::string> a, b;
  auto n1 = synthesize_clauses(pool, 50, 9, 3, 32, 256, [&](std::string t) { a.push_back(t); });
  synthesize_clauses(pool, 50, 9, 3, 32, 256, [&](std::string t) { b.push_back(t); });
  EXPECT_EQ(n1, 50);
  EXPECT_EQ(a, b);  // seeded
  for (auto& t : a) EXPECT_GE(std::count(t.begin(), t.end(), ' '), 2) << t;
}

TEST(CorpusSynth, BuildReachesTheTargetSize) {
  TempDir d("synth");
  std::string src;
  for (int i = 0; i < 300; ++i)
    src += "sentence number " + std::to_string(i) + " has words, and a clause " + std::to_string(i * 7) +
           "; then more words\n";
  write(d.p / "src.txt", src);
  Config cfg = Config::defaults();
  cfg.set("corpus.sources=[]");
  cfg.set("corpus.files=[" + (d.p / "src.txt").string() + "]");
  cfg.set("corpus.ood=[]");
  cfg.set("corpus.test_size=100");
  cfg.set("corpus.val_size=100");
  cfg.set("corpus.sort_buffer_mb=1");
  cfg.set("corpus.synthesize_to=5000");
  auto st = build_corpus(cfg, (d.p / "corpus").string());
  EXPECT_EQ(st.split_rows["test"] + st.split_rows["val"] + st.split_rows["train"], 5000);
  const std::string train = read_file((d.p / "corpus/train.jsonl").string());
  EXPECT_NE(train.find("\"source\":\"synth\""), std::string::npos);
  auto st2 = build_corpus(cfg, (d.p / "corpus2").string());
  EXPECT_EQ(read_file((d.p / "corpus2/train.jsonl").string()), train);  // seeded
}
