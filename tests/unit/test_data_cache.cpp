// Issue 4: corpus building and the HDF5 noisy-embedding caches; issue 25: the cache writer and the run layout.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "../support/error_of.h"
#include "../support/temp_dir.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/sha256.h"
#include "data/cache.h"
#include "data/cache_shard.h"  // file_access: the reader's HDF5 file-access list
#include "data/cache_writer.h"
#include "data/run_layout.h"
#include "eval/clean_cache.h"
#include "data/corpus.h"
#include "dist/communicator.h"
#include "model/release/embedder.h"
#include "../support/assets.h"

using namespace daei;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> v;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) v.push_back(json::parse(line));
  return v;
}

using test::error_of;

const std::string kMini = std::string(DAEI_FIXTURES) + "/glove/mini";

}  // namespace

TEST(Corpus, NormalizeAndUtf8) {
  std::string out;
  EXPECT_TRUE(normalize_text("  a\t\tb \n c  ", out));
  EXPECT_EQ(out, "a b c");
  EXPECT_TRUE(normalize_text("caf\xc3\xa9 \xe2\x82\xac", out));
  EXPECT_EQ(out, "caf\xc3\xa9 \xe2\x82\xac");
  out = "kept";
  EXPECT_FALSE(normalize_text("bad \xc3", out));          // truncated
  EXPECT_FALSE(normalize_text("bad \xc0\xaf", out));      // overlong
  EXPECT_FALSE(normalize_text("bad \xed\xa0\x80", out));  // surrogate
  EXPECT_FALSE(normalize_text("bad \xff", out));
  EXPECT_EQ(out, "kept");
}

TEST(Corpus, SentenceSplitter) {
  auto s = split_sentences("Mr. Smith went to Washington. He met the U.S. Senate! Was it good? \"Yes,\" he said.");
  ASSERT_EQ(s.size(), 4u) << json(s).dump();
  EXPECT_EQ(s[0], "Mr. Smith went to Washington.");
  EXPECT_EQ(s[1], "He met the U.S. Senate!");
  EXPECT_EQ(s[2], "Was it good?");
  EXPECT_EQ(s[3], "\"Yes,\" he said.");
}

TEST(Corpus, FortunesStripAttribution) {
  TempDir d("fortunes");
  write(d.p / "quotes", "First one\nspans lines.\n%\nSecond.\n\t\t-- Somebody Famous\n%\n%\n");
  write(d.p / "quotes.dat", "binary index, skipped");
  std::vector<std::string> got;
  read_fortunes(d.str(), [&](std::string s) { got.push_back(s); });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], "First one\nspans lines.\n");
  EXPECT_EQ(got[1], "Second.\n");
}

TEST(Corpus, BuildFromUserFilesFiltersDedupsShufflesAndSplits) {
  TempDir d("corpus");
  std::string txt;
  for (int i = 0; i < 300; ++i) txt += "sentence number " + std::to_string(i) + " is here\n";
  txt += "sentence number 5 is here\n";           // duplicate
  txt += "  sentence   number 6 is\there  \n";    // duplicate after whitespace normalisation
  txt += "\n   \n";                                // empty
  txt += "too short\n";                            // 2 words
  txt += "bad \xff utf8 line here\n";              // invalid UTF-8
  write(d.p / "in.txt", txt);
  write(d.p / "in.jsonl", "{\"text\": \"a jsonl text with words\", \"x\": 1}\n");
  write(d.p / "in.tsv", "id\tthe tsv text in column one\n");
  write(d.p / "ood.txt", "out of domain one\nout of domain two\nout of domain two\n");
  auto cfg = Config::defaults();
  cfg.set("corpus.sources=[]");
  cfg.set("corpus.files=[" + (d.p / "in.txt").string() + "," + (d.p / "in.jsonl").string() + "," +
          (d.p / "in.tsv").string() + "]");
  cfg.set("corpus.tsv_column=1");
  cfg.set("corpus.ood=[" + (d.p / "ood.txt").string() + "]");
  cfg.set("corpus.test_size=20");
  cfg.set("corpus.val_size=30");
  cfg.set("corpus.sort_buffer_mb=0");  // spill every record: exercises the external merge
  auto st = build_corpus(cfg, (d.p / "out").string());
  EXPECT_EQ(st.duplicates, 2 + 1);
  EXPECT_EQ(st.empty, 2);
  EXPECT_EQ(st.too_short, 1);
  EXPECT_EQ(st.invalid_utf8, 1);
  EXPECT_EQ(st.split_rows["test"], 20);
  EXPECT_EQ(st.split_rows["val"], 30);
  EXPECT_EQ(st.split_rows["train"], 302 - 50);
  EXPECT_EQ(st.split_rows["ood-ood"], 2);
  std::set<std::string> seen;
  int64_t n = 0;
  for (const char* s : {"test", "val", "train"}) {
    auto rows = read_jsonl((d.p / "out" / (std::string(s) + ".jsonl")).string());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i]["id"].get<int64_t>(), int64_t(i));
      seen.insert(rows[i]["text"].get<std::string>());
      ++n;
    }
  }
  EXPECT_EQ(int64_t(seen.size()), n);  // no duplicates across splits
  EXPECT_TRUE(seen.count("the tsv text in column one"));
  EXPECT_TRUE(seen.count("a jsonl text with words"));
  EXPECT_TRUE(seen.count("sentence number 6 is here"));
  // shuffled, and the same seed gives the same files
  auto test1 = read_file((d.p / "out/test.jsonl").string());
  cfg.set("corpus.sort_buffer_mb=64");
  build_corpus(cfg, (d.p / "out2").string());
  EXPECT_EQ(read_file((d.p / "out2/train.jsonl").string()), read_file((d.p / "out/train.jsonl").string()));
  EXPECT_EQ(read_file((d.p / "out2/test.jsonl").string()), test1);
  cfg.set("corpus.seed=99");
  build_corpus(cfg, (d.p / "out3").string());
  EXPECT_NE(read_file((d.p / "out3/test.jsonl").string()), test1);
  auto first = read_jsonl((d.p / "out/train.jsonl").string());
  bool in_order = true;
  for (size_t i = 1; i < first.size(); ++i) in_order = in_order && first[i]["text"] > first[i - 1]["text"];
  EXPECT_FALSE(in_order);
}

TEST(Corpus, BadInputErrorsNameTheFileAndLeaveOutputsAlone) {
  TempDir d("corpus-bad");
  auto cfg = Config::defaults();
  cfg.set("corpus.sources=[]");
  cfg.set("corpus.ood=[]");
  write(d.p / "out/train.jsonl", "old\n");
  cfg.set("corpus.files=[" + (d.p / "missing.txt").string() + "]");
  std::string e = error_of([&] { build_corpus(cfg, (d.p / "out").string()); });
  EXPECT_NE(e.find("missing.txt"), std::string::npos) << e;
  write(d.p / "short.txt", "a\nb c\n\n");
  cfg.set("corpus.files=[" + (d.p / "short.txt").string() + "]");
  e = error_of([&] { build_corpus(cfg, (d.p / "out").string()); });
  EXPECT_NE(e.find("no usable text"), std::string::npos) << e;
  EXPECT_NE(e.find("short.txt"), std::string::npos) << e;
  EXPECT_EQ(read_file((d.p / "out/train.jsonl").string()), "old\n");
  write(d.p / "bad.jsonl", "{\"text\": \"fine text here\"}\n{not json\n");
  cfg.set("corpus.files=[" + (d.p / "bad.jsonl").string() + "]");
  e = error_of([&] { build_corpus(cfg, (d.p / "out").string()); });
  EXPECT_NE(e.find("bad.jsonl:2"), std::string::npos) << e;
}

TEST(Corpus, WordnetAndGcideWhenInstalled) {
  DAEI_REQUIRE_ASSET(fs::exists("/usr/share/wordnet/data.noun"), "wordnet-base (/usr/share/wordnet)");
  int64_t n = 0;
  bool saw_example = false;
  read_wordnet("/usr/share/wordnet", [&](std::string s) {
    ++n;
    saw_example = saw_example || s == "the pilot reported two kills during the mission";
  });
  EXPECT_GT(n, 150000);
  EXPECT_TRUE(saw_example);

  DAEI_REQUIRE_ASSET(fs::exists("/usr/share/dictd/gcide.index"), "dict-gcide (/usr/share/dictd)");
  n = 0;
  bool saw_quote = false, saw_markup = false;
  read_gcide("/usr/share/dictd", [&](std::string s) {
    ++n;
    saw_quote = saw_quote || s == "Not to be abed after midnight.";  // a quotation, its "--Shak." cut off
    saw_markup = saw_markup || s.find_first_of("[]{}\\") != std::string::npos;
  });
  EXPECT_GT(n, 200000);  // 248,122 from dict-gcide 0.48.5
  EXPECT_TRUE(saw_quote);
  EXPECT_FALSE(saw_markup);
}

// ---------------------------------------------------------------------------------------------------------------
// Cache

namespace {

struct CacheFixture : ::testing::Test {
  TempDir d{"cache"};
  std::shared_ptr<GloveEmbedder> glove = std::make_shared<GloveEmbedder>(kMini);
  std::shared_ptr<NoisyEmbedder> emb = std::make_shared<NoisyEmbedder>(glove, 0.04, 11);
  LocalCommunicator comm;
  std::vector<std::string> texts;

  void SetUp() override {
    const char* words[] = {"the", "cat", "sat", "on", "mat", "dog", "union", "(", ")", "do", "n't"};
    std::string corpus;
    for (int i = 0; i < 23; ++i) {
      std::string t = std::string(words[i % 11]) + " " + words[(i * 7 + 3) % 11] + " " + words[(i * 5 + 1) % 11];
      if (i == 4) t = "caf\xc3\xa9 unknown words only";  // zero vector + noise
      texts.push_back(t);
      corpus += json{{"id", i}, {"text", t}, {"source", "test"}}.dump() + "\n";
    }
    write(d.p / "corpus/train.jsonl", corpus);
    write(d.p / "corpus/val.jsonl", corpus);
  }
  CacheBuildOptions opts(const std::string& split, int64_t shard_rows, const std::string& dtype = "float16") {
    CacheBuildOptions o;
    o.split = split;
    o.corpus_file = (d.p / "corpus" / (split + ".jsonl")).string();
    o.cache_dir = (d.p / "cache" / split).string();
    o.shard_rows = shard_rows;
    o.batch_size = 4;
    o.dtype = dtype;
    return o;
  }
  std::string dir(const std::string& split) { return (d.p / "cache" / split).string(); }
};

}  // namespace

TEST_F(CacheFixture, BuildReadVerifyRoundTrip) {
  auto r = build_cache(opts("train", 5, "float32"), *emb, comm);
  EXPECT_EQ(r.rows, 23);
  EXPECT_EQ(r.shards, 5);
  EXPECT_TRUE(fs::exists(dir("train") + "/shard-00004.h5"));
  auto c = NoisyCache::open(dir("train"), {emb->id(), 0.04, 4, ""});
  EXPECT_EQ(c->size(), 23);
  EXPECT_EQ(c->dim(), 4);
  EXPECT_EQ(c->sigma(), 0.04);
  std::vector<std::string> keys;
  for (int i = 0; i < 23; ++i) keys.push_back("train/" + std::to_string(i));
  at::Tensor want = emb->embed(texts, keys);
  EXPECT_TRUE(torch::equal(c->all_noisy(), want));
  // arbitrary order, across shards, with a repeat
  std::vector<int64_t> idx = {22, 0, 7, 7, 13, 5};
  at::Tensor got = c->noisy(idx);
  for (size_t i = 0; i < idx.size(); ++i) EXPECT_TRUE(torch::equal(got[i], want[idx[i]])) << i;
  auto t = c->texts({4, 22, 0});
  EXPECT_EQ(t[0], texts[4]);
  EXPECT_EQ(t[1], texts[22]);
  EXPECT_EQ(c->ids({17})[0], 17);
  auto v = verify_cache(dir("train"));
  EXPECT_EQ(v.rows, 23);
  EXPECT_EQ(v.shards, 5);
  EXPECT_EQ(v.digest.size(), 64u);
  auto again = build_cache(opts("train", 5, "float32"), *emb, comm);
  EXPECT_TRUE(again.already_complete);
}

// Issue 26 item 12: every shard stays open while a stage reads, and HDF5's per-file metadata cache adapts up to 32 MB
// by default, so memory grew with the number of shards. The reader's files have it fixed at 256 KB.
TEST_F(CacheFixture, ShardsOpenWithABoundedMetadataCache) {
  build_cache(opts("train", 5, "float32"), *emb, comm);
  auto c = NoisyCache::open(dir("train"), {emb->id(), 0.04, 4, ""});
  std::vector<int64_t> all(23);
  for (int i = 0; i < 23; ++i) all[i] = 22 - i;
  c->texts(all);  // touches every chunk index
  using cache_detail::Hid;
  std::lock_guard<std::recursive_mutex> g(cache_detail::hdf5_mutex());
  Hid f(H5Fopen((dir("train") + "/shard-00002.h5").c_str(), H5F_ACC_RDONLY, cache_detail::file_access()), H5Fclose);
  ASSERT_GE(f.id, 0);
  H5AC_cache_config_t cfg;
  cfg.version = H5AC__CURR_CACHE_CONFIG_VERSION;
  ASSERT_GE(H5Fget_mdc_config(f, &cfg), 0);
  EXPECT_EQ(cfg.max_size, cache_detail::kMetadataCacheBytes);
  EXPECT_EQ(cfg.initial_size, cache_detail::kMetadataCacheBytes);
  EXPECT_EQ(cfg.incr_mode, H5C_incr__off);
  size_t max_size = 0, min_clean = 0, cur = 0;
  int entries = 0;
  ASSERT_GE(H5Fget_mdc_size(f, &max_size, &min_clean, &cur, &entries), 0);
  EXPECT_LE(cur, cache_detail::kMetadataCacheBytes);
}

TEST_F(CacheFixture, Float16StoresRoundedValues) {
  build_cache(opts("train", 10), *emb, comm);
  auto c = NoisyCache::open(dir("train"));
  std::vector<std::string> keys;
  for (int i = 0; i < 23; ++i) keys.push_back("train/" + std::to_string(i));
  at::Tensor want = emb->embed(texts, keys).to(torch::kHalf).to(torch::kFloat32);
  EXPECT_TRUE(torch::equal(c->all_noisy(), want));
  EXPECT_EQ(c->dtype(), "float16");
}

TEST_F(CacheFixture, DigestDoesNotDependOnShardSizeAndResumeRebuildsOnlyMissingShards) {
  build_cache(opts("train", 5), *emb, comm);
  const std::string d5 = verify_cache(dir("train")).digest;
  fs::rename(dir("train"), dir("train-5"));
  build_cache(opts("train", 3), *emb, comm);
  EXPECT_EQ(verify_cache(dir("train")).digest, d5);
  // simulate a kill: manifest never written, one shard lost, one partial temp file left
  fs::remove(dir("train") + "/manifest.json");
  fs::remove(dir("train") + "/shard-00002.h5");
  write(dir("train") + "/shard-00005.h5.tmp-999", "partial");
  auto mtime = fs::last_write_time(dir("train") + "/shard-00001.h5");
  EXPECT_NE(error_of([&] { verify_cache(dir("train")); }).find("incomplete"), std::string::npos);
  EXPECT_NE(error_of([&] { NoisyCache::open(dir("train")); }).find("run `daei cache build --split train` again"),
            std::string::npos);
  auto r = build_cache(opts("train", 3), *emb, comm);
  EXPECT_EQ(r.rows_built, 3);
  EXPECT_EQ(fs::last_write_time(dir("train") + "/shard-00001.h5"), mtime);  // kept
  EXPECT_FALSE(fs::exists(dir("train") + "/shard-00005.h5.tmp-999"));
  EXPECT_EQ(verify_cache(dir("train")).digest, d5);
}

TEST_F(CacheFixture, FlippedByteIsAChecksumErrorNamingTheShard) {
  build_cache(opts("train", 5, "float32"), *emb, comm);
  const std::string shard = dir("train") + "/shard-00002.h5";
  auto c0 = NoisyCache::open(dir("train"));
  const at::Tensor want_rows = c0->all_noisy();
  std::vector<int64_t> all(23);
  for (int i = 0; i < 23; ++i) all[i] = i;
  const auto want_texts = c0->texts(all);
  c0.reset();
  // Flip one byte every 61 bytes through the whole file. Each flip is either caught (an error naming the shard)
  // or harmless (unused space: everything reads back unchanged). Never silent corruption, never a crash.
  const std::string orig = read_file(shard);
  int caught = 0, tried = 0;
  for (size_t off = 0; off < orig.size(); off += 61) {
    std::string bad = orig;
    bad[off] ^= 0x20;
    write(shard, bad);
    ++tried;
    std::string e = error_of([&] { verify_cache(dir("train")); });
    if (!e.empty()) {
      ++caught;
      EXPECT_NE(e.find("shard-00002.h5"), std::string::npos) << "offset " << off << ": " << e;
      continue;
    }
    auto c = NoisyCache::open(dir("train"));
    EXPECT_TRUE(torch::equal(c->all_noisy(), want_rows)) << "silent change at offset " << off;
    EXPECT_EQ(c->texts(all), want_texts) << "silent change at offset " << off;
  }
  write(shard, orig);
  EXPECT_GT(caught, tried / 3) << caught << "/" << tried;
  // a flip inside the vectors: verify and the training reader both report a checksum error naming the shard
  std::string bad = orig;
  at::Tensor row10 = emb->embed({texts[10]}, {"train/10"});
  auto pos = orig.find(std::string(reinterpret_cast<const char*>(row10.data_ptr()), 16));
  ASSERT_NE(pos, std::string::npos);
  bad[pos + 5] ^= 0x01;
  write(shard, bad);
  std::string e = error_of([&] { verify_cache(dir("train")); });
  EXPECT_NE(e.find("shard-00002.h5: checksum error"), std::string::npos) << e;
  e = error_of([&] { NoisyCache::open(dir("train"))->all_noisy(); });
  EXPECT_NE(e.find("shard-00002.h5: checksum error"), std::string::npos) << e;
}

TEST_F(CacheFixture, ShardsFromAnotherEmbedderOrSigmaAreRefused) {
  build_cache(opts("train", 5), *emb, comm);
  NoisyEmbedder other(glove, 0.05, 11);
  std::string e = error_of([&] { build_cache(opts("train", 5), other, comm); });
  EXPECT_NE(e.find("manifest.json"), std::string::npos) << e;
  EXPECT_NE(e.find("nothing was overwritten"), std::string::npos) << e;
  fs::remove(dir("train") + "/manifest.json");
  e = error_of([&] { build_cache(opts("train", 5), other, comm); });
  EXPECT_NE(e.find("shard-00000.h5 was built by embedder"), std::string::npos) << e;
  build_cache(opts("train", 5), *emb, comm);
  // a shard swapped in from another σ build
  fs::create_directories(d.p / "other");
  write(d.p / "corpus/other.jsonl", read_file((d.p / "corpus/train.jsonl").string()));
  auto o = opts("other", 5);
  build_cache(o, other, comm);
  fs::copy_file(dir("other") + "/shard-00001.h5", dir("train") + "/shard-00001.h5",
                fs::copy_options::overwrite_existing);
  e = error_of([&] { verify_cache(dir("train")); });
  EXPECT_NE(e.find("shard-00001.h5: sigma is 0.05 but the manifest says 0.04"), std::string::npos) << e;
  e = error_of([&] { NoisyCache::open(dir("train")); });
  EXPECT_NE(e.find("shard-00001.h5: sigma is 0.05"), std::string::npos) << e;
  e = error_of([&] { NoisyCache::open(dir("other"), {"", -1, 768, ""}); });
  EXPECT_NE(e.find("dimension mismatch"), std::string::npos) << e;
}

TEST_F(CacheFixture, CleanEmbeddingsOnlyForEvaluationAndRefusedByTrainingReader) {
  auto o = opts("train", 5);
  o.clean = true;
  std::string e = error_of([&] { build_cache(o, *emb, comm); });
  EXPECT_NE(e.find("threat model"), std::string::npos) << e;
  EXPECT_NE(e.find("cache.clean_train_reference"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir("train")));
  auto v = opts("val", 5);
  v.clean = true;
  build_cache(v, *emb, comm);
  auto clean = CleanCache::open(dir("val"), CleanCache::OfflineEvalOnly{});
  EXPECT_TRUE(torch::equal(clean->all_clean(), glove->embed(texts)));
  EXPECT_EQ(clean->texts({3})[0], texts[3]);
  e = error_of([&] { NoisyCache::open(dir("val") + "/clean"); });
  EXPECT_NE(e.find("offline_eval_only"), std::string::npos) << e;
  EXPECT_NE(e.find("threat model"), std::string::npos) << e;
  // a clean shard copied into the noisy folder is refused too
  fs::copy_file(dir("val") + "/clean/shard-00000.h5", dir("val") + "/shard-00000.h5",
                fs::copy_options::overwrite_existing);
  e = error_of([&] { NoisyCache::open(dir("val")); });
  EXPECT_NE(e.find("shard-00000.h5 is marked offline_eval_only"), std::string::npos) << e;
  EXPECT_EQ(verify_cache(dir("val"), true).rows, 23);
  o.clean_train_reference = true;
  build_cache(o, *emb, comm);
  EXPECT_EQ(CleanCache::open(dir("train"), CleanCache::OfflineEvalOnly{})->size(), 23);
}

TEST_F(CacheFixture, MissingCorpusIsAClearError) {
  auto o = opts("test", 5);
  std::string e = error_of([&] { build_cache(o, *emb, comm); });
  EXPECT_NE(e.find("test.jsonl"), std::string::npos) << e;
  EXPECT_NE(e.find("corpus build"), std::string::npos) << e;
}

// Issue 25: every path of a run directory comes from RunLayout, which also says whether a step's output is complete.
TEST(RunLayout, PathsOfARunDirectory) {
  const RunLayout r("/runs/x");
  EXPECT_EQ(r.config(), "/runs/x/config.yaml");
  EXPECT_EQ(r.log_file(), "/runs/x/daei.log");
  EXPECT_EQ(r.corpus("val"), "/runs/x/corpus/val.jsonl");
  EXPECT_EQ(r.corpus_stats(), "/runs/x/corpus/stats.json");
  EXPECT_EQ(r.cache("test"), "/runs/x/cache/test");
  EXPECT_EQ(r.cache_manifest("test"), "/runs/x/cache/test/manifest.json");
  EXPECT_EQ(r.clean_cache("test"), "/runs/x/cache/test/clean");
  EXPECT_EQ(r.clean_cache_manifest("test"), "/runs/x/cache/test/clean/manifest.json");
  EXPECT_EQ(r.sigma_estimate(), "/runs/x/cache/sigma_estimate.json");
  EXPECT_EQ(r.tokenizer_model(), "/runs/x/tokenizer/spm.model");
  EXPECT_EQ(r.tokenizer_for(""), "/runs/x/tokenizer/spm.model");
  EXPECT_EQ(r.tokenizer_for("/t5/spiece.model"), "/t5/spiece.model");
  EXPECT_EQ(r.stage("stage2"), "/runs/x/stage2");
  EXPECT_EQ(r.stage_final("stage2"), "/runs/x/stage2/final");
  EXPECT_EQ(r.final_dae("stage1"), "/runs/x/stage1/final/dae");
  EXPECT_EQ(r.final_inverter("stage3"), "/runs/x/stage3/final/inverter");
  EXPECT_EQ(r.final_module("stage4", "corrector"), "/runs/x/stage4/final/corrector");
  EXPECT_EQ(r.eval_file("results.json"), "/runs/x/eval/results.json");
}

TEST(RunLayout, StepCompleteOnlyWhenItsFilesVerify) {
  TempDir d("layout");
  const RunLayout r(d.str());
  EXPECT_FALSE(r.stage_complete("stage1"));  // no folder
  write(d.p / "stage1/final/dae/model.safetensors", "weights");
  EXPECT_FALSE(r.stage_complete("stage1"));  // no DONE: written in part
  const std::string sha = sha256_file((d.p / "stage1/final/dae/model.safetensors").string());
  write(d.p / "stage1/final/DONE", json{{"step", 3}, {"files", {{"dae/model.safetensors", sha}}}}.dump());
  EXPECT_TRUE(r.stage_complete("stage1"));
  EXPECT_TRUE(verify_done_folder(r.stage_final("stage1")).empty());
  write(d.p / "stage1/final/dae/model.safetensors", "weightz");  // damaged after DONE
  EXPECT_FALSE(r.stage_complete("stage1"));
  EXPECT_NE(verify_done_folder(r.stage_final("stage1")).find("SHA-256 differs"), std::string::npos);
  write(d.p / "stage1/final/DONE", "{}");  // no checksums: not verifiable, not complete
  EXPECT_FALSE(r.stage_complete("stage1"));
  EXPECT_FALSE(r.cache_complete("train"));
  write(d.p / "cache/train/manifest.json", "{}");
  EXPECT_TRUE(r.cache_complete("train"));
  EXPECT_FALSE(r.clean_cache_complete("train"));
}

// Issue 25: one cache writer. A cache written through CacheWriter by a caller of its own (rows from anywhere) has the
// manifest of `cache build`'s caches, field for field, reads back, and resumes keeping its complete shards.
TEST_F(CacheFixture, CacheWriterIsTheWriterOfEveryCache) {
  build_cache(opts("train", 5, "float32"), *emb, comm);
  auto train = NoisyCache::open(dir("train"));
  auto write_copy = [&](const std::string& split) {
    CacheWriterOptions wo;
    wo.dir = dir(split);
    wo.split = split;
    wo.embedder = "copy-of-train";
    wo.dtype = "float32";
    wo.sigma = 0.5;
    wo.noise_seed = 3;
    wo.shard_rows = 4;
    wo.manifest_extra = {{"copied_from", "train"}};
    CacheWriter w(wo, comm);
    if (!w.plan([&] { return CacheSource{train->size(), train->dim(), "source-digest"}; })) return int64_t(0);
    int64_t built = 0;
    for (int64_t s : w.mine()) {
      std::vector<int64_t> rows;
      for (int64_t i = w.shard_begin(s); i < w.shard_end(s); ++i) rows.push_back(i);
      w.write(s, train->ids(rows), 2 * train->noisy(rows), at::Tensor(), train->texts(rows));
      ++built;
    }
    w.finish();
    return built;
  };
  EXPECT_EQ(write_copy("copy"), 6);
  const json a = json::parse(read_file(dir("train") + "/manifest.json"));
  json b = json::parse(read_file(dir("copy") + "/manifest.json"));
  EXPECT_EQ(b.at("copied_from"), "train");
  b.erase("copied_from");
  for (const auto& [k, v] : a.items()) EXPECT_TRUE(b.contains(k)) << k;
  for (const auto& [k, v] : b.items()) EXPECT_TRUE(a.contains(k)) << k;
  EXPECT_EQ(b.at("corpus_sha256"), "source-digest");
  EXPECT_EQ(b.at("shards").size(), 6u);
  auto c = NoisyCache::open(dir("copy"), {"copy-of-train", 0.5, 4, "-"});
  EXPECT_TRUE(torch::equal(c->all_noisy(), 2 * train->all_noisy()));
  EXPECT_EQ(c->texts({22}), train->texts({22}));
  const std::string digest = verify_cache(dir("copy")).digest;
  // Resume: only the missing shard is written again; complete: nothing.
  fs::remove(dir("copy") + "/manifest.json");
  fs::remove(dir("copy") + "/shard-00002.h5");
  EXPECT_EQ(write_copy("copy"), 1);
  EXPECT_EQ(verify_cache(dir("copy")).digest, digest);
  EXPECT_EQ(write_copy("copy"), 0);
}

// Issue 35 item 5 (cache_build): a shard is written as its rows arrive. Any split into batches writes the same shard
// as one batch (content digest, rows, texts); a stream left unfinished leaves no file; an empty text is stored.
TEST_F(CacheFixture, ShardStreamWritesTheSameShardBatchByBatch) {
  build_cache(opts("train", 23, "float16"), *emb, comm);
  auto whole = NoisyCache::open(dir("train"));
  std::vector<int64_t> rows(23);
  for (int i = 0; i < 23; ++i) rows[i] = i;
  std::vector<int64_t> ids = whole->ids(rows);
  std::vector<std::string> tx = whole->texts(rows);
  tx[6] = "";  // an empty text between two batches' texts
  at::Tensor vec = whole->all_noisy();
  cache_detail::ShardMeta m{"noisy", "train", emb->id(), "float16", "corpus-digest", 0.04, 11, 4, 0, 23};
  m.chunk_bytes = 64;  // many chunks, so that batches end inside chunks
  fs::create_directories(d.p / "s");
  const std::string one = cache_detail::write_shard((d.p / "s/one.h5").string(), m, ids, vec, tx);
  {
    std::lock_guard<std::recursive_mutex> g(cache_detail::hdf5_mutex());
    cache_detail::ShardStream s((d.p / "s/batches.h5").string(), m, 23);
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 1}, {1, 1}, {1, 4}, {4, 17}, {17, 23}})
      s.append(ids.data() + b, vec.slice(0, b, e), tx.data() + b);
    EXPECT_FALSE(fs::exists(d.p / "s/batches.h5"));  // under its temporary name until close()
    EXPECT_EQ(s.close(), one);
  }
  EXPECT_TRUE(fs::exists(d.p / "s/batches.h5"));
  {
    std::lock_guard<std::recursive_mutex> g(cache_detail::hdf5_mutex());
    cache_detail::ShardStream s((d.p / "s/unfinished.h5").string(), m, 23);
    s.append(ids.data(), vec.slice(0, 0, 5), tx.data());
  }
  for (auto& e : fs::directory_iterator(d.p / "s"))
    EXPECT_TRUE(e.path().filename() == "one.h5" || e.path().filename() == "batches.h5") << e.path();
  // Both files read back as the shard of a cache: every dataset, byte for byte.
  for (const char* f : {"one.h5", "batches.h5"}) {
    fs::create_directories(d.p / "c" / f);
    fs::copy_file(d.p / "s" / f, d.p / "c" / f / "shard-00000.h5");
    json man = json::parse(read_file(dir("train") + "/manifest.json"));
    man["corpus_sha256"] = "corpus-digest";
    man["shards"][0]["content_sha256"] = one;
    write(d.p / "c" / f / "manifest.json", man.dump());
    auto c = NoisyCache::open((d.p / "c" / f).string(), {emb->id(), 0.04, 4, "-"});
    EXPECT_TRUE(torch::equal(c->all_noisy(), vec)) << f;
    EXPECT_EQ(c->texts(rows), tx) << f;
    EXPECT_EQ(c->ids(rows), ids) << f;
    EXPECT_EQ(verify_cache((d.p / "c" / f).string()).rows, 23) << f;
  }
}

// A write that fails on the writer's thread is thrown to the producer by a later call, naming the shard, and the
// build leaves no partial file.
TEST_F(CacheFixture, BackgroundWriteErrorReachesTheProducer) {
  CacheWriterOptions wo;
  wo.dir = dir("bg");
  wo.split = "bg";
  wo.embedder = "e";
  wo.shard_rows = 23;
  wo.overlap_writes = true;
  CacheWriter w(wo, comm);
  ASSERT_TRUE(w.plan([&] { return CacheSource{23, 4, "src"}; }));
  fs::remove_all(dir("bg"));  // the shard cannot be created
  std::vector<int64_t> ids(23);
  for (int i = 0; i < 23; ++i) ids[i] = i;
  const std::string e = error_of([&] {
    w.begin(0);
    for (int64_t b = 0; b < 23; b += 4) {
      const int64_t n = std::min<int64_t>(4, 23 - b);
      w.append(std::vector<int64_t>(ids.begin() + b, ids.begin() + b + n), torch::zeros({n, 4}), at::Tensor(),
               std::vector<std::string>(texts.begin() + b, texts.begin() + b + n));
    }
    w.end();
    w.finish();
  });
  EXPECT_NE(e.find("shard-00000.h5: cannot write shard"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir("bg")));
}
