// daei embed | serve-embedder | estimate-sigma: the release interface, queried, served and measured (issue 5).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <torch/torch.h>

#include "cli/app.h"
#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"
#include "model/release/release.h"
#include "model/release/http_embedder.h"
#include "model/release/release_noise.h"

namespace daei::cli {
namespace {

// embed, serve-embedder, estimate-sigma: the release interface alone, one process, no run directory.
SubcommandSpec release_command(const std::string& name, const std::string& help,
                               std::function<BoundCommand(CLI::App&)> add_options) {
  return SubcommandSpec{{name}, help, std::move(add_options), /*uses_run_dir=*/false, /*single_process=*/true};
}

struct EmbedCommand {
  std::vector<std::string> texts;
  bool as_json = false;
  std::optional<int64_t> noise_seed;  // tests and simulations only: a fixed, predictable noise key
};

// The release's answers: the defender's noise (release_noise.h) added here, or a remote noisy service's as they come.
struct Release {
  std::unique_ptr<ReleaseNoise> local;     // null: a remote release
  std::shared_ptr<NoisyEmbedder> remote;   // its answers, nothing added
  std::string id;
  double sigma = 0;
};

Release open_release(const Config& cfg, std::optional<int64_t> seed) {
  if (seed && *seed < 0) throw UsageError(fmt::format("--noise-seed must be a number >= 0, got {}", *seed));
  Release r;
  r.local = make_release(cfg, seed ? std::optional<uint64_t>(uint64_t(*seed)) : std::nullopt);
  if (r.local) {
    r.id = r.local->describe();
    r.sigma = r.local->sigma();
  } else {
    r.remote = make_embedder(cfg);
    r.id = r.remote->id();
    r.sigma = r.remote->sigma();
  }
  return r;
}

int run_embed(Context& ctx, const EmbedCommand& cmd) {
  const std::vector<std::string>& texts = cmd.texts;
  DAEI_CHECK(!texts.empty(), "give at least one --text");
  const Release rel = open_release(ctx.config, cmd.noise_seed);
  at::Tensor noisy, clean;
  if (rel.local) {
    clean = rel.local->clean(texts);
    noisy = rel.local->add_noise(clean, texts);
  } else {
    noisy = rel.remote->embed(texts);
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    auto row = [&](const at::Tensor& t) {
      auto r = t[i].contiguous();
      return std::vector<float>(r.data_ptr<float>(), r.data_ptr<float>() + r.numel());
    };
    if (cmd.as_json) {
      nlohmann::json j{{"text", texts[i]}, {"embedder", rel.id}, {"sigma", rel.sigma}};
      j["clean"] = clean.defined() ? nlohmann::json(row(clean)) : nlohmann::json(nullptr);
      j["noisy"] = row(noisy);
      std::cout << j.dump() << "\n";
    } else {
      std::string line = fmt::format("{}\tdim {}", texts[i], noisy.size(1));
      if (clean.defined()) {
        double cos = torch::cosine_similarity(clean[i], noisy[i], 0).item<double>();
        line += fmt::format("  |clean| {:.4f}  cos(clean, noisy) {:.4f}", clean[i].norm().item<double>(), cos);
      }
      line += fmt::format("  noisy[0:4] {:.4f} {:.4f} {:.4f} {:.4f}", noisy[i][0].item<float>(),
                          noisy[i][1].item<float>(), noisy[i][2].item<float>(), noisy[i][3].item<float>());
      std::cout << line << "\n";
    }
  }
  return kExitOk;
}

struct ServeCommand {
  int port = -1;     // -1: server.port
  std::string host;  // empty: server.host
  std::optional<int64_t> noise_seed;
};

int run_serve(Context& ctx, const ServeCommand& cmd) {
  const Release rel = open_release(ctx.config, cmd.noise_seed);
  auto opt = ServerOptions::from_config(ctx.config);
  if (cmd.port >= 0) opt.port = cmd.port;
  if (!cmd.host.empty()) opt.host = cmd.host;
  if (opt.host != "127.0.0.1" && opt.host != "localhost" && opt.host != "::1")
    LOG_WARN("[serve] binding {}: reachable from other hosts", opt.host);
  const ReleaseNoise* local = rel.local.get();
  const NoisyEmbedder* remote = rel.remote.get();
  EmbeddingServer server(
      [local, remote](const std::vector<std::string>& t) { return local ? local->embed(t) : remote->embed(t); }, opt);
  // Every waiting connection holds a descriptor: the soft limit (often 1,024) would stop accepting long before
  // server.max_pending, so it is raised to the hard one.
  if (rlimit fl{}; ::getrlimit(RLIMIT_NOFILE, &fl) == 0 && fl.rlim_cur < fl.rlim_max) {
    fl.rlim_cur = fl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &fl);
  }
  signals::install_stop_handlers();
  std::signal(SIGINT, [](int) { signals::request_stop(); });
  server.start();
  LOG_INFO("[serve] {} on http://{}:{}/v1/embeddings{}", rel.local ? rel.id : rel.id + " (remote noise, passed on)",
           opt.host, server.port(), opt.api_key.empty() ? "" : " (bearer key)");
  std::cout << "listening http://" << opt.host << ":" << server.port() << std::endl;
  while (!signals::stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.stop();
  LOG_INFO("[serve] stopped after {} embeddings", server.served());
  return kExitOk;
}

struct EstimateSigmaCommand {
  bool as_json = false;
  int64_t repeats = 0;  // 0: estimate.repeats
};

int run_estimate(Context& ctx, const EstimateSigmaCommand& cmd) {
  auto emb = make_embedder(ctx.config);
  const int64_t repeats = cmd.repeats > 0 ? cmd.repeats : ctx.config.integer("estimate.repeats");
  auto est = estimate_release_sigma(ctx.config, *emb, repeats);
  if (cmd.as_json) {
    std::cout << nlohmann::json{{"sigma_hat", est.sigma}, {"rel_se", est.rel_se}, {"queries", est.queries},
                                {"texts", est.texts}, {"repeats", est.repeats}, {"dim", est.dim},
                                {"embedder", emb->id()}}.dump()
              << "\n";
  } else {
    std::cout << fmt::format("sigma_hat {:.6f}  rel. s.e. {:.2f}%  ({} queries: {} texts x {} repeats, dim {})\n",
                             est.sigma, 100 * est.rel_se, est.queries, est.texts, est.repeats, est.dim);
  }
  return kExitOk;
}

// The flags of the three commands of the release interface.
// --noise-seed (open_release), its help saying what a fixed key gives away and where the default key comes from.
void add_noise_seed_flag(CLI::App& a, std::optional<int64_t>& seed, const std::string& gives_away,
                         const std::string& default_key) {
  a.add_option("--noise-seed", seed,
               "a fixed noise key from this seed (tests and simulations only: " + gives_away + "; default: " +
                   default_key + ")");
}
void add_embed_flags(CLI::App& a, EmbedCommand& o) {
  a.add_option("--text", o.texts, "a text to embed (repeatable)")->required();
  a.add_flag("--json", o.as_json, "one JSON object a line: {text, clean, noisy}");
  add_noise_seed_flag(a, o.noise_seed, "the noise becomes predictable", "a secret key drawn from the OS");
}
void add_serve_flags(CLI::App& a, ServeCommand& o) {
  a.add_option("--port", o.port, "port (default server.port; 0 picks a free one)");
  a.add_option("--host", o.host, "address to bind (default server.host = 127.0.0.1)");
  add_noise_seed_flag(a, o.noise_seed, "anyone who knows it can subtract the noise",
                      "a secret key drawn from the OS at start, never logged");
}
void add_estimate_flags(CLI::App& a, EstimateSigmaCommand& o) {
  a.add_flag("--json", o.as_json, "one JSON line: sigma_hat, rel_se, queries, ...");
  a.add_option("--repeats", o.repeats, "queries per calibration text (default estimate.repeats)");
}

DAEI_SUBCOMMAND(release_command(
    "embed", "print the clean and noisy embeddings of --text lines (one line each; --json for JSON lines)",
    bind_options<EmbedCommand>(add_embed_flags, run_embed)));
DAEI_SUBCOMMAND(release_command("serve-embedder",
                                "serve the configured (noisy) embedder over HTTP: POST /v1/embeddings (OpenAI-style); "
                                "SIGTERM/SIGINT stop it",
                                bind_options<ServeCommand>(add_serve_flags, run_serve)));
DAEI_SUBCOMMAND(release_command(
    "estimate-sigma",
    "estimate the release interface's noise sigma from repeated queries (paper eq. 3) with its relative s.e.",
    bind_options<EstimateSigmaCommand>(add_estimate_flags, run_estimate)));

}  // namespace
}  // namespace daei::cli
