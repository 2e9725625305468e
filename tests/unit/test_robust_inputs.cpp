// Issue 14: the strict readers of hostile input (cache manifest, serve-embedder request body) and the launcher
// watch's name test. The end-to-end behaviour is in tests/e2e/bad_*.sh.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/signals.h"
#include "data/cache_manifest.h"
#include "model/release/embedding_request.h"

using nlohmann::json;

namespace {
json good_manifest() {
  return json::parse(R"({"schema": 1, "kind": "noisy", "split": "val", "rows": 3, "dim": 4, "dtype": "float16",
    "embedder": "glove", "sigma": 0.04, "noise_seed": 7, "corpus_sha256": "ab", "shard_rows": 2,
    "shards": [{"file": "shard-00000.h5", "rows": 2, "row_begin": 0, "row_end": 2, "content_sha256": "c"},
               {"file": "shard-00001.h5", "rows": 1, "row_begin": 2, "row_end": 3, "content_sha256": "d"}]})");
}
std::string manifest_error(const json& m) {
  try {
    daei::parse_cache_manifest(m.dump(), "dir/manifest.json");
  } catch (const daei::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(CacheManifest, AcceptsAGoodOne) { EXPECT_EQ(manifest_error(good_manifest()), ""); }

TEST(CacheManifest, RefusesDamageNamingFileAndField) {
  struct Case {
    std::function<void(json&)> damage;
    std::string field;
  } cases[] = {
      {[](json& m) { m.erase("rows"); }, "\"rows\""},
      {[](json& m) { m["rows"] = "many"; }, "\"rows\""},
      {[](json& m) { m["rows"] = 4; }, "\"rows\""},
      {[](json& m) { m["dtype"] = "int8"; }, "\"dtype\""},
      {[](json& m) { m["sigma"] = -1; }, "\"sigma\""},
      {[](json& m) { m["noise_seed"] = -3; }, "\"noise_seed\""},
      {[](json& m) { m["shards"] = json::array(); }, "\"shards\""},
      {[](json& m) { m["shards"][0]["file"] = "../../etc/passwd"; }, "\"shards[0].file\""},
      {[](json& m) { m["shards"][1]["row_begin"] = 1; }, "\"shards[1]\""},
      {[](json& m) { m["shards"][1]["rows"] = 5; }, "\"shards[1].rows\""},
      {[](json& m) { m["shards"][0].erase("content_sha256"); }, "\"shards[0].content_sha256\""},
      {[](json& m) { m["shards"][0]["row_end"] = 1e30; }, "\"shards[0].row_end\""},
  };
  for (auto& c : cases) {
    json m = good_manifest();
    c.damage(m);
    std::string e = manifest_error(m);
    EXPECT_NE(e.find("dir/manifest.json"), std::string::npos) << e;
    EXPECT_NE(e.find(c.field), std::string::npos) << c.field << ": " << e;
  }
  try {
    daei::parse_cache_manifest("{\"schema\": 1,", "dir/manifest.json");
    FAIL();
  } catch (const daei::Error& e) {
    EXPECT_NE(std::string(e.what()).find("dir/manifest.json: not valid JSON"), std::string::npos);
  }
}

TEST(EmbeddingRequest, ParsesAndRefuses) {
  std::vector<std::string> t;
  EXPECT_EQ(daei::parse_embedding_request(R"({"input": ["a", "b"], "model": "m"})", 4, t), "");
  EXPECT_EQ(t, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(daei::parse_embedding_request(R"({"input": "a"})", 4, t), "");
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(daei::parse_embedding_request("{bad", 4, t), "body is not valid JSON");
  EXPECT_EQ(daei::parse_embedding_request("[1]", 4, t), "body must be a JSON object");
  EXPECT_EQ(daei::parse_embedding_request(R"({"input": []})", 4, t), "\"input\" is empty");
  EXPECT_EQ(daei::parse_embedding_request(R"({"input": ["a", 1]})", 4, t),
            "\"input\" must be a string or an array of strings");
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(daei::parse_embedding_request(R"({"input": ["a","a","a","a","a"]})", 4, t),
            "\"input\" has 5 texts, the limit is 4");
  EXPECT_EQ(daei::parse_embedding_request("{\"input\": [\"\xff\"]}", 4, t), "body is not valid JSON");
  EXPECT_EQ(daei::parse_embedding_request(R"({"input": "a", "model": 3})", 4, t), "\"model\" must be a string");
}

TEST(LauncherWatch, KnowsTheLaunchers) {
  EXPECT_TRUE(daei::signals::is_launcher_name("mpirun"));
  EXPECT_TRUE(daei::signals::is_launcher_name("orted"));
  EXPECT_TRUE(daei::signals::is_launcher_name("prterun"));
  EXPECT_FALSE(daei::signals::is_launcher_name("bash"));
  EXPECT_FALSE(daei::signals::is_launcher_name("daei_tests"));
  EXPECT_FALSE(daei::signals::exit_when_launcher_dies());  // the test runner is not a launcher: no watch
}
