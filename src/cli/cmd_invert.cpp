// daei invert --input FILE [--output FILE]: texts recovered from noisy embeddings with the run's trained attack —
// the daei system (stage 4 corrector, querying the configured black box) when trained, else the stage-3 or stage-2
// inverter behind its DAE. Input: JSON lines {"embedding": [...]} or .npy (float32/float64, [n, d]).
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "eval/systems.h"

namespace daei::cli {
namespace {

std::string g_input, g_output;

at::Tensor read_npy(const std::string& path) {
  const std::string b = read_file(path);
  DAEI_CHECK(b.size() >= 10 && b.compare(0, 6, "\x93NUMPY") == 0, "invert: {}: not a .npy file", path);
  const int major = static_cast<unsigned char>(b[6]);
  const size_t hl = major == 1 ? (static_cast<unsigned char>(b[8]) | static_cast<unsigned char>(b[9]) << 8)
                               : (b.size() >= 12 ? *reinterpret_cast<const uint32_t*>(b.data() + 8) : 0);
  const size_t off = major == 1 ? 10 : 12;
  DAEI_CHECK(off + hl <= b.size(), "invert: {}: truncated .npy header", path);
  const std::string h = b.substr(off, hl);
  const bool f4 = h.find("'<f4'") != std::string::npos, f8 = h.find("'<f8'") != std::string::npos;
  DAEI_CHECK(f4 || f8, "invert: {}: dtype must be float32 or float64 (little-endian), header {}", path, h);
  DAEI_CHECK(h.find("'fortran_order': False") != std::string::npos, "invert: {}: Fortran order is not supported", path);
  const auto s = h.find("'shape': ("), e = h.find(')', s);
  DAEI_CHECK(s != std::string::npos && e != std::string::npos, "invert: {}: no shape in the header", path);
  int64_t n = 0, d = 0;
  DAEI_CHECK(std::sscanf(h.c_str() + s + 10, "%ld, %ld", &n, &d) == 2 && n > 0 && d > 0,
             "invert: {}: shape must be (n, d), header {}", path, h);
  const size_t es = f4 ? 4 : 8;
  DAEI_CHECK(b.size() - off - hl == static_cast<size_t>(n * d) * es, "invert: {}: {} data bytes for shape ({}, {})",
             path, b.size() - off - hl, n, d);
  auto t = torch::empty({n, d}, f4 ? torch::kFloat32 : torch::kFloat64);
  std::memcpy(t.data_ptr(), b.data() + off + hl, b.size() - off - hl);
  return t.to(torch::kFloat32);
}

at::Tensor read_jsonl(const std::string& path) {
  std::ifstream in(path);
  DAEI_CHECK(in.good(), "invert: {}: cannot open", path);
  std::vector<std::vector<float>> rows;
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    DAEI_CHECK(!j.is_discarded() && j.is_object() && j.contains("embedding") && j["embedding"].is_array(),
               "invert: {}:{}: expected {{\"embedding\": [numbers]}}", path, line_no);
    std::vector<float> r;
    for (const auto& v : j["embedding"]) {
      DAEI_CHECK(v.is_number(), "invert: {}:{}: the embedding holds a non-number", path, line_no);
      r.push_back(v.get<float>());
    }
    DAEI_CHECK(rows.empty() || r.size() == rows[0].size(), "invert: {}:{}: {} values, the first line had {}", path,
               line_no, r.size(), rows.empty() ? 0 : rows[0].size());
    rows.push_back(std::move(r));
  }
  DAEI_CHECK(!rows.empty() && !rows[0].empty(), "invert: {}: no embeddings", path);
  auto t = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
  for (size_t i = 0; i < rows.size(); ++i) std::memcpy(t[i].data_ptr<float>(), rows[i].data(), rows[i].size() * 4);
  return t;
}

void validate(Context&) { DAEI_CHECK(file_exists(g_input), "invert: {}: no such file", g_input); }

int run(Context& ctx) {
  if (!ctx.comm->is_root()) return kExitOk;
  torch::set_num_threads(static_cast<int>(ctx.config.integer("train.threads")));
  at::Tensor y = g_input.size() > 4 && g_input.substr(g_input.size() - 4) == ".npy" ? read_npy(g_input)
                                                                                     : read_jsonl(g_input);
  DAEI_CHECK(torch::isfinite(y).all().item<bool>(), "invert: {}: the embeddings hold NaN or infinite values", g_input);
  EvalContext ec = make_eval_context(ctx.config, ctx.run_dir);
  auto systems = available_systems(ec);
  const SystemSpec* best = nullptr;
  for (const auto& s : systems)
    if (!s.reference && s.name.rfind("noisy-", 0) != 0) best = &s;  // the last of the DAE chain is the strongest
  DAEI_CHECK(best, "invert: no trained attack in {} (train stage 2 first)", ctx.run_dir);
  const int64_t d = ec.stage2_inv ? ec.stage2_inv->cfg.dim : ec.stage3_inv->cfg.dim;
  DAEI_CHECK(y.size(1) == d, "invert: {}: embeddings have dimension {}, the trained attack expects {}", g_input,
             y.size(1), d);
  EvalSplit sp;
  sp.name = "invert";
  sp.noisy = y;
  sp.clean = y;
  sp.sigma = ec.sigma0;
  sp.texts.assign(static_cast<size_t>(y.size(0)), "");
  auto run = best->recover(sp);
  std::string out;
  for (size_t i = 0; i < run.texts.size(); ++i)
    out += nlohmann::json{{"text", run.texts[i]}, {"system", best->name},
                          {"queries", run.queries.empty() ? 0.0 : run.queries[i]}}.dump() + "\n";
  if (g_output.empty()) std::cout << out;
  else write_file_atomic(g_output, out);
  LOG_INFO("[invert] {} texts recovered with {}{}", run.texts.size(), best->name,
           g_output.empty() ? "" : " into " + g_output);
  return kExitOk;
}

DAEI_SUBCOMMAND(SubcommandSpec{{"invert"},
                               "texts recovered from noisy embeddings (JSON lines {\"embedding\": [...]} or .npy) "
                               "with the run's trained attack",
                               [](CLI::App& app) {
                                 app.add_option("--input", g_input, "embeddings: .jsonl or .npy [n, d]")->required();
                                 app.add_option("--output", g_output, "JSON lines of recovered texts (default stdout)");
                               },
                               run, true, false, validate});

}  // namespace
}  // namespace daei::cli
