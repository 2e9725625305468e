// Issue 49: vec2text's imported models in a run. inverter.init_from starts stage 2 and the baseline inverters from
// the imported weights (equal at step 0, at the configured dropout); the eval's imported rows load the import folder.
// A folder of another shape, embedding dimension or tokenizer is refused in one line naming the key.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "../support/error_of.h"
#include "../support/temp_dir.h"
#include "../support/toy_run.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "dist/communicator.h"
#include "model/attack/imported_models.h"
#include "model/attack/vec2text_import.h"
#include "stages/recipes/stage2.h"

namespace fs = std::filesystem;
using namespace daei;

namespace {

const std::string kFixtures = std::string(DAEI_FIXTURES) + "/vec2text";

// The fixture's inverter (d 24, R 4, T5 vocab 40, d_model 32, 2 heads of 16, d_ff 64, 2+2 layers, relu) as `daei
// import vec2text` writes it, a run of that shape on 24-d toy rows, and the run's 40-piece tokenizer.
struct ImportedRun {
  TempDir tmp{"v2t-init"};
  std::string inverter_dir = tmp.str() + "/imported/inverter";
  std::shared_ptr<InMemoryDataset> data = test::toy_dataset(test::toy_texts(48), 24, 0.04);
  std::shared_ptr<SpmTokenizer> tok;
  Config cfg = test::toy_config(2, 8);
  ImportedRun() {
    load_vec2text_inverter(kFixtures + "/inverter")->save(inverter_dir);
    for (const std::string s : {"inverter.d_kv=16", "inverter.num_layers=2", "inverter.num_decoder_layers=2",
                                "inverter.dropout=0.1"})
      cfg.set(s, "test");
    cfg.set("inverter.init_from=" + inverter_dir, "test");
    LocalCommunicator one;
    tok = run_tokenizer(cfg, one, tmp.str() + "/run", *data);
  }
};

const auto refusal = [](const std::function<void()>& f) { return test::error_of(f); };

// A Config copy shares its YAML tree with the original (yaml-cpp nodes are references): a variant is a deep copy.
Config variant(const Config& base, const std::string& assignment) {
  Config c(YAML::Clone(base.root()));
  c.set(assignment, "test");
  return c;
}

void expect_one_line_with(const std::string& msg, const std::vector<std::string>& words) {
  EXPECT_NE(msg, "") << "not refused";
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << w << " not in: " << msg;
}

}  // namespace

TEST(Vec2TextInitFrom, StageTwoAndTheNoisyInverterStartFromTheImportedWeights) {
  ImportedRun r;
  ASSERT_EQ(r.tok->vocab_size(), 40);
  const TensorMap imported = module_state(*InverterImpl::load(r.inverter_dir));
  LocalCommunicator one;
  for (const std::string tag : {"stage2", "noisy-inverter"}) {
    InverterStage s(r.cfg, one, tag, r.tmp.str() + "/" + tag, noisy_data(r.data), r.tok, false, false);
    const TensorMap start = module_state(*s.inverter());
    ASSERT_EQ(start.size(), imported.size()) << tag;
    for (const auto& [k, v] : imported) {
      ASSERT_TRUE(start.count(k)) << tag << " " << k;
      EXPECT_TRUE(torch::equal(start.at(k), v)) << tag << " " << k;
    }
    EXPECT_DOUBLE_EQ(s.inverter()->cfg.t5.dropout_rate, 0.1);  // inverter.dropout, not the folder's
  }
}

TEST(Vec2TextInitFrom, AnotherShapeDimensionOrTokenizerIsRefusedInOneLine) {
  ImportedRun r;
  auto start = [&](const Config& cfg, int64_t dim) { inverter_from_init(cfg, dim, *r.tok); };
  EXPECT_EQ(refusal([&] { start(r.cfg, 24); }), "");

  const Config wide = variant(r.cfg, "inverter.d_model=64");
  expect_one_line_with(refusal([&] { start(wide, 24); }), {"inverter.init_from", "d_model 32", "inverter.d_model"});
  const Config repeat = variant(r.cfg, "inverter.repeat_tokens=16");
  expect_one_line_with(refusal([&] { start(repeat, 24); }), {"inverter.init_from", "inverter.repeat_tokens"});
  expect_one_line_with(refusal([&] { start(r.cfg, 100); }), {"inverter.init_from", "embedding dimension 24"});

  const Config missing = variant(r.cfg, "inverter.init_from=" + r.tmp.str() + "/nowhere");
  expect_one_line_with(refusal([&] { start(missing, 24); }), {"inverter.init_from", "not an inverter folder"});
  EXPECT_EQ(refusal([&] { init_from_folder(missing); }), refusal([&] { start(missing, 24); }));

  // A spiece.model beside the weights (copied by the import) must be the run's tokenizer, byte for byte.
  std::ofstream(r.inverter_dir + "/spiece.model") << "another tokenizer";
  expect_one_line_with(refusal([&] { start(r.cfg, 24); }),
                       {"inverter.init_from", "spiece.model", "inverter.tokenizer"});
  fs::copy_file(r.tok->path(), r.inverter_dir + "/spiece.model", fs::copy_options::overwrite_existing);
  EXPECT_EQ(refusal([&] { start(r.cfg, 24); }), "");
}

// Without a spiece.model the T5's vocabulary must be what the run's tokenizer gives a T5: its pieces, and at most
// T5's sentinels and padding beyond them (t5-base: 32000 pieces, 32128 rows).
TEST(Vec2TextInitFrom, AT5VocabularyOfAnotherTokenizerIsRefused) {
  ImportedRun r;
  const std::string dir = r.inverter_dir;
  EXPECT_EQ(refusal([&] { check_tokenizer_fits(dir, 40, *r.tok, "k"); }), "");
  EXPECT_EQ(refusal([&] { check_tokenizer_fits(dir, 40 + kT5RowsBeyondPieces, *r.tok, "k"); }), "");
  expect_one_line_with(refusal([&] { check_tokenizer_fits(dir, 32128, *r.tok, "eval.imported"); }),
                       {"eval.imported", "32128 token rows", "40 pieces"});
  expect_one_line_with(refusal([&] { check_tokenizer_fits(dir, 39, *r.tok, "k"); }), {"39 token rows"});
}

TEST(Vec2TextImportedRows, TheImportFolderIsCheckedAgainstTheRun) {
  ImportedRun r;
  const std::string dir = r.tmp.str() + "/imported";
  const auto inverter_only = load_imported_models(dir, 24, *r.tok, "eval.imported");
  ASSERT_TRUE(inverter_only.inverter);
  EXPECT_FALSE(inverter_only.corrector);
  EXPECT_EQ(inverter_only.inverter->cfg.dim, 24);
  expect_one_line_with(refusal([&] { load_imported_models(dir, 100, *r.tok, "eval.imported"); }),
                       {"eval.imported", "24-dimensional", "100-dimensional"});
  expect_one_line_with(refusal([&] { load_imported_models(dir + "-nowhere", 24, *r.tok, "eval.imported"); }),
                       {"eval.imported", "no such folder"});
  expect_one_line_with(refusal([&] { load_imported_models(r.inverter_dir, 24, *r.tok, "eval.imported"); }),
                       {"eval.imported", "daei import vec2text"});
  // vec2text's CorrectorEncoderModel reads 768-d embeddings (the fixture's too): not this 24-d run's.
  load_vec2text_corrector(kFixtures + "/corrector")->save(dir + "/corrector");
  expect_one_line_with(refusal([&] { load_imported_models(dir, 24, *r.tok, "eval.imported"); }),
                       {"eval.imported", "corrector", "768-dimensional"});
}
