// daei import vec2text --inverter DIR [--corrector DIR] --out DIR: vec2text's published models (Hugging Face-style
// directories of an InversionModel and a CorrectorEncoderModel: config.json + model.safetensors) as daei's
// inverter and corrector folders (OUT/inverter/, OUT/corrector/), which inverter.init_from, eval and invert read like
// daei's own. Everything is read and checked before anything is written; the folders are written under a temporary
// name and renamed into place, so a refused import leaves OUT absent. A T5 `spiece.model` found beside the weights
// is copied with them (vec2text's directories usually have none: their tokenizer is t5-base's).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "cli/app.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "model/attack/vec2text_import.h"

namespace daei::cli {
namespace {

namespace fs = std::filesystem;

struct ImportVec2TextCommand {
  std::string inverter, corrector, out;
};

void add_flags(CLI::App& app, ImportVec2TextCommand& o) {
  app.add_option("--inverter", o.inverter, "a vec2text InversionModel directory (config.json + model.safetensors)")
      ->required();
  app.add_option("--corrector", o.corrector, "a vec2text CorrectorEncoderModel directory (optional)");
  app.add_option("--out", o.out, "the folder to write (must not exist): OUT/inverter/, OUT/corrector/")->required();
}

void validate(Context&, const ImportVec2TextCommand& o) {
  if (fs::exists(o.out)) throw UsageError("import vec2text: --out " + o.out + " exists (nothing written)");
}

void copy_tokenizer(const std::string& from, const std::string& to) {
  if (file_exists(from + "/spiece.model")) fs::copy_file(from + "/spiece.model", to + "/spiece.model");
}

int run(Context&, const ImportVec2TextCommand& o) {
  auto inv = load_vec2text_inverter(o.inverter);
  std::shared_ptr<CorrectorImpl> cor;
  if (!o.corrector.empty()) cor = load_vec2text_corrector(o.corrector);
  const std::string tmp = o.out + ".importing";
  fs::remove_all(tmp);
  make_dirs(tmp);
  inv->save(tmp + "/inverter");
  copy_tokenizer(o.inverter, tmp + "/inverter");
  if (cor) {
    cor->save(tmp + "/corrector");
    copy_tokenizer(o.corrector, tmp + "/corrector");
  }
  fs::rename(tmp, o.out);
  std::cout << "imported vec2text " << (cor ? "inverter and corrector" : "inverter") << " into " << o.out << "\n";
  return 0;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"import", "vec2text"},
                               "vec2text's InversionModel (and CorrectorEncoderModel) directories as daei's inverter "
                               "(and corrector) folders; safetensors only",
                               bind_options<ImportVec2TextCommand>(add_flags, run, validate),
                               /*uses_run_dir=*/false, /*single_process=*/true});

}  // namespace
}  // namespace daei::cli
