// The stage catalogue (src/stages/recipes/catalogue.h) and the config guard that reads it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/config_guard.h"
#include "core/config.h"
#include "stages/recipes/catalogue.h"

using namespace daei;

namespace {

void leaf_keys(const YAML::Node& n, const std::string& prefix, std::vector<std::string>& out) {
  if (!n.IsMap()) {
    out.push_back(prefix);
    return;
  }
  for (const auto& kv : n) leaf_keys(kv.second, (prefix.empty() ? "" : prefix + ".") + kv.first.as<std::string>(), out);
}

// "key: entry entry ..." for every key of the defaults, the entries sorted (the guard lists them in the stages'
// order, which is not what the table pins).
std::string guard_table() {
  std::vector<std::string> keys;
  leaf_keys(Config::defaults().root(), "", keys);
  std::ostringstream os;
  for (const auto& k : keys) {
    auto fed = cli::work_depending_on(k);
    std::set<std::string> sorted(fed.begin(), fed.end());
    os << k << ":";
    for (const auto& e : sorted) os << " " << e;
    os << "\n";
  }
  return os.str();
}

}  // namespace

// tests/fixtures/config_guard_table.txt was written by the guard's hand-written lists before the stage catalogue
// (at 45af259, DAEI_WRITE_GUARD_TABLE=FILE build/daei_tests --gtest_filter=Catalogue.TheGuardFeedsWhatItFedBefore):
// deriving the lists from the catalogue changes no key's saved work. Two lines were corrected by hand since:
// stage2.noisy_steps and stage2.noisy_lr feed noisy-inverter/ alone (the old rule "stage2.noisy_" matched no key).
// Issue 49 added two keys: eval.imported (nothing saved) and inverter.init_from (the fresh inverters and what starts
// from them, InitFromFeedsTheInvertersAndWhatStartsFromThem below). Issue 65 added the bag-of-words stages (bow-noisy,
// bow-dae, bow-clean: the bow.* keys, and every key that feeds all seeded stages) and nothing else. Its item 4 added the
// guided inverters (guided-noisy, guided-dae, guided-clean: the guided.* keys, the bow.* keys their fold models train
// on, stage 2's budget and every key that feeds the fresh T5 inverters), then guided.copy (the copy gate).
TEST(Catalogue, TheGuardFeedsWhatItFedBefore) {
  const std::string table = guard_table();
  if (const char* out = std::getenv("DAEI_WRITE_GUARD_TABLE")) {
    std::ofstream(out) << table;
    GTEST_SKIP() << "wrote " << out;
  }
  std::ifstream in(std::string(DAEI_FIXTURES) + "/config_guard_table.txt");
  ASSERT_TRUE(in) << "missing tests/fixtures/config_guard_table.txt";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(table, want.str());
}

// The catalogue is the pipeline's order of the trained stages, each stage once, every corrector chain an entry.
TEST(Catalogue, OneEntryAStageInThePipelinesOrder) {
  std::vector<std::string> names;
  std::set<std::string> folders;
  for (const auto& s : stage_catalogue()) {
    names.push_back(s.name);
    EXPECT_TRUE(folders.insert(s.folder).second) << s.folder;
    EXPECT_EQ(find_stage(s.name), &s);
    EXPECT_FALSE(s.budget.empty()) << s.name;
  }
  const std::vector<std::string> want{"1", "pretrain", "2", "noisy-inverter", "wiener-inverter", "clean-inverter",
                                      "3", "stage2-continued", "bow-noisy", "bow-dae", "bow-clean",
                                      "guided-noisy", "guided-dae", "guided-clean", "4",
                                      "dae-corrector", "noisy-corrector",
                                      "dae-continued-corrector", "clean-corrector", "lm", "embedder"};
  EXPECT_EQ(names, want);
  for (const auto& c : corrector_chains()) {
    const StageSpec* s = find_stage(c.stage);
    ASSERT_NE(s, nullptr) << c.stage;
    EXPECT_EQ(s->chain, &c);
    EXPECT_EQ(s->folder, c.folder);
    EXPECT_EQ(s->budget, "stage4");
  }
  EXPECT_EQ(find_stage("nope"), nullptr);
  EXPECT_EQ(find_stage("dae-corrector")->needs, (std::vector<std::string>{"stage2", "stage1"}));
  EXPECT_EQ(find_stage("4")->needs, (std::vector<std::string>{"stage3"}));
  EXPECT_EQ(find_stage("noisy-corrector")->needs, (std::vector<std::string>{"noisy-inverter"}));
  EXPECT_EQ(find_stage("noisy-corrector")->inputs,
            "no DAE, cache/hyp-train-noisy, warm start from noisy-inverter/final/inverter");
}

// Which stages the pipeline runs: the defaults, then each flag that adds one.
TEST(Catalogue, ThePipelineRunsAStageWhereItsFlagsAskForIt) {
  auto planned = [](const std::vector<std::string>& sets) {
    Config cfg = Config::defaults();
    for (const auto& a : sets) cfg.set(a);
    std::vector<std::string> out;
    for (const auto& s : stage_catalogue())
      if (runs_in_pipeline(s, cfg)) out.push_back(s.name);
    return out;
  };
  const auto base = planned({"reference.enabled=false", "stage2.wiener_inverter=false", "stage3.control=false",
                             "pretrain.enabled=false", "zsinvert.enabled=false"});
  EXPECT_EQ(base, (std::vector<std::string>{"1", "2", "noisy-inverter", "3", "4", "dae-corrector", "noisy-corrector"}));
  const auto all = planned({"reference.enabled=true", "reference.corrector=true", "stage2.wiener_inverter=true",
                            "stage3.control=true", "stage4.continued_corrector=true", "pretrain.enabled=true",
                            "zsinvert.enabled=true", "bow.enabled=true", "guided.enabled=true"});
  EXPECT_EQ(all.size(), stage_catalogue().size() - 1);  // every stage but the defender's embedder
  // The reference bag-of-words row needs both its flags.
  const auto bow = planned({"bow.enabled=true", "reference.enabled=false"});
  EXPECT_NE(std::find(bow.begin(), bow.end(), "bow-dae"), bow.end());
  EXPECT_EQ(std::find(bow.begin(), bow.end(), "bow-clean"), bow.end());
  EXPECT_EQ(std::find(bow.begin(), bow.end(), "guided-noisy"), bow.end());  // guided.enabled adds the guided rows
  const auto guided = planned({"bow.enabled=true", "guided.enabled=true", "reference.enabled=false"});
  EXPECT_NE(std::find(guided.begin(), guided.end(), "guided-dae"), guided.end());
  EXPECT_EQ(std::find(guided.begin(), guided.end(), "guided-clean"), guided.end());
  EXPECT_EQ(std::find(all.begin(), all.end(), "embedder"), all.end());
  // Each chain's own condition: the clean corrector needs both reference flags, the continued one both control flags.
  const auto half = planned({"reference.enabled=true", "reference.corrector=false", "stage3.control=true",
                             "stage4.continued_corrector=false"});
  EXPECT_EQ(std::find(half.begin(), half.end(), "clean-corrector"), half.end());
  EXPECT_EQ(std::find(half.begin(), half.end(), "dae-continued-corrector"), half.end());
  EXPECT_NE(std::find(half.begin(), half.end(), "stage2-continued"), half.end());
  EXPECT_NE(std::find(half.begin(), half.end(), "clean-inverter"), half.end());
}

// The noisy baseline's budget feeds its inverter alone: a budget switch on a run whose stage 2 is saved is accepted
// (issue 46's one-switch runs; a prefix rule without its trailing dot once matched nothing and refused it).
TEST(Catalogue, TheNoisyBudgetFeedsTheNoisyInverterAlone) {
  for (const char* key : {"stage2.noisy_steps", "stage2.noisy_lr"})
    EXPECT_EQ(cli::work_depending_on(key), std::vector<std::string>{"noisy-inverter"}) << key;
  const auto lr = cli::work_depending_on("stage2.lr");
  EXPECT_NE(std::find(lr.begin(), lr.end(), "stage2"), lr.end());
}

// inverter.init_from (issue 49) is where every fresh inverter starts: a change of it invalidates those inverters and
// everything that starts from them (stage 3, the control, the correctors and their hypotheses), nothing upstream.
TEST(Catalogue, InitFromFeedsTheInvertersAndWhatStartsFromThem) {
  const auto fed = cli::work_depending_on("inverter.init_from");
  const std::set<std::string> got(fed.begin(), fed.end());
  for (const char* e : {"stage2", "noisy-inverter", "wiener-inverter", "clean-inverter", "stage3", "stage2-continued",
                        "stage4", "dae-corrector", "noisy-corrector", "dae-continued-corrector", "clean-corrector",
                        "cache/hyp-train", "cache/hyp-train-noisy"})
    EXPECT_TRUE(got.count(e)) << e;
  for (const char* e : {"corpus", "cache", "tokenizer", "stage1", "pretrain", "lm", "embedder"})
    EXPECT_FALSE(got.count(e)) << e;
  EXPECT_TRUE(cli::work_depending_on("eval.imported").empty());  // read by eval alone
}

// Eval's rows come from the catalogue's table (eval_rows): each names a stage that exists, a corrected row follows
// the inverter row it corrects, every corrector chain has its row, and the table keeps the order results.md shows.
TEST(Catalogue, EveryEvalRowNamesATrainedStageAndFollowsItsRoundZero) {
  std::set<std::string> folders;
  for (const auto& s : stage_catalogue()) folders.insert(s.folder);
  std::vector<std::string> seen;
  for (const auto& r : eval_rows()) {
    EXPECT_TRUE(r.stage.empty() || folders.count(r.stage)) << r.system << ": no stage " << r.stage;
    EXPECT_EQ(r.round0.empty(), r.reads != RowReads::corrected) << r.system;
    if (!r.round0.empty()) {
      EXPECT_NE(std::find(seen.begin(), seen.end(), r.round0), seen.end()) << r.system << " before " << r.round0;
      const EvalRowSpec* round0 = find_eval_row(r.round0);
      ASSERT_NE(round0, nullptr) << r.round0;
      EXPECT_NE(round0->reads, RowReads::corrected) << r.system << " corrects a corrected row";
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), r.system), 0) << r.system << " twice";
    seen.push_back(r.system);
  }
  for (const auto& c : corrector_chains()) {
    const EvalRowSpec* row = find_eval_row(c.system);
    ASSERT_NE(row, nullptr) << c.stage << ": no row " << c.system;
    EXPECT_EQ(row->stage, c.folder);
    EXPECT_EQ(find_eval_row(row->round0)->stage, c.inverter_stage) << c.system;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "clean-to-clean", "clean-to-clean-corrected", "clean-to-noisy", "clean-to-noisy-corrected",
                      "imported-inverter", "imported-vec2text", "noisy-inverter", "noisy-vec2text", "wiener-inverter",
                      "dae-only", "dae-corrected", "dae-only-continued", "dae-corrected-continued",
                      "joint-no-corrector", "daei", "daei-clean-hyp", "zsinvert", "zsinvert-dae", "bow-clean",
                      "bow-noisy", "bow-dae", "guided-clean", "guided-noisy", "guided-dae"}));
  // A guided inverter follows its bow stage (its guide at inference) and is a fresh T5 of stage 2's budget; the
  // bow.* keys feed its fold models, the guided.* keys it alone.
  EXPECT_EQ(find_stage("guided-dae")->needs, (std::vector<std::string>{"stage1", "bow-dae"}));
  EXPECT_TRUE(find_stage("guided-noisy")->t5 && find_stage("guided-noisy")->fresh_inverter);
  const auto bow_steps = cli::work_depending_on("bow.steps");
  EXPECT_NE(std::find(bow_steps.begin(), bow_steps.end(), "guided-clean"), bow_steps.end());
  EXPECT_EQ(cli::work_depending_on("guided.words"),
            (std::vector<std::string>{"guided-noisy", "guided-dae", "guided-clean"}));
  EXPECT_TRUE(cli::work_depending_on("guided.enabled").empty());
  EXPECT_EQ(eval_rows_of("bow-dae"), std::vector<std::string>{"bow-dae"});
  for (const auto& r : eval_rows()) EXPECT_EQ(r.bow, r.stage.rfind("bow-", 0) == 0) << r.system;
  EXPECT_FALSE(find_stage("bow-noisy")->t5);  // an MLP: the inverter.* and pretrain.* keys do not feed it
  EXPECT_EQ(find_stage("bow-dae")->needs, std::vector<std::string>{"stage1"});
  EXPECT_EQ(eval_rows_of("stage3"), std::vector<std::string>{"joint-no-corrector"});
  EXPECT_EQ(eval_rows_of("clean-inverter"), (std::vector<std::string>{"clean-to-clean", "clean-to-noisy"}));
  EXPECT_EQ(eval_rows_of("stage4"), (std::vector<std::string>{"daei", "daei-clean-hyp"}));
  EXPECT_EQ(eval_rows_of("pretrain"), std::vector<std::string>{});
}
