#include "stages/loop/curves.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/fsutil.h"
#include "core/log.h"

namespace daei {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string plot_curves(const std::string& stage_dir) {
  const std::string metrics = stage_dir + "/metrics.jsonl";
  if (!file_exists(metrics)) return "";
  // Columns: step, then every numeric key (lr.GROUP flattened; the examples/s column is left out: not a curve).
  std::vector<std::map<std::string, double>> rows;
  std::map<std::string, int> keys;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step")) continue;
    std::map<std::string, double> r;
    const json flat = j.flatten();
    for (const auto& [k, v] : flat.items())
      if (v.is_number() && k != "/examples_per_s") r[k.substr(1)] = v.get<double>();
    for (const auto& [k, v] : r)
      if (k != "step") keys[k] = 1;
    rows.push_back(std::move(r));
  }
  if (rows.empty() || keys.empty()) return "";
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    LOG_WARN("[curves] gnuplot not found (Debian gnuplot-nox): {}/curves.png not drawn", stage_dir);
    return "";
  }
  const std::string tmp = temp_sibling(stage_dir + "/curves");
  fs::create_directories(tmp);
  // The held-out CE is drawn in the training loss's panel, so overfitting shows as the gap between two lines.
  const std::string heldout = "eval/heldout_ce";
  const std::string train_ce = keys.count("ce") ? "ce" : "loss";  // stage 3's loss is SURE + λ·CE: its CE term
  const bool overlay = keys.count(heldout) && keys.count(train_ce);
  std::vector<std::string> names;
  for (const auto& [k, v] : keys)
    if (!(overlay && k == heldout)) names.push_back(k);
  if (overlay) names.push_back(heldout);  // its data file; no panel of its own
  for (size_t i = 0; i < names.size(); ++i) {
    std::ofstream d(tmp + "/" + std::to_string(i) + ".dat");
    for (const auto& r : rows) {
      auto s = r.find("step"), v = r.find(names[i]);
      if (s != r.end() && v != r.end()) d << s->second << " " << v->second << "\n";
    }
  }
  const size_t n = names.size() - (overlay ? 1 : 0), cols = n > 4 ? 3 : 2, nrows = (n + cols - 1) / cols;
  const std::string png = stage_dir + "/curves.png";
  std::ofstream g(tmp + "/plot.gp");
  g << "set terminal png size " << 420 * cols << "," << 300 * nrows << "\n"
    << "set output '" << tmp << "/curves.png'\nset multiplot layout " << nrows << "," << cols << "\n"
    << "set key off\nset grid\nset xlabel 'step'\n";
  for (size_t i = 0; i < n; ++i) {
    std::string title = names[i];
    for (auto& c : title)
      if (c == '_') c = ' ';
    if (overlay && names[i] == train_ce) {
      g << "set title '" << train_ce << " (train) and held-out CE' noenhanced\nset key on\nplot '" << tmp
        << "/" << i << ".dat' using 1:2 with lines lw 2 title 'train', '" << tmp << "/" << n
        << ".dat' using 1:2 with linespoints lw 2 title 'held-out'\nset key off\n";
      continue;
    }
    g << "set title '" << title << "' noenhanced\nplot '" << tmp << "/" << i << ".dat' using 1:2 with lines lw 2\n";
  }
  g << "unset multiplot\n";
  g.close();
  const int rc = std::system(("gnuplot '" + tmp + "/plot.gp' >/dev/null 2>&1").c_str());
  if (rc == 0 && fs::exists(tmp + "/curves.png")) fs::rename(tmp + "/curves.png", png);
  fs::remove_all(tmp);
  if (rc != 0) {
    LOG_WARN("[curves] gnuplot failed (exit {}); {} not drawn", rc, png);
    return "";
  }
  LOG_INFO("[curves] {}", png);
  return png;
}

}  // namespace daei
