// The guided inverter's recipe (what and why: guided.h).
#include "stages/recipes/guided.h"

#include <torch/torch.h>

#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/run_layout.h"
#include "dist/communicator.h"
#include "stages/recipes/bow.h"

namespace daei {

GuidedOptions GuidedOptions::from_config(const Config& cfg) {
  GuidedOptions o;
  o.folds = cfg.integer("guided.folds");
  o.words = cfg.integer("guided.words");
  o.max_pieces = cfg.integer("guided.max_pieces");
  o.fold_steps = cfg.integer("guided.fold_steps");
  o.copy = cfg.flag("guided.copy");
  DAEI_CHECK(o.folds >= 2, "guided.folds {}: at least 2 (a model must not guide the rows it trained on)", o.folds);
  return o;
}

InverterTrainData fold_rows(const InverterTrainData& data, int64_t folds, int64_t fold, bool held_out) {
  DAEI_CHECK(folds >= 2 && fold >= 0 && fold < folds, "fold {} of {}", fold, folds);
  // Row i of the subset → row of `data`: held out, fold + i·folds; otherwise the i-th row whose fold is another.
  auto row_of = [folds, fold, held_out](int64_t i) {
    if (held_out) return fold + i * folds;
    const int64_t block = i / (folds - 1), within = i % (folds - 1);
    return block * folds + (within < fold ? within : within + 1);
  };
  InverterTrainData d = data;
  const int64_t in_fold = data.rows / folds + (fold < data.rows % folds ? 1 : 0);
  d.rows = held_out ? in_fold : data.rows - in_fold;
  auto map = [row_of](const std::vector<int64_t>& rows) {
    std::vector<int64_t> out;
    out.reserve(rows.size());
    for (int64_t r : rows) out.push_back(row_of(r));
    return out;
  };
  d.embeddings = [e = data.embeddings, map](const std::vector<int64_t>& r) { return e(map(r)); };
  d.texts = [t = data.texts, map](const std::vector<int64_t>& r) { return t(map(r)); };
  if (data.prefetch) d.prefetch = [p = data.prefetch, map](const std::vector<int64_t>& r) { p(map(r)); };
  if (data.guides) d.guides = [g = data.guides, map](const std::vector<int64_t>& r) { return g(map(r)); };
  return d;
}

std::string guide_line(const RankedWords& r, int64_t words) {
  std::string s;
  for (size_t i = 0; i < r.words.size() && static_cast<int64_t>(i) < words; ++i) s += (i ? " " : "") + r.words[i];
  return s;
}

std::vector<std::string> guide_lines(BowInverterImpl& bow, const at::Tensor& inputs, int64_t words) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(inputs.size(0)));
  for (int64_t i = 0; i < inputs.size(0); i += 512)
    for (const auto& r : bow.ranked(inputs.slice(0, i, std::min<int64_t>(inputs.size(0), i + 512)), words))
      out.push_back(guide_line(r, words));
  return out;
}

namespace {
std::vector<int64_t> range_rows(int64_t begin, int64_t end) {
  std::vector<int64_t> r;
  for (int64_t i = begin; i < end; ++i) r.push_back(i);
  return r;
}
}  // namespace

int fold_guidance(const Config& cfg, Communicator& comm, const std::string& tag, const std::string& stage_dir,
                  const InverterTrainData& data, const InverterTrainData& val, bool resume, bool force,
                  std::vector<std::string>& lines) {
  const GuidedOptions o = GuidedOptions::from_config(cfg);
  const std::string file = stage_dir + "/guidance/train.txt";
  if (!file_exists(file)) {
    // The fold models' steps: guided.fold_steps, or (0) as many passes over their rows as the bow stage makes over
    // all training rows.
    const int64_t bow_steps = cfg.integer("bow.steps");
    const int64_t steps = o.fold_steps > 0 ? o.fold_steps : std::max<int64_t>(1, bow_steps * (o.folds - 1) / o.folds);
    Config fold_config = cfg;
    fold_config.set(fmt::format("bow.steps={}", steps), "guided.fold_steps");
    for (int64_t f = 0; f < o.folds; ++f) {
      const std::string dir = fmt::format("{}/folds/{}", stage_dir, f);
      if (file_exists(stage_final_dir(dir) + "/bow/bow.json")) continue;
      LOG_INFO("[{}] fold model {} of {}: the bag of words on the {} rows outside fold {}, {} steps", tag, f + 1,
               o.folds, data.rows - fold_rows(data, o.folds, f, true).rows, f, steps);
      BowStage s(fold_config, comm, fmt::format("{}/fold-{}", tag, f), dir, fold_rows(data, o.folds, f, false), val,
                 resume, force);
      if (const int rc = s.run(); rc != 0) return rc;  // stopped early (train.stop_after, a signal): resume later
    }
    comm.run_on_root([&] {
      std::vector<std::string> lines(static_cast<size_t>(data.rows));
      for (int64_t f = 0; f < o.folds; ++f) {
        auto bow = load_bow_inverter(fmt::format("{}/folds/{}/final/bow", stage_dir, f));
        const InverterTrainData held = fold_rows(data, o.folds, f, true);
        for (int64_t i = 0; i < held.rows; i += 8192) {
          torch::NoGradGuard ng;
          const auto part = guide_lines(*bow, held.embeddings(range_rows(i, std::min(held.rows, i + 8192))), o.words);
          for (size_t j = 0; j < part.size(); ++j) lines[static_cast<size_t>(f + (i + static_cast<int64_t>(j)) * o.folds)] = part[j];
        }
      }
      std::string all;
      for (const auto& l : lines) all += l + "\n";
      make_dirs(stage_dir + "/guidance");
      write_file_atomic(file, all);
      LOG_INFO("[{}] guides of {} training rows from {} fold models: {}", tag, lines.size(), o.folds, file);
    });
  }
  lines.clear();
  std::istringstream in(read_file(file));
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  DAEI_CHECK(static_cast<int64_t>(lines.size()) == data.rows, "{}: {} guide lines for {} training rows (delete it to "
             "make it again)", file, lines.size(), data.rows);
  return 0;
}

InverterTrainData with_guides(InverterTrainData data, std::shared_ptr<const std::vector<std::string>> lines) {
  data.guides = [lines](const std::vector<int64_t>& rows) {
    std::vector<std::string> out;
    for (int64_t r : rows) out.push_back(lines->at(static_cast<size_t>(r)));
    return out;
  };
  return data;
}

InverterTrainData with_guides(InverterTrainData data, std::shared_ptr<BowInverterImpl> bow, int64_t words) {
  data.guides = [e = data.embeddings, bow, words](const std::vector<int64_t>& rows) {
    torch::NoGradGuard ng;
    return guide_lines(*bow, e(rows), words);
  };
  return data;
}

}  // namespace daei
