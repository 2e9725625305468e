// WordPiece against Hugging Face's fast tokenizer (the `tokenizers` library sentence-transformers runs) on the 80
// hand-written cases of tests/fixtures/make_wordpiece_fixture.py (ids rewritten by wordpiece_unicode/make_fixture.py),
// and the SentencePiece wrapper (training, T5 ids, encode/decode, truncation, batching).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/text/tokenizer_spm.h"
#include "model/text/tokenizer_wordpiece.h"

namespace {
const std::string kWp = std::string(DAEI_FIXTURES) + "/wordpiece/";
}

TEST(WordPiece, MatchesHuggingFaceTokenizersOnHandWrittenCases) {
  daei::WordPieceTokenizer tok(kWp + "vocab.txt");
  std::ifstream in(kWp + "cases.jsonl");
  ASSERT_TRUE(in.good());
  std::string line;
  int n = 0, bad = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    const auto text = j["text"].get<std::string>();
    const auto want_tokens = j["tokens"].get<std::vector<std::string>>();
    const auto want_ids = j["ids"].get<std::vector<int64_t>>();
    auto tokens = tok.tokenize(text);
    EXPECT_EQ(tokens, want_tokens) << "text: " << text;
    EXPECT_EQ(tok.tokens_to_ids(tokens), want_ids) << "text: " << text;
    bad += tokens != want_tokens;
    ++n;
  }
  EXPECT_GE(n, 50);
  EXPECT_EQ(bad, 0);
}

TEST(WordPiece, SpecialTokensTruncationAndBatch) {
  daei::WordPieceTokenizer tok(kWp + "vocab.txt");
  auto ids = tok.encode("hello world the quick brown fox", 5);
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids.front(), tok.cls_id());
  EXPECT_EQ(ids.back(), tok.sep_id());
  EXPECT_EQ(ids[1], tok.id("hello"));
  EXPECT_EQ(tok.encode("", 8), (std::vector<int64_t>{tok.cls_id(), tok.sep_id()}));
  auto b = tok.encode_batch({"hello", "hello world !"}, 16);
  EXPECT_EQ(b.input_ids.sizes(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(b.attention_mask.sum().item<int64_t>(), 3 + 5);
  EXPECT_EQ(b.input_ids[0][3].item<int64_t>(), tok.pad_id());
  auto p = tok.encode_batch({"hello"}, 16, /*pad_to_max=*/true);
  EXPECT_EQ(p.input_ids.size(1), 16);
  EXPECT_THROW(tok.encode("x", 1), daei::Error);
  EXPECT_THROW(daei::WordPieceTokenizer::from_tokens({"[PAD]", "a"}), daei::Error);
  // Invalid UTF-8 bytes are dropped, never crash.
  EXPECT_EQ(tok.tokenize(std::string("he\xffllo\xc3")), (std::vector<std::string>{"hello"}));
}

TEST(SentencePiece, TrainEncodeDecode) {
  const auto dir = std::filesystem::temp_directory_path() / ("daei_spm_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string corpus = (dir / "corpus.txt").string();
  {
    std::ofstream out(corpus);
    const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "from", "home",
                           "red", "blue", "green", "house", "tree", "river", "stone", "light"};
    for (int i = 0; i < 400; ++i) {
      for (int k = 0; k < 8; ++k) out << words[(i * 7 + k * 3 + k * k) % 20] << (k < 7 ? " " : "\n");
    }
  }
  const std::string prefix = (dir / "spm").string();
  daei::SpmTokenizer::train(corpus, 40, prefix);
  daei::SpmTokenizer tok(prefix + ".model");
  EXPECT_EQ(tok.vocab_size(), 40);
  auto ids = tok.encode("the cat sat on a mat", 0);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), tok.eos_id());
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    EXPECT_GT(ids[i], 2);
    EXPECT_LT(ids[i], 40);
  }
  EXPECT_EQ(tok.decode(ids), "the cat sat on a mat");
  // Truncation keeps eos last; pads and eos are skipped when decoding.
  auto t = tok.encode("the cat sat on a mat the dog ran far away from home", 5);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t.back(), tok.eos_id());
  std::vector<int64_t> padded = {0};
  padded.insert(padded.end(), ids.begin(), ids.end());
  padded.push_back(0);
  EXPECT_EQ(tok.decode(padded), "the cat sat on a mat");
  auto b = tok.encode_batch({"the cat", "the cat sat on a mat"}, 32);
  EXPECT_EQ(b.input_ids.size(0), 2);
  EXPECT_EQ(b.attention_mask[0].sum().item<int64_t>(), static_cast<int64_t>(tok.encode("the cat", 32).size()));
  auto texts = tok.decode_batch(b.input_ids);
  EXPECT_EQ(texts, (std::vector<std::string>{"the cat", "the cat sat on a mat"}));
  // A model with other special ids is refused with an explanation.
  daei::SpmTokenizer::train(corpus, 40, (dir / "bad").string(), "--pad_id=-1 --bos_id=0 --eos_id=1 --unk_id=2");
  EXPECT_THROW(daei::SpmTokenizer((dir / "bad.model").string()), daei::Error);
  EXPECT_THROW(daei::SpmTokenizer((dir / "missing.model").string()), daei::Error);
  std::filesystem::remove_all(dir);
}
