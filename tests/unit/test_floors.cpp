// Issue 46: the floors of every table and the shape columns, on hand-made texts.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <string>
#include <vector>

#include "data/dataset.h"
#include "eval/evaluate.h"
#include "eval/floors.h"
#include "eval/metrics.h"
#include "eval/text_shape.h"

namespace m = daei::metrics;

namespace {

const std::vector<std::string> kTexts{"the cat sat on the mat", "the dog ate the bone", "a cat and a dog",
                                      "the end of the day", "on the day of the cat"};

double mean_f1(const std::string& hyp, const std::vector<std::string>& refs) {
  double s = 0;
  for (const auto& r : refs) s += m::token_f1(hyp, r);
  return s / static_cast<double>(refs.size());
}

}  // namespace

TEST(FloorConstant, GreedyWordSetOnHandMadeTexts) {
  const auto c = daei::choose_constant_floor(kTexts);
  // "the" is in 4 of 5 texts: the first word taken. The reported score is the metric's own on the chosen string.
  ASSERT_FALSE(c.text.empty());
  EXPECT_EQ(c.text.substr(0, 3), "the");
  EXPECT_EQ(c.texts, 5);
  EXPECT_DOUBLE_EQ(c.mean_token_f1, mean_f1(c.text, kTexts));
  // No single word added or removed improves it (a local optimum of the greedy search).
  for (const std::string extra : {"cat", "dog", "on", "of", "a", "day", "mat", "end"}) {
    if (c.text.find(extra) != std::string::npos) continue;
    EXPECT_LE(mean_f1(c.text + " " + extra, kTexts), c.mean_token_f1 + 1e-12) << extra;
  }
  EXPECT_GT(c.mean_token_f1, mean_f1("the", kTexts) - 1e-12);
  EXPECT_GT(c.mean_token_f1, mean_f1("cat", kTexts));
  // Deterministic, and the empty set of texts gives the empty string.
  EXPECT_EQ(daei::choose_constant_floor(kTexts).text, c.text);
  EXPECT_EQ(daei::choose_constant_floor({}).text, "");
}

TEST(FloorConstant, ExactTwoWordOptimum) {
  // Every text holds "x" and "y" and one private word: {x, y} scores 2·(2/3·1)/(2/3+1) = 0.8 on each.
  const std::vector<std::string> t{"x y a", "x y b", "x y c", "y x d"};
  const auto c = daei::choose_constant_floor(t);
  EXPECT_TRUE(c.text == "x y" || c.text == "y x") << c.text;
  EXPECT_NEAR(c.mean_token_f1, 0.8, 1e-12);
}

TEST(FloorRetrieval, NearestAnswerAcrossChunks) {
  // Answers in 3 chunks of 2 rows; the query nearest (in cosine, not in distance) to row 4, then to row 1.
  auto answers = torch::tensor({{1.f, 0.f}, {0.f, 1.f}, {-1.f, 0.f}, {0.f, -1.f}, {1.f, 1.f}, {10.f, 9.f}});
  daei::InMemoryDataset ds(answers, {"r0", "r1", "r2", "r3", "r4", "r5"}, 0.01);
  const auto y = torch::tensor({{10.f, 9.1f}, {0.1f, 5.f}});
  const auto idx = daei::nearest_answers(ds, 6, y, 2);
  ASSERT_EQ(idx.size(), 2u);
  EXPECT_EQ(idx[0], 5);  // cos to (10, 9) beats cos to (1, 1)
  EXPECT_EQ(idx[1], 1);
  EXPECT_EQ(daei::nearest_answers(ds, 6, y, 4), idx);  // the same with other chunks
  EXPECT_EQ(daei::nearest_answers(ds, 4, y, 4)[0], 0);  // only the first 4 rows searched
  // A tie (rows 0 and 4 scaled are the same direction) goes to the first row, whatever the chunking.
  auto tied = torch::tensor({{1.f, 0.f}, {0.f, 1.f}, {2.f, 0.f}});
  daei::InMemoryDataset ds2(tied, {"a", "b", "c"}, 0.01);
  EXPECT_EQ(daei::nearest_answers(ds2, 3, torch::tensor({{1.f, 0.f}}), 1)[0], 0);
  EXPECT_EQ(daei::nearest_answers(ds2, 3, torch::tensor({{1.f, 0.f}}), 8)[0], 0);
}

TEST(TextShape, ConstantSystemAndTruthSystem) {
  const std::vector<std::string> truths{"the cat sat", "a dog ran far away", "in the united states", "one more text"};
  // A system that returns the truth: every recovery distinct, no template (every 3-gram is in its truth).
  const auto truth = daei::text_shape(truths, truths);
  EXPECT_DOUBLE_EQ(truth.distinct, 1.0);
  EXPECT_DOUBLE_EQ(truth.top_template, 0.0);
  EXPECT_EQ(truth.template_ngram, "");
  // A constant system: distinct 1/n, and its 3-gram a template on every text whose truth lacks it.
  const std::vector<std::string> constant(4, "a person who is in the United States");
  const auto c = daei::text_shape(constant, truths);
  EXPECT_DOUBLE_EQ(c.distinct, 0.25);
  EXPECT_DOUBLE_EQ(c.top_template, 1.0);  // "a person who" is in no truth (byte-order first of the 100 % 3-grams)
  EXPECT_EQ(c.template_ngram, "a person who");
  // A template shared by 2 of 4 recoveries, one of which says it truly: counted once.
  const std::vector<std::string> rec{"the cat sat", "he lived in the united states", "in the united states", "x"};
  const auto r = daei::text_shape(rec, truths);
  EXPECT_DOUBLE_EQ(r.distinct, 1.0);
  EXPECT_DOUBLE_EQ(r.top_template, 0.25);
  EXPECT_EQ(r.template_ngram, "he lived in");
  EXPECT_THROW(daei::text_shape({"a"}, {}), std::invalid_argument);
}

TEST(TextShape, PenaltyArtefactsAndShares) {
  EXPECT_TRUE(daei::has_penalty_artefact("The the cat"));
  EXPECT_TRUE(daei::has_penalty_artefact("made OF of wood"));
  EXPECT_TRUE(daei::has_penalty_artefact("a thethe cat"));  // the spaceless twin of a banned piece
  EXPECT_TRUE(daei::has_penalty_artefact("OfOf"));
  EXPECT_FALSE(daei::has_penalty_artefact("the the cat"));  // an exact repeat is a loop, not an artefact
  EXPECT_FALSE(daei::has_penalty_artefact("The cat, the dog"));
  EXPECT_FALSE(daei::has_penalty_artefact("aa bb 1212"));  // halves under two letters, or digits
  EXPECT_FALSE(daei::has_penalty_artefact(""));
  const auto s = daei::text_shape({"The the", "x y", "a b c d a b c d", "go go go go"}, {"1", "2", "3", "4"});
  EXPECT_DOUBLE_EQ(s.artefacts, 0.25);
  EXPECT_DOUBLE_EQ(s.loops, 0.75);  // "The the" (loops compare without case), the 4-word cycle, "go go"
  EXPECT_DOUBLE_EQ(s.repeat4, 0.25);
}

// The table's own scoring (score_system): a constant system scores exactly the constant floor's mean token F1 and
// distinct 1/n; a system that returns the truth scores token F1 1 and distinct 100 %.
TEST(FloorScoring, ConstantAndTruthRowsThroughScoreSystem) {
  daei::EvalSplit split;
  split.name = "test";
  split.texts = kTexts;
  split.clean = torch::eye(5, 8);
  split.noisy = split.clean.clone();
  auto embed = [](const std::vector<std::string>& t) { return torch::ones({static_cast<int64_t>(t.size()), 8}); };
  daei::EvalOptions opt;
  opt.bootstrap = 50;
  const auto c = daei::choose_constant_floor(kTexts);
  const auto constant =
      daei::score_system(split, kTexts, daei::texts_run(std::vector<std::string>(5, c.text)), embed, opt);
  EXPECT_DOUBLE_EQ(constant.mean.at("token_f1"), c.mean_token_f1);
  EXPECT_DOUBLE_EQ(constant.mean.at("distinct"), 0.2);
  const auto truth = daei::score_system(split, kTexts, daei::texts_run(kTexts), embed, opt);
  EXPECT_DOUBLE_EQ(truth.mean.at("token_f1"), 1.0);
  EXPECT_DOUBLE_EQ(truth.mean.at("distinct"), 1.0);
  EXPECT_DOUBLE_EQ(truth.mean.at("top_template"), 0.0);
}
