// Issue 48: each generator's decoding keys reach its decoder, and only its own. eval.* decodes the evaluation's
// inverter rows and stage 3's selection, correct.* the correctors' search at eval, hypotheses.* the correctors'
// training hypotheses (their cache: test_hypotheses.cpp).
#include <tuple>
#include <type_traits>

#include "../support/corrector_fixtures.h"
#include "../support/toy_run.h"
#include "core/config.h"
#include "dist/communicator.h"
#include "eval/systems.h"
#include "model/net/generate.h"
#include "model/release/release.h"
#include "stages/loop/trainer.h"
#include "stages/recipes/stage1.h"
#include "stages/recipes/stage2.h"
#include "stages/recipes/stage3.h"

using namespace daei;
using namespace daei::corrector_test;

namespace {

struct Chain {
  std::string section, beams_key;
  GenerateOptions (*decoding)(const Config&);
};
const std::vector<Chain>& chains() {
  static const std::vector<Chain> c{{"eval", "num_beams", eval_decoding},
                                    {"correct", "beam", correct_decoding},
                                    {"hypotheses", "num_beams", hypotheses_decoding}};
  return c;
}

// Every field of the options, so that a key landing in the wrong field is seen.
auto fields(const GenerateOptions& g) {
  return std::make_tuple(g.max_length, g.min_length, g.num_beams, g.length_penalty, g.early_stopping,
                         g.repetition_penalty, g.no_repeat_ngram_size, g.num_return_sequences, g.use_cache);
}

Config quiet_defaults() {
  // Controls off and greedy, so that the decodes below differ by the one key a test sets.
  auto cfg = Config::defaults();
  for (const auto& c : chains()) {
    cfg.set(c.section + "." + c.beams_key + "=1", "test");
    cfg.set(c.section + ".no_repeat_ngram_size=0", "test");
    cfg.set(c.section + ".repetition_penalty=1.0", "test");
  }
  cfg.set("inverter.max_length_eval=12", "test");
  return cfg;
}

}  // namespace

TEST(DecodingChains, EachSectionsKeysReachItsChainAndNoOther) {
  const auto base = Config::defaults();
  // The defaults as configs/defaults/*.yaml write them.
  for (const auto& c : chains()) {
    const auto g = c.decoding(base);
    EXPECT_EQ(g.max_length, base.integer("inverter.max_length_eval")) << c.section;
    EXPECT_EQ(g.num_beams, c.section == "correct" ? 3 : 1) << c.section;
    EXPECT_EQ(g.no_repeat_ngram_size, 3) << c.section;
    EXPECT_EQ(g.repetition_penalty, 2.0) << c.section;
    EXPECT_EQ(g.length_penalty, 1.0) << c.section;
  }
  // One key at a time: its value arrives, exactly, in its field of its own chain; every other field of that chain
  // and every field of the other chains stay as they were.
  struct Key {
    std::string name, value;
    std::function<void(GenerateOptions&)> expect;
  };
  for (const auto& c : chains()) {
    const std::vector<Key> keys{
        {c.beams_key, "5", [](GenerateOptions& g) { g.num_beams = 5; }},
        {"no_repeat_ngram_size", "4", [](GenerateOptions& g) { g.no_repeat_ngram_size = 4; }},
        {"repetition_penalty", "1.25", [](GenerateOptions& g) { g.repetition_penalty = 1.25; }},
        {"length_penalty", "-0.5", [](GenerateOptions& g) { g.length_penalty = -0.5; }}};
    for (const auto& k : keys) {
      auto cfg = base;
      cfg.set(c.section + "." + k.name + "=" + k.value, "test");
      for (const auto& other : chains()) {
        auto want = other.decoding(base);
        if (other.section == c.section) k.expect(want);
        EXPECT_EQ(fields(other.decoding(cfg)), fields(want)) << c.section << "." << k.name << " in " << other.section;
      }
    }
  }
  // The length every chain decodes to.
  auto cfg = base;
  cfg.set("inverter.max_length_eval=17", "test");
  for (const auto& c : chains()) EXPECT_EQ(c.decoding(cfg).max_length, 17) << c.section;
}

// Issue 64: an EvalContext is made only with the run's release (the DAE table and the floors dereference it).
static_assert(!std::is_default_constructible_v<EvalContext>, "EvalContext must be built with the run's release");

// eval.* reaches the inverter rows' decoder (decode_texts, which every inverter row and the sweep call): an n-gram
// ban of 1 changes what a tiny seeded inverter recovers, and the recoveries are those of its decoder with eval.*.
TEST(DecodingChains, EvalKeysChangeTheInverterRowsRecoveries) {
  auto inv = tiny_inverter();
  inv->eval();
  torch::manual_seed(test::seed(21));
  const auto e = torch::randn({6, kDim});
  auto cfg = quiet_defaults();
  EvalContext ctx(Release(cfg, 0.04));
  // The fixture's tokenizer lives as long as the test binary: an owner-less shared_ptr to it.
  ctx.tok = std::shared_ptr<SpmTokenizer>(std::shared_ptr<SpmTokenizer>(), const_cast<SpmTokenizer*>(&tokenizer()));
  ctx.batch_size = 8;  // one batch, as the direct decode below
  ctx.decoding = eval_decoding(cfg);
  ctx.max_length_eval = cfg.integer("inverter.max_length_eval");
  const auto plain = decode_texts(ctx, *inv, e, "plain");
  cfg.set("eval.no_repeat_ngram_size=1", "test");
  ctx.decoding = eval_decoding(cfg);
  const auto banned = decode_texts(ctx, *inv, e, "banned");
  EXPECT_NE(plain, banned);
  torch::NoGradGuard ng;
  EXPECT_EQ(banned, tokenizer().decode_batch(inv->generate(e, eval_decoding(cfg))));
  // Every id of a recovery once at most (the start token included): the ban reached the decoder.
  const auto ids = inv->generate(e, eval_decoding(cfg)).cpu();
  for (int64_t r = 0; r < ids.size(0); ++r) {
    std::set<int64_t> seen;
    for (int64_t t = 0; t < ids.size(1); ++t) {
      const int64_t id = ids[r][t].item<int64_t>();
      if (id == 0 && t > 0) break;  // pad after the sequence's end
      EXPECT_TRUE(seen.insert(id).second) << "row " << r << " repeats " << id;
    }
  }
}

// correct.* reaches the correctors' search (run_correction's corrector calls): the texts a round proposes, and
// queries, change with correct.no_repeat_ngram_size and with correct.beam.
TEST(DecodingChains, CorrectKeysChangeTheCorrectorsCandidates) {
  auto m = lively_corrector();
  auto in = correction_inputs(3);
  const auto release = noisy_embedder();
  auto proposed = [&](const Config& cfg) {
    CorrectionOptions o;
    o.max_steps = 1;
    o.early_stop = false;
    o.max_length = cfg.integer("inverter.max_length_eval");
    o.decoding = correct_decoding(cfg);
    std::vector<std::string> texts;
    QueryFn box = [&texts, &release](const std::vector<std::string>& t, const std::vector<std::string>& k) {
      texts.insert(texts.end(), t.begin(), t.end());
      return release->embed(t, k);
    };
    run_correction(in.y, in.initial, in.ids, box, toy_dae(), *m, tokenizer(), o);
    return texts;
  };
  auto cfg = quiet_defaults();
  cfg.set("correct.beam=2", "test");
  const auto plain = proposed(cfg);
  auto banned_cfg = cfg;
  banned_cfg.set("correct.no_repeat_ngram_size=1", "test");
  EXPECT_NE(proposed(banned_cfg), plain);
  auto wider_cfg = cfg;
  wider_cfg.set("correct.beam=3", "test");
  const auto wider = proposed(wider_cfg);
  EXPECT_GT(wider.size(), plain.size());  // s·s candidates a text a round: more beams, more to query
}

// eval.* reaches stage 3's selection (stage3.select_by heldout_bleu), which decodes the held-out rows as the
// evaluation's inverter rows do (it decoded greedily without the controls before). One evaluation, at the last
// step: the recoveries the score saw are the final models' decoded with eval.*, which here differ from a plain
// greedy decode.
TEST(DecodingChains, EvalKeysReachStage3sSelection) {
  TempDir dir("decoding-stage3");
  LocalCommunicator one;
  auto data = test::toy_dataset(test::toy_texts(48), 16, 0.04);
  auto tok = run_tokenizer(test::toy_config(1, 4), one, dir.str(), *data);
  auto cfg = test::toy_config(2, 8);
  for (const std::string s : {"stage3.eval_every=2", "train.heldout_rows=5", "stage3.lambda_warmup_steps=0",
                              "eval.num_beams=2", "eval.no_repeat_ngram_size=1", "eval.repetition_penalty=1.5",
                              "eval.length_penalty=0.5"})
    cfg.set(s, "test");
  {
    torch::manual_seed(test::seed(4));
    Dae dae(dae_options(cfg, 16));
    dae->set_sigma0(0.04);
    dae->save(dir.str() + "/dae0");
    make_inverter(cfg, 16, tok->vocab_size())->save(dir.str() + "/inv0");
  }
  std::vector<std::string> seen;
  {
    Stage3 s(cfg, one, dir.str() + "/sel", data, tok, dir.str() + "/dae0", dir.str() + "/inv0", false, false);
    s.select_by([&seen](const std::string& hyp, const std::string&) {
      seen.push_back(hyp);
      return 0.5;
    });
    s.enable_heldout(cfg, one, data);
    ASSERT_EQ(s.run(), kExitOk);
  }
  ASSERT_EQ(seen.size(), 5u);
  Dae dae = Dae::load(dir.str() + "/sel/final/dae");
  const double sigma0 = dae->sigma0();
  auto inv = InverterImpl::load(dir.str() + "/sel/final/inverter");
  dae->eval();
  inv->eval();
  torch::NoGradGuard ng;
  const auto y = data->noisy({0, 1, 2, 3, 4});
  const auto e = dae->forward(y, torch::full({y.size(0)}, sigma0, y.options()));
  EXPECT_EQ(seen, tok->decode_batch(inv->generate(e, eval_decoding(cfg))));
  GenerateOptions greedy;
  greedy.max_length = cfg.integer("inverter.max_length_eval");
  EXPECT_NE(seen, tok->decode_batch(inv->generate(e, greedy)));  // else the test could not tell the two apart
}
