// daei release-report: the defender's σ, chosen from the release alone before any attack (issue 63). The test texts
// are embedded clean once; the release's noise at σ = 1 (keyed by embedder.noise_seed) is scaled to each σ of the
// grid; each noisy embedding queries the clean set. Prints (or writes) the table and the chosen σ.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/app.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "data/corpus.h"
#include "data/run_layout.h"
#include "eval/release_report.h"
#include "model/release/embedder.h"
#include "model/release/release_noise.h"

namespace daei::cli {
namespace {

struct ReleaseReportCommand {
  std::string texts;  // empty: the run's corpus/test.jsonl
  int64_t max_texts = 2000;
  std::vector<double> sigmas{0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.10, 0.12, 0.15};
  double min_recall = 0.9;
  std::string out;  // empty: stdout only
  bool as_json = false;
};

int run_release_report(Context& ctx, const ReleaseReportCommand& cmd) {
  DAEI_CHECK(cmd.max_texts >= 2, "--max-texts must be at least 2, got {}", cmd.max_texts);
  DAEI_CHECK(cmd.min_recall >= 0 && cmd.min_recall <= 1, "--min-recall must be in [0, 1], got {}", cmd.min_recall);
  const std::string file = cmd.texts.empty() ? RunLayout(ctx.run_dir).corpus("test") : cmd.texts;
  DAEI_CHECK(file_exists(file), "release-report: {} not found (run `daei corpus build` first, or give --texts)", file);
  std::vector<std::string> texts;
  for_each_corpus_row(file, [&](int64_t, int64_t, std::string t) {
    if (static_cast<int64_t>(texts.size()) < cmd.max_texts) texts.push_back(std::move(t));
  });
  DAEI_CHECK(texts.size() >= 2, "release-report: {} holds {} texts; at least 2 are needed", file, texts.size());
  const auto embedder = make_clean_embedder(ctx.config);
  LOG_INFO("[release] embedding {} texts of {} with {}", texts.size(), file, embedder->id());
  const at::Tensor clean = embedder->embed(texts);
  // The release's own noise at σ = 1: keyed Gaussian vectors, one a text, from the run's noise seed.
  const NoiseKey key = fixed_noise_key(static_cast<uint64_t>(ctx.config.integer("embedder.noise_seed")));
  at::Tensor unit = torch::empty_like(clean);
  for (int64_t i = 0; i < unit.size(0); ++i)
    keyed_gaussian_noise(key, "release-report/" + std::to_string(i), unit[i].data_ptr<float>(), unit.size(1));
  const SigmaReport r = sigma_report(clean, unit, cmd.sigmas, cmd.min_recall);
  const std::string md = sigma_report_markdown(r, embedder->id());
  const std::string js = sigma_report_json(r, embedder->id()).dump(2) + "\n";
  if (!cmd.out.empty()) {
    write_file_atomic(cmd.out + ".md", md);
    write_file_atomic(cmd.out + ".json", js);
    LOG_INFO("[release] wrote {0}.md and {0}.json", cmd.out);
  }
  std::cout << (cmd.as_json ? js : md);
  return kExitOk;
}

void add_release_report_flags(CLI::App& a, ReleaseReportCommand& o) {
  a.add_option("--texts", o.texts, "a corpus .jsonl of test texts (default: the run's corpus/test.jsonl)");
  a.add_option("--max-texts", o.max_texts, "texts to use, the first of the file (default 2000)");
  a.add_option("--sigmas", o.sigmas, "the σ grid, comma-separated (default 0.01-0.10 by 0.01, 0.12, 0.15)")
      ->delimiter(',');
  a.add_option("--min-recall", o.min_recall, "the utility bar: recall@1 the chosen σ keeps (default 0.9)");
  a.add_option("--out", o.out, "also write OUT.md and OUT.json");
  a.add_flag("--json", o.as_json, "print the JSON report instead of the table");
}

DAEI_SUBCOMMAND((SubcommandSpec{{"release-report"},
                                "choose the release's σ before any attack: recall@1/@10 and cos(noisy, clean) of the "
                                "test texts on a σ grid, and the largest σ keeping recall@1 >= --min-recall",
                                bind_options<ReleaseReportCommand>(add_release_report_flags, run_release_report),
                                /*uses_run_dir=*/false, /*single_process=*/true}));

}  // namespace
}  // namespace daei::cli
