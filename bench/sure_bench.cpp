// The SURE training step of stage 1 at the paper's sizes (d 768, H 1024, depth 3, batch 256, K 5): forward,
// divergence, backward and an AdamW step, for each divergence option. Prints one JSON line per option.
//   build/bench_sure_bench [--steps N] [--dim D] [--hidden H] [--depth L] [--batch B] [--probes K]
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "stages/recipes/sure.h"

using namespace daei;

int main(int argc, char** argv) {
  int64_t steps = 5, dim = 768, hidden = 1024, depth = 3, batch = 256, probes = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (a == "--steps") steps = v;
    else if (a == "--dim") dim = v;
    else if (a == "--hidden") hidden = v;
    else if (a == "--depth") depth = v;
    else if (a == "--batch") batch = v;
    else if (a == "--probes") probes = v;
  }
  torch::set_num_threads(1);
  for (const std::string div : {"hutchinson", "fd"}) {
    torch::manual_seed(0);
    DaeOptions o;
    o.dim = dim, o.hidden = hidden, o.depth = depth;
    Dae dae(o);
    dae->train();
    torch::optim::AdamW opt(dae->parameters(), torch::optim::AdamWOptions(1e-3));
    SureOptions so;
    so.divergence = div;
    so.probes = probes;
    auto y = torch::randn({batch, dim}) * 0.04;
    auto sigma = torch::full({batch}, 0.01);
    std::vector<double> times;
    for (int64_t s = 0; s < steps + 1; ++s) {
      auto gp = step_generator(1, s, 3);
      auto z = rademacher({probes, batch, dim}, gp);
      std::vector<at::Tensor> masks;
      for (int64_t i = 0; i < depth; ++i)
        masks.push_back((torch::rand({batch, 2 * hidden}) >= 0.1).to(torch::kFloat32) / 0.9);
      auto t0 = std::chrono::steady_clock::now();
      opt.zero_grad();
      auto t = sure_loss(dae, y, sigma, z, masks, so);
      t.loss.backward();
      opt.step();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s > 0) times.push_back(dt);  // the first step warms up allocations
    }
    std::sort(times.begin(), times.end());
    nlohmann::json j{{"impl", "daei C++"},      {"divergence", div}, {"median_s", times[times.size() / 2]},
                     {"min_s", times.front()}, {"steps", steps},    {"dim", dim},
                     {"hidden", hidden},       {"depth", depth},    {"batch", batch},
                     {"probes", probes},       {"threads", 1}};
    std::cout << j.dump() << std::endl;
  }
  return 0;
}
