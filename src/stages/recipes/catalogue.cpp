// The stage catalogue (what and why: catalogue.h).
#include "stages/recipes/catalogue.h"

#include "core/config.h"

namespace daei {

const std::vector<CorrectorChain>& corrector_chains() {
  static const std::vector<CorrectorChain> c{
      {"4", "stage4", "daei", "stage3", "stage3", "hyp-train"},
      {"dae-corrector", "dae-corrector", "dae-corrected", "stage2", "stage1", "hyp-train-dae"},
      {"noisy-corrector", "noisy-corrector", "noisy-vec2text", "noisy-inverter", "", "hyp-train-noisy"},
      // dae-corrected at daei's inverter steps (stage 2 + stage 3's): with stage4.continued_corrector.
      {"dae-continued-corrector", "dae-continued-corrector", "dae-corrected-continued", "stage2-continued", "stage1",
       "hyp-train-dae-continued", false, true},
      {"clean-corrector", "clean-corrector", "clean-to-clean-corrected", "clean-inverter", "", "hyp-train-clean", true},
  };
  return c;
}

std::string CorrectorChain::hyp_val_split() const { return "hyp-val" + hyp_split.substr(std::string("hyp-train").size()); }

const CorrectorChain* find_corrector_chain(const std::string& name) {
  for (const auto& c : corrector_chains())
    if (c.stage == name || c.folder == name || c.system == name) return &c;
  return nullptr;
}

namespace {

StageSpec corrector_spec(const CorrectorChain& c) {
  StageSpec s;
  s.name = c.stage;
  s.folder = c.folder;
  s.budget = "stage4";  // every corrector shares stage 4's budget
  s.needs = {c.inverter_stage};
  if (!c.dae_stage.empty() && c.dae_stage != c.inverter_stage) s.needs.push_back(c.dae_stage);
  s.title = "corrector of " + c.system;
  s.inputs = (c.dae_stage.empty() ? std::string("no DAE") : c.dae_stage + "/final/dae") + ", cache/" + c.hyp_split +
             ", warm start from " + c.inverter_stage + "/final/inverter";
  if (c.reference) s.when = {"reference.enabled", "reference.corrector"};
  if (c.control) s.when = {"stage3.control", "stage4.continued_corrector"};
  s.t5 = s.pretrain_fed = s.seeded = true;
  s.chain = &c;
  return s;
}

std::vector<StageSpec> build_catalogue() {
  // name, folder, budget, needs, title, inputs, when
  std::vector<StageSpec> v{
      {"1", "stage1", "stage1", {}, "stage 1 (SURE DAE)", "cache/train (noisy)", {}},
      {"pretrain", "pretrain", "pretrain", {}, "pretrain (T5 span corruption, texts only)", "cache/train (texts only)",
       {"pretrain.enabled"}},
      {"2", "stage2", "stage2", {"stage1"}, "stage 2 (inverter on DAE(y))", "stage1/final/dae, cache/train (noisy)", {}},
      {"noisy-inverter", "noisy-inverter", "stage2", {}, "baseline noisy-inverter", "cache/train (noisy)", {}},
      {"wiener-inverter", "wiener-inverter", "stage2", {}, "baseline wiener-inverter",
       "cache/train (noisy; the noisy-only Wiener filter)", {"stage2.wiener_inverter"}},
      {"clean-inverter", "clean-inverter", "stage2", {}, "reference clean-inverter",
       "cache/train/clean (offline_eval_only; reference.enabled)", {"reference.enabled"}},
      {"3", "stage3", "stage3", {"stage1", "stage2"}, "stage 3 (joint, PCGrad)",
       "stage1/final/dae, stage2/final/inverter", {}},
      {"stage2-continued", "stage2-continued", "stage3", {"stage1", "stage2"}, "control: stage 2 for stage 3's steps",
       "stage1/final/dae, stage2/final/inverter (no gradient into the DAE)", {"stage3.control"}},
      // The bag-of-words inverters (issue 65): an MLP to the training texts' content words, one budget (bow.*).
      {"bow-noisy", "bow-noisy", "bow", {}, "bag-of-words inverter on y", "cache/train (noisy)", {"bow.enabled"}},
      {"bow-dae", "bow-dae", "bow", {"stage1"}, "bag-of-words inverter on DAE(y)",
       "stage1/final/dae, cache/train (noisy)", {"bow.enabled"}},
      {"bow-clean", "bow-clean", "bow", {}, "reference bag-of-words inverter on clean embeddings",
       "cache/train/clean (offline_eval_only; reference.enabled)", {"bow.enabled", "reference.enabled"}},
      // The T5 inverters guided by the bag of words (issue 65 item 4): stage 2's budget, guides from fold models.
      {"guided-noisy", "guided-noisy", "stage2", {"bow-noisy"}, "T5 inverter on y guided by bow-noisy",
       "bow-noisy/final/bow, cache/train (noisy)", {"guided.enabled", "bow.enabled"}},
      {"guided-dae", "guided-dae", "stage2", {"stage1", "bow-dae"}, "T5 inverter on DAE(y) guided by bow-dae",
       "stage1/final/dae, bow-dae/final/bow, cache/train (noisy)", {"guided.enabled", "bow.enabled"}},
      {"guided-clean", "guided-clean", "stage2", {"bow-clean"}, "reference T5 inverter on clean embeddings guided by bow-clean",
       "bow-clean/final/bow, cache/train/clean (offline_eval_only; reference.enabled)",
       {"guided.enabled", "bow.enabled", "reference.enabled"}},
  };
  for (auto& s : v) {
    s.t5 = s.folder != "stage1" && s.budget != "bow";
    s.fresh_inverter = s.name == "2" || s.budget == "stage2";  // stage 2 and the baselines that share its budget
    s.pretrain_fed = s.t5;
    s.seeded = s.folder != "pretrain";
  }
  for (const auto& c : corrector_chains()) v.push_back(corrector_spec(c));
  StageSpec lm{"lm", "lm", "lm", {}, "generator LM of zsinvert (texts only)", "cache/train (texts only)",
               {"zsinvert.enabled"}};
  lm.t5 = true;  // the inverters' shape, its own start (zsinvert's generator)
  v.push_back(lm);
  StageSpec embedder{"embedder", "embedder", "embedder_train", {"pretrain"},
                     "contextual embedder (SimCSE, the defender's model)", "pretrain/final/t5, cache/train (texts only)",
                     {}};
  embedder.in_pipeline = false;  // studies/contextual_embedder/run.sh: the defender's model, not a step of the attack
  embedder.t5 = embedder.pretrain_fed = true;
  v.push_back(embedder);
  return v;
}

}  // namespace

const std::vector<StageSpec>& stage_catalogue() {
  static const std::vector<StageSpec> c = build_catalogue();
  return c;
}

const StageSpec* find_stage(const std::string& name) {
  for (const auto& s : stage_catalogue())
    if (s.name == name) return &s;
  return nullptr;
}

const std::vector<EvalRowSpec>& eval_rows() {
  using R = RowReads;
  // The references first (outside the threat model), then the attack's chain from the plain baseline to daei; each
  // corrected row follows the row it corrects.
  static const std::vector<EvalRowSpec> rows{
      {"clean-to-clean", "clean-inverter", R::clean, "", true},
      {"clean-to-clean-corrected", "clean-corrector", R::corrected, "clean-to-clean", true},
      {"clean-to-noisy", "clean-inverter", R::noisy, "", true},
      {"clean-to-noisy-corrected", "clean-corrector", R::corrected, "clean-to-noisy", true},
      // eval.imported: vec2text's models were trained on clean embeddings, so these are references too (the first is
      // the paper's CLEAN-TO-NOISY when they were trained on the embedder the release adds noise to).
      {"imported-inverter", "", R::noisy, "", true},
      {"imported-vec2text", "", R::corrected, "imported-inverter", true},
      {"noisy-inverter", "noisy-inverter", R::noisy, "", false},
      {"noisy-vec2text", "noisy-corrector", R::corrected, "noisy-inverter", false},
      {"wiener-inverter", "wiener-inverter", R::wiener, "", false},
      {"dae-only", "stage2", R::dae_stage1, "", false},
      {"dae-corrected", "dae-corrector", R::corrected, "dae-only", false},
      {"dae-only-continued", "stage2-continued", R::dae_stage1, "", false},
      {"dae-corrected-continued", "dae-continued-corrector", R::corrected, "dae-only-continued", false},
      {"joint-no-corrector", "stage3", R::dae_stage3, "", false},
      // A reference only under protocol.clean_hypotheses (eval decides).
      {"daei", "stage4", R::corrected, "joint-no-corrector", false},
      // The daei corrector scoring and correcting with clean hypothesis embeddings (eval.clean_hypotheses_reference).
      {"daei-clean-hyp", "stage4", R::corrected, "joint-no-corrector", true},
      {"zsinvert", "lm", R::zsinvert, "", false},
      {"zsinvert-dae", "lm", R::zsinvert, "", false},
      // The bag-of-words inverters: their k most probable content words (bow.h), no function words, no order.
      {"bow-clean", "bow-clean", R::clean, "", true, true},
      {"bow-noisy", "bow-noisy", R::noisy, "", false, true},
      {"bow-dae", "bow-dae", R::dae_stage1, "", false, true},
      // The guided T5 inverters: the inverter reads the bow stage's top words of the same input beside it.
      {"guided-clean", "guided-clean", R::clean, "", true},
      {"guided-noisy", "guided-noisy", R::noisy, "", false},
      {"guided-dae", "guided-dae", R::dae_stage1, "", false},
  };
  return rows;
}

const EvalRowSpec* find_eval_row(const std::string& system) {
  for (const auto& r : eval_rows())
    if (r.system == system) return &r;
  return nullptr;
}

std::vector<std::string> eval_rows_of(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& r : eval_rows())
    if (r.stage == folder) out.push_back(r.system);
  return out;
}

bool runs_in_pipeline(const StageSpec& s, const Config& cfg) {
  if (!s.in_pipeline) return false;
  for (const auto& flag : s.when)
    if (!cfg.flag(flag)) return false;
  return true;
}

}  // namespace daei
