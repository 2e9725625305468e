// Issue 67: an imported vec2text corrector reads its hypotheses as vec2text's correction loop gives them (the ids
// generate() returned: decoder-start pad first, masked out; eos only when decoding ended before max_length), and the
// imported chain's rounds are vec2text's token for token. The fixture (tests/fixtures/vec2text/correction.*) was made
// by vec2text 0.0.13's own Corrector code on Hugging Face transformers' T5 (make_correction_fixture.py).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "../support/corrector_fixtures.h"
#include "../support/temp_dir.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "eval/correction.h"
#include "model/attack/vec2text_import.h"
#include "model/text/token_batch.h"

using namespace daei;

namespace {

const std::string kDir = std::string(DAEI_FIXTURES) + "/vec2text";
constexpr int64_t kMaxLen = 8;  // the fixture's max_seq_length (generate's max_length, decoder start counted)

const TensorMap& fx() {
  static const TensorMap t = load_safetensors(kDir + "/correction.safetensors");
  return t;
}
const at::Tensor& at_key(const std::string& k) {
  auto it = fx().find(k);
  if (it == fx().end()) throw std::runtime_error("correction.safetensors has no " + k);
  return it->second;
}

std::shared_ptr<CorrectorImpl> vec2text_corrector() {
  static auto c = load_vec2text_corrector(kDir + "/corrector");
  return c;
}

std::vector<std::vector<int64_t>> rows_of(const at::Tensor& ids) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < ids.size(0); ++i) out.push_back(generated_row(ids[i], 0));
  return out;
}

// The same hypotheses as daei's own convention lays them out (the encode of their text: pieces, then eos, at most
// max_length ids): what the imported chain fed vec2text's corrector before issue 67.
at::Tensor daei_layout(const at::Tensor& generated) {
  std::vector<std::vector<int64_t>> rows;
  for (auto r : rows_of(generated)) {
    r.erase(r.begin());  // the decoder-start pad
    if (!r.empty() && r.back() == 1) r.pop_back();
    if (static_cast<int64_t>(r.size()) > kMaxLen - 1) r.resize(kMaxLen - 1);
    r.push_back(1);
    rows.push_back(r);
  }
  return pad_token_rows(rows, 0, 0).input_ids;
}

double rel_err(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>() /
         b.to(torch::kDouble).abs().max().item<double>();
}
double max_abs(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

GenerateOptions greedy() {
  GenerateOptions g;
  g.max_length = kMaxLen;
  g.min_length = 1;  // vec2text's api.py
  return g;
}

// The imported chain on the fixture: its corrector corrects `initial` (the ids vec2text's loop fed it, texts decoded
// from them) for `rounds` rounds with `decoding` (s = num_beams), each black-box query of round t answered with
// the vector vec2text's re-embedding returned for that round's row (emb_keys[t]; the last key for later rounds).
// Returns each round's corrector sequences (s rows an input, generated order, trailing pads dropped).
std::map<int64_t, std::vector<std::vector<int64_t>>> imported_chain(CorrectorImpl& cor, int64_t rounds,
                                                                    const GenerateOptions& decoding,
                                                                    const std::vector<std::vector<int64_t>>& initial,
                                                                    const std::vector<std::string>& emb_keys) {
  const auto& tok = corrector_test::tokenizer();
  std::vector<std::string> texts, ids;
  for (size_t b = 0; b < initial.size(); ++b) {
    texts.push_back(tok.decode(initial[b]));
    ids.push_back("t/" + std::to_string(b));
  }
  QueryFn query = [&](const std::vector<std::string>&, const std::vector<std::string>& keys) {
    std::vector<at::Tensor> out;
    for (const auto& k : keys) {  // correct/t/<b>/r<t>/c<j>
      const auto r = k.find("/r"), c = k.find("/c", r);
      const int64_t b = std::stoll(k.substr(10, r - 10)), t = std::stoll(k.substr(r + 2, c - r - 2));
      out.push_back(at_key(emb_keys[std::min<size_t>(t, emb_keys.size() - 1)])[b]);
    }
    return torch::stack(out);
  };
  CorrectionOptions opt;
  opt.max_steps = rounds;
  opt.early_stop = false;
  opt.max_length = kMaxLen;
  opt.decoding = decoding;
  std::map<int64_t, std::vector<std::vector<int64_t>>> by_round;
  opt.observe = [&](const CorrectorCall& call) {
    auto& r = by_round[call.round];
    for (int64_t i = 0; i < call.sequences.size(0); ++i) r.push_back(generated_row(call.sequences[i], 0));
  };
  run_correction(at_key("target"), texts, ids, query, [](const at::Tensor& y) { return y; }, cor, tok, opt, nullptr,
                 initial);
  return by_round;
}

// Round 0 as the imported chain makes it: vec2text's inverter, imported, decoding the fixture's embeddings.
std::vector<std::vector<int64_t>> inverter_round0() {
  auto inv = load_vec2text_inverter(kDir + "/inverter");
  return rows_of(inv->generate(at_key("inverter.embedding"), greedy()));
}

int64_t rows_differing(const std::vector<std::vector<int64_t>>& a, const std::vector<std::vector<int64_t>>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

}  // namespace

TEST(Vec2TextHypothesisIds, TextsAreLaidOutAsGenerateWouldHaveGivenThem) {
  const auto& tok = corrector_test::tokenizer();
  const std::string text = "the cat sat on a mat";
  const std::vector<int64_t> p = tok.encode(text, 0, false);
  const int64_t n = static_cast<int64_t>(p.size());
  ASSERT_GE(n, 3);
  auto expect_row = [&](int64_t max_length, int64_t pieces, bool eos) {
    std::vector<int64_t> want{0};
    want.insert(want.end(), p.begin(), p.begin() + pieces);
    if (eos) want.push_back(1);
    EXPECT_EQ(vec2text_row_of_text(tok, text, max_length), want) << "max_length " << max_length;
  };
  expect_row(n + 10, n, true);  // ended before max_length: eos
  expect_row(n + 2, n, true);   // pad + n pieces + eos = max_length exactly
  expect_row(n + 1, n, false);  // cut at max_length: no eos
  expect_row(3, 2, false);      // cut shorter

  // daei's own convention is the tokenizer's encode (pieces, eos; no leading pad), unchanged.
  const std::vector<std::string> texts{text, "a dog"};
  EXPECT_TRUE(torch::equal(hypothesis_batch(HypothesisIds::daei, tok, texts, {}, 12),
                           tok.encode_batch(texts, 12).input_ids));
  // vec2text's: generated rows as they are (cut to max_length), texts without one rebuilt.
  const std::vector<int64_t> gen{0, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  const at::Tensor b = hypothesis_batch(HypothesisIds::vec2text, tok, texts, {&gen, nullptr}, 8);
  ASSERT_EQ(b.size(0), 2);
  EXPECT_EQ(generated_row(b[0], 0), std::vector<int64_t>(gen.begin(), gen.begin() + 8));
  EXPECT_EQ(generated_row(b[1], 0), vec2text_row_of_text(tok, "a dog", 8));
  EXPECT_EQ(generated_row(torch::tensor({0, 4, 1, 0, 0}), 0), (std::vector<int64_t>{0, 4, 1}));
  EXPECT_EQ(generated_row(torch::tensor({0, 0, 0}), 0), (std::vector<int64_t>{0}));
}

TEST(Vec2TextHypothesisIds, AnImportedCorrectorKeepsVec2TextsConventionAndDaeisOwnKeepTheirs) {
  EXPECT_EQ(vec2text_corrector()->cfg.hypothesis_ids, HypothesisIds::vec2text);
  EXPECT_EQ(CorrectorConfig{}.hypothesis_ids, HypothesisIds::daei);
  TempDir tmp("v2t-conv");
  vec2text_corrector()->save(tmp.str() + "/corrector");
  EXPECT_EQ(CorrectorImpl::load(tmp.str() + "/corrector")->cfg.hypothesis_ids, HypothesisIds::vec2text);
  EXPECT_NE(read_file(tmp.str() + "/corrector/corrector.json").find("\"hypothesis_ids\": \"vec2text\""),
            std::string::npos);
}

// (target, hypothesis ids, hypothesis embedding) triples as vec2text's loop made them: round 0's ids are the
// inverter's (cut at max_length), round 1's the corrector's, "given" rows that ended with eos (and a quarter cut).
// daei builds the same ids from the generated rows and its corrector gives vec2text's logits.
TEST(Vec2TextCorrection, CorrectorLogitsMatchVec2TextsOnItsHypothesisIds) {
  auto cor = vec2text_corrector();
  const auto& tok = corrector_test::tokenizer();
  torch::NoGradGuard ng;
  int64_t cut = 0, ended = 0;
  for (const std::string r : {"round0", "round1", "given"}) {
    const at::Tensor& want_ids = at_key(r + ".ids");
    const at::Tensor& e = at_key(r + ".embedding");
    const at::Tensor& target = at_key("target");
    const auto rows = rows_of(want_ids);
    for (const auto& row : rows) {
      cut += row.back() != 1 && static_cast<int64_t>(row.size()) == kMaxLen;
      ended += row.back() == 1;
    }
    std::vector<const std::vector<int64_t>*> gen;
    for (const auto& row : rows) gen.push_back(&row);
    const at::Tensor ids =
        hypothesis_batch(HypothesisIds::vec2text, tok, std::vector<std::string>(rows.size()), gen, kMaxLen);
    EXPECT_TRUE(torch::equal(ids, want_ids)) << r << ids << want_ids;

    const at::Tensor first = cor->first_step_logits(target, e, ids);
    const double err_first = rel_err(first, at_key(r + ".first_logits"));
    EXPECT_LE(err_first, 1e-5) << r;
    auto [x, mask] = cor->encoder_inputs(target, e, ids);
    const double err_all = rel_err(cor->t5->forward(x, mask, at_key("labels")).logits, at_key(r + ".logits"));
    EXPECT_LE(err_all, 1e-5) << r;
    // Before issue 67 the chain fed the re-encoded text (pieces, eos, no leading pad): far from vec2text's.
    const double before = max_abs(cor->first_step_logits(target, e, daei_layout(want_ids)),
                                  at_key(r + ".first_logits"));
    std::cout << "[ " << r << " ] first-step logits vs vec2text: rel err " << err_first << " (all steps "
              << err_all << "); with daei's layout max |diff| " << before << "\n";
    RecordProperty(r + "_rel_err", std::to_string(std::max(err_first, err_all)));
    RecordProperty(r + "_daei_layout_max_abs_diff", std::to_string(before));
    EXPECT_GT(before, 1e-3) << "the fixture does not tell the two layouts apart";
  }
  EXPECT_GE(cut, 3);    // hypotheses cut at max_length ...
  EXPECT_GE(ended, 3);  // ... and hypotheses that ended with eos
}

// The acceptance test: the imported chain's first round (greedy, as vec2text's default loop) returns vec2text's
// tokens for every row; so does its second, fed the first round's own ids; and a round on hypotheses that ended with
// eos. Fed daei's own layout, the same corrector answers differently on some rows (counted).
TEST(Vec2TextCorrection, ImportedChainRoundsEqualVec2TextsTokenForToken) {
  auto cor = vec2text_corrector();
  const auto round0 = inverter_round0();
  ASSERT_EQ(round0, rows_of(at_key("round0.ids")));
  const auto got = imported_chain(*cor, 2, greedy(), round0, {"round0.embedding", "round1.embedding", "round2.embedding"});
  ASSERT_EQ(got.count(1) + got.count(2), 2u);
  EXPECT_EQ(got.at(1), rows_of(at_key("round1.ids")));
  EXPECT_EQ(got.at(2), rows_of(at_key("round2.ids")));
  const auto given = rows_of(at_key("given.ids"));
  const auto got_given = imported_chain(*cor, 1, greedy(), given, {"given.embedding"});
  EXPECT_EQ(got_given.at(1), rows_of(at_key("given.round1")));

  cor->cfg.hypothesis_ids = HypothesisIds::daei;  // restored below
  const auto before = imported_chain(*cor, 1, greedy(), round0, {"round0.embedding"});
  const auto before_given = imported_chain(*cor, 1, greedy(), given, {"given.embedding"});
  cor->cfg.hypothesis_ids = HypothesisIds::vec2text;
  const int64_t d0 = rows_differing(before.at(1), rows_of(at_key("round1.ids")));
  const int64_t d1 = rows_differing(before_given.at(1), rows_of(at_key("given.round1")));
  std::cout << "[ round 1 ] rows differing from vec2text's with daei's layout: " << d0 << " of " << round0.size()
            << " (inverter hypotheses), " << d1 << " of " << given.size() << " (given); with vec2text's: 0\n";
  RecordProperty("round1_rows_differing_daei_layout", std::to_string(d0));
  RecordProperty("given_round1_rows_differing_daei_layout", std::to_string(d1));
}

// vec2text's sequence-level beam (s = 3): the corrector's beam search returns the same 3 sequences per row, on
// every row where transformers 4.57's beam search kept no hypothesis that ended with eos. On such a row (1 of 32:
// it returns [0, 34, 39, 39, 37, 1, 1, 1], eos padded with eos) daei's beam search, matched to transformers 4.33's
// (tests/fixtures/README.md, "Beam search"), keeps three running beams instead: a beam-search difference between
// transformers versions, not the hypothesis ids of issue 67; counted here so a change shows.
TEST(Vec2TextCorrection, ImportedChainBeamCandidatesEqualVec2TextsWhereNoBeamEnded) {
  auto cor = vec2text_corrector();
  GenerateOptions g = greedy();
  g.num_beams = 3;
  const auto got = imported_chain(*cor, 1, g, inverter_round0(), {"round0.embedding"});
  const auto want = rows_of(at_key("beam3.candidates"));
  ASSERT_EQ(got.at(1).size(), want.size());
  int64_t skipped = 0;
  for (size_t b = 0; b < want.size() / 3; ++b) {
    bool ended = false;
    for (size_t r = 0; r < 3; ++r) ended = ended || std::count(want[3 * b + r].begin(), want[3 * b + r].end(), 1) > 0;
    if (ended) {
      ++skipped;
      continue;
    }
    for (size_t r = 0; r < 3; ++r) EXPECT_EQ(got.at(1)[3 * b + r], want[3 * b + r]) << "row " << b << ", sequence " << r;
  }
  EXPECT_EQ(skipped, 1);
  RecordProperty("rows_with_an_ended_beam_skipped", std::to_string(skipped));
}
