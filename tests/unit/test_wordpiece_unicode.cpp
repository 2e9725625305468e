// Random-Unicode differential test of daei's WordPiece against Hugging Face's fast tokenizer (the Rust `tokenizers`
// library sentence-transformers runs): 2,000 seeded random strings (capital sigma, private use, unassigned,
// combining marks, CJK, accents, emoji, controls, whitespace variants) with all-MiniLM-L6-v2's real vocab.txt from
// the asset cache; the expected ids come from tests/fixtures/wordpiece_unicode/make_fixture.py.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/config.h"
#include "core/fsutil.h"
#include "core/utf8.h"
#include "model/release/embedder.h"
#include "model/text/tokenizer_wordpiece.h"

namespace {

std::string code_points(const std::string& s) {
  std::ostringstream o;
  for (char32_t c : daei::decode_utf8(s, daei::InvalidUtf8::kDrop)) o << fmt::format("U+{:04X} ", uint32_t(c));
  return o.str();
}

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream o;
  for (auto x : v) o << x << ' ';
  return o.str();
}

}  // namespace

TEST(WordPiece, RandomUnicodeMatchesHuggingFaceTokenizers) {
  const std::string dir = daei::asset_dir(daei::Config::defaults()) + "/all-MiniLM-L6-v2";
  // CI always runs launch/setup.sh, so a missing asset is a failure, never a skip.
  ASSERT_TRUE(daei::file_exists(dir + "/vocab.txt"))
      << dir << "/vocab.txt is missing: run launch/setup.sh (it unpacks all-MiniLM-L6-v2 into the asset cache)";
  daei::WordPieceTokenizer tok(dir + "/vocab.txt");
  std::ifstream in(std::string(DAEI_FIXTURES) + "/wordpiece_unicode/cases.jsonl");
  ASSERT_TRUE(in.good());
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  ASSERT_TRUE(nlohmann::json::parse(line).contains("meta"));
  int n = 0, bad = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    const auto text = j["text"].get<std::string>();
    const auto want = j["ids"].get<std::vector<int64_t>>();
    const auto got = tok.tokens_to_ids(tok.tokenize(text));
    ++n;
    if (got == want) continue;
    if (++bad <= 10)
      ADD_FAILURE() << "case " << n << ": " << code_points(text) << "\n  want " << join(want) << "\n  got  "
                    << join(got);
  }
  EXPECT_EQ(n, 2000);
  EXPECT_EQ(bad, 0) << bad << " of " << n << " strings tokenize differently (first 10 above)";
}
