// The T5 inverter guided by the bag of words (issue 65 item 4): the folds partition the training rows, each row's
// guide comes from a fold model that never saw its text, the inverter reads its guide (and not the guide's padding),
// a guided inverter refuses to decode without one, and its folder keeps the guide's settings.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "../support/temp_dir.h"
#include "../support/toy_run.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "dist/communicator.h"
#include "model/attack/inverter.h"
#include "model/net/generate.h"
#include "stages/recipes/guided.h"
#include "stages/recipes/stage2.h"

using namespace daei;

namespace {

// Rows whose text and input name the row ("row 7", input 7), so a mapping can be read back.
InverterTrainData numbered_rows(int64_t n) {
  InverterTrainData d;
  d.rows = n, d.dim = 1, d.input = "noisy";
  d.embeddings = [](const std::vector<int64_t>& r) {
    return torch::tensor(std::vector<float>(r.begin(), r.end())).unsqueeze(1);
  };
  d.texts = [](const std::vector<int64_t>& r) {
    std::vector<std::string> t;
    for (int64_t i : r) t.push_back("row " + std::to_string(i));
    return t;
  };
  return d;
}

std::vector<int64_t> read_back(const InverterTrainData& d) {
  std::vector<int64_t> all(static_cast<size_t>(d.rows));
  for (int64_t i = 0; i < d.rows; ++i) all[static_cast<size_t>(i)] = i;
  std::vector<int64_t> rows;
  const auto e = d.embeddings(all);
  for (int64_t i = 0; i < d.rows; ++i) {
    rows.push_back(static_cast<int64_t>(e[i][0].item<float>()));
    EXPECT_EQ(d.texts({i})[0], "row " + std::to_string(rows.back()));
  }
  return rows;
}

Inverter tiny_inverter(int64_t guide_words) {
  torch::manual_seed(test::seed(11));
  InverterConfig c;
  c.dim = 12, c.repeat = 4;
  c.t5.vocab_size = 50, c.t5.d_model = 16, c.t5.d_kv = 4, c.t5.d_ff = 32, c.t5.num_layers = 1;
  c.t5.num_decoder_layers = 1, c.t5.num_heads = 2, c.t5.dropout_rate = 0.0;
  c.guide_words = guide_words;
  c.guide_bow = guide_words > 0 ? "bow-noisy" : "";
  c.guide_pieces = guide_words > 0 ? 8 : 0;
  Inverter inv(c);
  inv->eval();
  return inv;
}

}  // namespace

TEST(Guided, FoldsPartitionTheTrainingRows) {
  const auto data = numbered_rows(11);
  for (int64_t folds : {2, 3}) {
    std::multiset<int64_t> held_union;
    for (int64_t f = 0; f < folds; ++f) {
      const auto held = read_back(fold_rows(data, folds, f, true));
      const auto rest = read_back(fold_rows(data, folds, f, false));
      std::vector<int64_t> want_held, want_rest;
      for (int64_t r = 0; r < 11; ++r) (r % folds == f ? want_held : want_rest).push_back(r);
      EXPECT_EQ(held, want_held) << "fold " << f << " of " << folds;
      EXPECT_EQ(rest, want_rest) << "fold " << f << " of " << folds;
      held_union.insert(held.begin(), held.end());
    }
    EXPECT_EQ(held_union.size(), 11u);
    EXPECT_EQ(std::set<int64_t>(held_union.begin(), held_union.end()).size(), 11u);  // each row in one fold
  }
  EXPECT_THROW(fold_rows(data, 1, 0, true), Error);
  EXPECT_THROW(fold_rows(data, 2, 2, true), Error);
}

// Each text holds a word no other text holds: a fold model's vocabulary (its own training texts) must hold every
// such word of the other folds and none of its own fold's, so no row's guide can come from a model that read it.
TEST(Guided, EachRowIsGuidedByAModelThatNeverSawIt) {
  const TempDir tmp("guided-folds");
  LocalCommunicator one;
  auto texts = test::toy_texts(60, 31);
  for (size_t i = 0; i < texts.size(); ++i) texts[i] += " zq" + std::to_string(i);
  auto train = test::toy_dataset(texts, 16, 0.05, 5), val = test::toy_dataset(test::toy_texts(20, 32), 16, 0.05, 6);
  auto cfg = test::toy_config(4, 8);
  for (const std::string s : {"bow.hidden=16", "bow.batch_size=8", "bow.steps=4", "bow.warmup_steps=1",
                              "bow.eval_every=0", "bow.k_max=4", "bow.k_rows=20", "bow.vocab_size=1000",
                              "guided.folds=3", "guided.words=5"})
    cfg.set(s, "test");
  std::vector<std::string> lines;
  ASSERT_EQ(fold_guidance(cfg, one, "guided-noisy", tmp.str(), noisy_data(train), noisy_data(val), false, false, lines),
            0);
  ASSERT_EQ(lines.size(), texts.size());
  for (int64_t f = 0; f < 3; ++f) {
    const auto j = nlohmann::json::parse(read_file(fmt::format("{}/folds/{}/final/bow/bow.json", tmp.str(), f)));
    const auto words = j.at("words").get<std::vector<std::string>>();
    const std::set<std::string> vocab(words.begin(), words.end());
    for (size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(vocab.count("zq" + std::to_string(i)), static_cast<int64_t>(i) % 3 == f ? 0u : 1u)
          << "fold " << f << ", row " << i;
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    std::istringstream in(lines[i]);
    int n = 0;
    for (std::string w; in >> w; ++n) EXPECT_NE(w, "zq" + std::to_string(i)) << "row " << i << ": " << lines[i];
    EXPECT_EQ(n, 5) << lines[i];
  }
  // Made once: a second call reads the file, even without the fold models.
  std::filesystem::remove_all(tmp.str() + "/folds");
  std::vector<std::string> again;
  ASSERT_EQ(fold_guidance(cfg, one, "guided-noisy", tmp.str(), noisy_data(train), noisy_data(val), false, false, again),
            0);
  EXPECT_EQ(again, lines);
}

TEST(Guided, InverterReadsItsGuideAndNotItsPadding) {
  auto inv = tiny_inverter(3);
  auto e = torch::randn({2, 12});
  auto labels = labels_from_rows({{5, 6, 1}, {7, 8, 9, 1}});
  const InverterGuide guide{torch::tensor({7, 8, 1, 0, 9, 1, 0, 0}, torch::kLong).reshape({2, 4}),
                            torch::tensor({1, 1, 1, 0, 1, 1, 0, 0}, torch::kLong).reshape({2, 4})};
  const InverterGuide padded{torch::cat({guide.ids, torch::zeros({2, 3}, torch::kLong)}, 1),
                             torch::cat({guide.mask, torch::zeros({2, 3}, torch::kLong)}, 1)};
  const InverterGuide other{torch::tensor({20, 21, 1, 0, 22, 1, 0, 0}, torch::kLong).reshape({2, 4}), guide.mask};
  const double base = inv->loss(e, labels, &guide).sum.item<double>();
  EXPECT_NEAR(inv->loss(e, labels, &padded).sum.item<double>(), base, 1e-5);
  EXPECT_GT(std::abs(inv->loss(e, labels, &other).sum.item<double>() - base), 1e-4);
  GenerateOptions g;
  g.max_length = 6;
  EXPECT_TRUE(torch::equal(inv->generate(e, g, &guide), inv->generate(e, g, &padded)));
  EXPECT_THROW(inv->loss(e, labels), Error);     // guided, no guide
  EXPECT_THROW(inv->generate(e, g), Error);
  EXPECT_THROW(tiny_inverter(0)->loss(e, labels, &guide), Error);  // unguided, a guide
  // The folder keeps the guide's settings; the reloaded model gives the same loss.
  const TempDir tmp("guided-inverter");
  inv->save(tmp.str());
  auto back = InverterImpl::load(tmp.str());
  EXPECT_EQ(back->cfg.guide_words, 3);
  EXPECT_EQ(back->cfg.guide_bow, "bow-noisy");
  EXPECT_EQ(back->cfg.guide_pieces, 8);
  EXPECT_NEAR(back->loss(e, labels, &guide).sum.item<double>(), base, 1e-5);
}

// The copy gate (guided.copy): the loss is the cross-entropy of the model's logits raised by softplus(gate) on the
// row's guide pieces (pad, eos and masked positions left out), computed here from the T5's own full logits; decoding
// with a wide-open gate writes only the row's own guide pieces, greedy and beam alike; the gate learns and survives
// the folder.
TEST(Guided, CopyGateRaisesTheGuidesPiecesInLossAndDecoding) {
  EXPECT_THROW(tiny_inverter(0)->enable_guide_copy(), Error);
  auto inv = tiny_inverter(3);
  inv->enable_guide_copy();
  auto e = torch::randn({2, 12});
  auto labels = labels_from_rows({{5, 7, 1}, {9, 8, 9, 1}});
  const InverterGuide guide{torch::tensor({7, 8, 1, 0, 9, 1, 0, 8}, torch::kLong).reshape({2, 4}),
                            torch::tensor({1, 1, 1, 0, 1, 1, 0, 0}, torch::kLong).reshape({2, 4})};
  const auto pieces = inv->guide_piece_mask(guide);
  EXPECT_EQ(pieces.sum().item<double>(), 3.0);
  EXPECT_EQ(pieces[0][7].item<float>() + pieces[0][8].item<float>() + pieces[1][9].item<float>(), 3.0f);
  {
    torch::NoGradGuard ng;
    inv->copy_gate->bias.fill_(2.0);
  }
  const double raise = std::log1p(std::exp(2.0));
  at::Tensor mask;
  auto x = inv->encoder_inputs(e, &guide, mask);
  auto logits = inv->t5->forward(x, mask, labels).logits + raise * pieces.unsqueeze(1);
  const double reference =
      at::cross_entropy_loss(logits.reshape({-1, 50}), labels.reshape({-1}), {}, at::Reduction::Sum, -100)
          .item<double>();
  auto l = inv->loss(e, labels, &guide);
  EXPECT_EQ(l.count, 7);
  EXPECT_NEAR(l.sum.item<double>(), reference, 1e-4 * std::abs(reference));
  l.sum.backward();
  ASSERT_TRUE(inv->copy_gate->bias.grad().defined());
  EXPECT_GT(inv->copy_gate->bias.grad().abs().item<double>(), 0.0);
  EXPECT_GT(inv->copy_gate->weight.grad().abs().sum().item<double>(), 0.0);
  // A wide-open gate: every written token is one of its row's guide pieces (eos is not one: all 5 steps write).
  {
    torch::NoGradGuard ng;
    inv->copy_gate->bias.fill_(60.0);
  }
  for (const int64_t beams : {1, 2}) {
    GenerateOptions g = with_beams(beams);
    g.max_length = 6;
    const auto out = inv->generate(e, g, &guide);
    ASSERT_EQ(out.size(0), 2);
    for (int64_t t = 1; t < out.size(1); ++t) {
      const int64_t a = out[0][t].item<int64_t>(), b = out[1][t].item<int64_t>();
      EXPECT_TRUE(a == 7 || a == 8) << "beams " << beams << " step " << t << ": " << a;
      EXPECT_EQ(b, 9) << "beams " << beams << " step " << t;
    }
  }
  {
    torch::NoGradGuard ng;
    inv->copy_gate->bias.fill_(1.0);
    inv->copy_gate->weight.normal_();
  }
  const TempDir tmp("guided-copy");
  inv->save(tmp.str());
  auto back = InverterImpl::load(tmp.str());
  EXPECT_TRUE(back->cfg.guide_copy);
  EXPECT_NEAR(back->loss(e, labels, &guide).sum.item<double>(), inv->loss(e, labels, &guide).sum.item<double>(), 1e-5);
  GenerateOptions g;
  g.max_length = 6;
  EXPECT_TRUE(torch::equal(back->generate(e, g, &guide), inv->generate(e, g, &guide)));
}

// A guided inverter stage trains on guide lines and records them in its final folder; lines for an unguided stage
// are refused.
TEST(Guided, StageTrainsOnGuideLines) {
  const TempDir tmp("guided-stage");
  LocalCommunicator one;
  const auto texts = test::toy_texts(32, 33);
  auto data = test::toy_dataset(texts, 16, 0.04);
  auto cfg = test::toy_config(3, 8);
  auto tok = run_tokenizer(cfg, one, tmp.str(), *data);
  auto lines = std::make_shared<const std::vector<std::string>>(texts);  // the text itself as its guide
  InverterBudget b;
  b.guide_words = 4, b.guide_bow = "bow-noisy", b.guide_pieces = 10;
  {
    InverterStage s(cfg, one, "guided-noisy", tmp.str() + "/g", with_guides(noisy_data(data), lines), tok, false,
                    false, b);
    ASSERT_EQ(s.run(), kExitOk);
  }
  auto inv = InverterImpl::load(tmp.str() + "/g/final/inverter");
  EXPECT_EQ(inv->cfg.guide_words, 4);
  EXPECT_EQ(inv->cfg.guide_pieces, 10);
  EXPECT_THROW(InverterStage(cfg, one, "noisy-inverter", tmp.str() + "/n", with_guides(noisy_data(data), lines), tok,
                             false, false),
               Error);
}
