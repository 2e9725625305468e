// train.precision (model/net/precision.h): the probe against /proc/cpuinfo, the key's resolution (bf16 refused where the
// CPU lacks it, with the missing ISA named), bad values refused by the config rules, the config guard keeping saved
// work, mp_linear against torch::linear, and a small T5's loss, gradients and decoding logits in bf16 against fp32.
// The numeric tests run on any CPU (without native bf16, libtorch emulates the bf16 products: slow, same rounding).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/config_guard.h"
#include "core/config.h"
#include "core/error.h"
#include "model/net/generate.h"
#include "model/attack/inverter.h"
#include "model/net/precision.h"

using namespace daei;

namespace {

bool cpuinfo_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    for (std::string w; words >> w;)
      if (w == flag) return true;
    return false;
  }
  return false;
}

std::string refusal(const std::string& value, bool cuda, const CpuBf16& cpu) {
  try {
    resolve_precision(value, cuda, cpu);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// max |a − b| / max |a| and max |a − b|, printed so that a run records the figures.
double rel_diff(const at::Tensor& ref, const at::Tensor& x, const std::string& what) {
  const double abs = (ref.to(torch::kDouble) - x.to(torch::kDouble)).abs().max().item<double>();
  const double rel = abs / std::max(1e-30, ref.abs().max().item<double>());
  std::cout << "[precision] " << what << ": max abs diff " << abs << ", relative to max |fp32| " << rel << "\n";
  return rel;
}

InverterConfig small_inverter() {
  InverterConfig c;
  c.dim = 48;
  c.repeat = 4;
  c.t5.vocab_size = 300;
  c.t5.d_model = 64;
  c.t5.d_kv = 16;
  c.t5.num_heads = 4;
  c.t5.d_ff = 128;
  c.t5.num_layers = c.t5.num_decoder_layers = 2;
  c.t5.dropout_rate = 0.0;
  return c;
}

}  // namespace

TEST(Precision, ProbeAgreesWithProcCpuinfo) {
  const CpuBf16& c = cpu_bf16();
  // Linux lists a flag only when the CPU has it and the kernel enabled its register state.
  EXPECT_EQ(c.avx512_bf16 && c.os_avx512, cpuinfo_flag("avx512_bf16"));
  EXPECT_EQ(c.amx_bf16 && c.os_amx, cpuinfo_flag("amx_bf16"));
  std::cout << "[precision] this CPU: native bf16 " << (c.native() ? "yes" : "no") << " (" << c.isa() << ")\n";
}

TEST(Precision, TheKeyResolvesFromTheProbe) {
  const CpuBf16& here = cpu_bf16();
  EXPECT_EQ(resolve_precision("fp32", false, here), Precision::fp32);
  if (here.native()) {  // this CPU: bf16 accepted, auto picks it
    std::string why;
    EXPECT_EQ(resolve_precision("bf16", false, here, &why), Precision::bf16);
    EXPECT_TRUE(has(why, here.isa())) << why;
    EXPECT_EQ(resolve_precision("auto", false, here, &why), Precision::bf16);
  } else {  // this CPU: bf16 refused in one line naming what is missing, auto falls back to fp32
    const std::string e = refusal("bf16", false, here);
    EXPECT_TRUE(has(e, "train.precision is bf16") && has(e, "AVX512-BF16") && e.find('\n') == std::string::npos) << e;
    EXPECT_EQ(resolve_precision("auto", false, here), Precision::fp32);
  }
  // A CPU without bf16 (whatever this one has): refused, the ISA named; auto is fp32 and says why; CUDA takes bf16.
  const CpuBf16 none{};
  const std::string e = refusal("bf16", false, none);
  EXPECT_TRUE(has(e, "AVX512-BF16") && has(e, "AMX-BF16") && has(e, "use fp32 or auto")) << e;
  std::string why;
  EXPECT_EQ(resolve_precision("auto", false, none, &why), Precision::fp32);
  EXPECT_TRUE(has(why, "fp32") && has(why, "neither")) << why;
  EXPECT_EQ(resolve_precision("bf16", true, none), Precision::bf16);
  EXPECT_EQ(resolve_precision("auto", true, none), Precision::bf16);
  // The OS not enabling the state counts as missing.
  CpuBf16 no_os;
  no_os.avx512_bf16 = true;
  EXPECT_TRUE(has(refusal("bf16", false, no_os), "XCR0"));
  EXPECT_TRUE(has(refusal("fp16", false, here), "must be fp32, bf16 or auto"));
}

TEST(Precision, AutoKeepsFp32WhereBf16ProductsAreNotFaster) {
  CpuBf16 native;  // whatever this CPU has: one that multiplies bf16 natively
  native.avx512_bf16 = native.os_avx512 = true;
  int calls = 0;
  auto ratio = [&calls](double r) {
    return [&calls, r] {
      ++calls;
      return r;
    };
  };
  std::string why;
  EXPECT_EQ(resolve_precision("auto", false, native, &why, ratio(0.6)), Precision::fp32);
  EXPECT_TRUE(has(why, "0.60×") && has(why, "below 1.10×") && has(why, "AVX512-BF16")) << why;
  EXPECT_EQ(resolve_precision("auto", false, native, &why, ratio(1.5)), Precision::bf16);
  EXPECT_TRUE(has(why, "1.50× faster")) << why;
  EXPECT_EQ(resolve_precision("auto", false, native, &why, ratio(NAN)), Precision::fp32) << why;
  EXPECT_EQ(calls, 3);
  // bf16 asked for, CUDA, or a CPU without bf16: nothing is measured.
  EXPECT_EQ(resolve_precision("bf16", false, native, &why, ratio(0.5)), Precision::bf16);
  EXPECT_EQ(resolve_precision("auto", true, native, &why, ratio(0.5)), Precision::bf16);
  EXPECT_EQ(resolve_precision("auto", false, CpuBf16{}, &why, ratio(2.0)), Precision::fp32);
  EXPECT_EQ(calls, 3);
}

TEST(Precision, TheMeasuredRatioIsFiniteAndAgreedOnByTheRanks) {
  const double r = measure_bf16_speedup(64, 32, 64, 100);
  EXPECT_TRUE(std::isfinite(r) && r > 0) << r;
  // configure_precision hands its measurement to agree (the ranks' mean) and decides on what agree returns.
  Config cfg = Config::defaults();
  cfg.set("train.precision=auto", "test");
  cfg.set("inverter.vocab_size=100", "test");
  double seen = -1;
  std::string why;
  const Precision p = configure_precision(
      cfg, [&seen](double v) { return seen = v, 0.5; }, &why);
  set_matmul_precision(Precision::fp32);
  EXPECT_EQ(p, Precision::fp32) << why;
  if (cpu_bf16().native()) {
    EXPECT_GT(seen, 0) << why;
    EXPECT_TRUE(has(why, "0.50×")) << why;
  } else {
    EXPECT_EQ(seen, -1) << "a CPU without native bf16 measures nothing";
  }
}

TEST(Precision, BadValuesOfTheKeyAreRefusedInOneLine) {
  for (const char* bad : {"fp16", "BF16", "off", "\"\""}) {
    std::string msg;
    try {
      Config::load("", {std::string("train.precision=") + bad});
    } catch (const UsageError& e) {
      msg = e.what();
    }
    EXPECT_TRUE(has(msg, "train.precision") && has(msg, "must be one of fp32, bf16, auto") &&
                msg.find('\n') == std::string::npos)
        << bad << ": " << msg;
  }
  for (const char* ok : {"fp32", "bf16", "auto"})
    EXPECT_NO_THROW(Config::load("", {std::string("train.precision=") + ok}));
  EXPECT_EQ(Config::defaults().str("train.precision"), "fp32");
}

TEST(Precision, TheConfigGuardKeepsSavedWorkWhenThePrecisionChanges) {
  EXPECT_TRUE(cli::work_depending_on("train.precision").empty());
}

// Runs saved before train.precision hold the retired train.amp in their config.yaml: still compared, not skipped.
TEST(Precision, ARunSavedWithTheRetiredAmpKeyIsStillCompared) {
  const std::string dir = ::testing::TempDir() + "daei-precision-amp";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.yaml") << "train:\n  amp: bf16\n  precision: fp32\nstage2:\n  lr: 0.5\n";
  const auto c = cli::compare_with_saved(dir, Config::defaults());
  EXPECT_NE(std::find(c.accepted.begin(), c.accepted.end(), "stage2.lr"), c.accepted.end());
  EXPECT_TRUE(c.refused.empty());
  std::filesystem::remove_all(dir);
}

TEST(Precision, GuardAndProcessSetting) {
  EXPECT_EQ(matmul_precision(), Precision::fp32);
  {
    MatmulPrecisionGuard g(Precision::bf16);
    EXPECT_EQ(matmul_precision(), Precision::bf16);
    {
      MatmulPrecisionGuard inner(Precision::fp32);
      EXPECT_EQ(matmul_precision(), Precision::fp32);
    }
    EXPECT_EQ(matmul_precision(), Precision::bf16);
  }
  EXPECT_EQ(matmul_precision(), Precision::fp32);
}

TEST(Precision, MpLinearGradientsMatchTorchLinear) {
  torch::manual_seed(3);
  auto x = torch::randn({5, 7, 96}).requires_grad_(true);
  auto w = (torch::randn({80, 96}) * 0.1).requires_grad_(true);
  auto b = torch::randn({80}).requires_grad_(true);
  auto go = torch::randn({5, 7, 80});
  auto run = [&](Precision p, bool bias) {
    MatmulPrecisionGuard g(p);
    for (auto* t : {&x, &w, &b})
      if (t->grad().defined()) t->mutable_grad() = at::Tensor();
    auto y = mp_linear(x, w, bias ? b : at::Tensor());
    y.backward(go);
    return std::vector<at::Tensor>{y.detach(), x.grad().clone(), w.grad().clone(),
                                   bias ? b.grad().clone() : at::Tensor()};
  };
  for (bool bias : {true, false}) {
    auto ref = [&] {
      for (auto* t : {&x, &w, &b})
        if (t->grad().defined()) t->mutable_grad() = at::Tensor();
      auto y = torch::linear(x, w, bias ? b : at::Tensor());
      y.backward(go);
      return std::vector<at::Tensor>{y.detach(), x.grad().clone(), w.grad().clone(),
                                     bias ? b.grad().clone() : at::Tensor()};
    }();
    auto f = run(Precision::fp32, bias);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(f[i], ref[i])) << "fp32 mode is torch::linear, " << i;
    auto h = run(Precision::bf16, bias);
    const char* names[] = {"mp_linear y", "mp_linear grad x", "mp_linear grad w", "mp_linear grad b"};
    // bf16 keeps 8 bits: each operand rounds by ≤ 2^-9 relative. Where the CPU multiplies bf16 natively (oneDNN)
    // the products are summed in fp32, and sums of 96, 80 or 35 products stay within 1 %. libtorch 1.13's fallback on
    // other CPUs sums in bf16 (measured on Zen 3: 1.7 % here, 5.7 % at 1,000 products), one reason
    // resolve_precision refuses bf16 there; the path still runs, held to that looser bound.
    const double tolerance = cpu_bf16().native() ? 1e-2 : 4e-2;
    for (size_t i = 0; i < (bias ? 4u : 3u); ++i) {
      EXPECT_EQ(h[i].scalar_type(), torch::kFloat) << names[i];
      EXPECT_EQ(h[i].sizes(), ref[i].sizes()) << names[i];
      EXPECT_LT(rel_diff(ref[i], h[i], names[i]), tolerance) << names[i];
    }
    EXPECT_FALSE(torch::equal(h[0], ref[0])) << "the bf16 path did not run";
    if (bias) {
      EXPECT_TRUE(torch::allclose(h[3], ref[3], 1e-6, 1e-6)) << "the bias gradient is an fp32 sum";
    }
  }
}

TEST(Precision, SmallT5ForwardAndBackwardInBf16MatchFp32) {
  torch::manual_seed(11);
  Inverter m(small_inverter());
  m->train();  // dropout 0: the same function in both runs
  auto e = torch::randn({6, 48});
  auto labels = torch::randint(2, 300, {6, 12}, torch::kLong);
  labels.index_put_({torch::indexing::Slice(3), torch::indexing::Slice(8)}, -100);  // ragged rows
  auto run = [&](Precision p) {
    MatmulPrecisionGuard g(p);
    m->zero_grad();
    auto l = m->loss(e, labels);
    auto mean = l.sum / static_cast<double>(l.count);
    mean.backward();
    std::map<std::string, at::Tensor> grads;
    for (const auto& kv : m->named_parameters()) grads[kv.key()] = kv.value().grad().clone();
    return std::pair{mean.item<double>(), grads};
  };
  auto [l32, g32] = run(Precision::fp32);
  auto [l16, g16] = run(Precision::bf16);
  const double dl = std::abs(l16 - l32) / std::abs(l32);
  std::cout << "[precision] T5 loss fp32 " << l32 << " bf16 " << l16 << " relative diff " << dl << "\n";
  EXPECT_LT(dl, 2e-3);   // the loss: a mean over 60 tokens of CE computed in fp32 from bf16-product logits
  EXPECT_GT(dl, 0.0);    // and the bf16 path did run
  // Per tensor ||g16 − g32|| / ||g32|| (elementwise relative errors blow up on near-zero entries). At random init the
  // gradients are sums of nearly cancelling terms, so bf16's 8-bit rounding shows more in them than in the loss:
  // PyTorch's own autocast bf16 on a model of these shapes (bench/t5_reference.py's, its own init; 4 seeds) differs
  // from fp32 by 2.4–3.2 % over all gradients, 2.0–2.4 % for the median tensor and 5.6–8 % for the worst; here 4.8 %,
  // 3.1 % and 9.9 % (the encoder's relative-position bias, a sum over every query and key). The bounds leave room for
  // that and still catch a wrong product (≥ 100 %).
  double worst = 0, worst_abs = 0, diff2 = 0, ref2 = 0;
  std::string worst_name;
  std::vector<double> rels;
  for (const auto& [name, g] : g32) {
    ASSERT_TRUE(g16.at(name).defined()) << name;
    EXPECT_EQ(g16.at(name).scalar_type(), torch::kFloat) << name;
    const double n = g.norm().item<double>(), dn = (g16.at(name) - g).norm().item<double>();
    const double d = dn / std::max(n, 1e-30);
    diff2 += dn * dn, ref2 += n * n;
    rels.push_back(d);
    worst_abs = std::max(worst_abs, (g16.at(name) - g).abs().max().item<double>());
    if (d > worst) worst = d, worst_name = name;
    if (std::getenv("DAEI_PRECISION_VERBOSE")) std::cout << "  " << name << " |g| " << n << " rel " << d << "\n";
  }
  std::sort(rels.begin(), rels.end());
  const double median = rels[rels.size() / 2], all = std::sqrt(diff2 / ref2);
  std::cout << "[precision] T5 gradients, relative norm of the difference: all " << all << ", median tensor " << median
            << ", worst " << worst << " (" << worst_name << "); max abs diff " << worst_abs << " over " << g32.size()
            << " tensors\n";
  EXPECT_LT(all, 0.1);
  EXPECT_LT(median, 0.06);
  EXPECT_LT(worst, 0.2) << worst_name;
}

TEST(Precision, DecodingLogitsInBf16MatchFp32) {
  torch::manual_seed(12);
  Inverter m(small_inverter());
  m->eval();
  auto e = torch::randn({4, 48});
  auto step_logits = [&](Precision p) {
    MatmulPrecisionGuard g(p);
    torch::NoGradGuard ng;
    Bf16WeightScope frozen;  // as t5_generate: the weights' bf16 copies reused over the steps
    auto x = m->project(e);
    auto mask = torch::ones({4, x.size(1)}, torch::kLong);
    auto enc = m->t5->encode(x, mask);
    auto cache = m->t5->make_cache();
    auto ids = torch::zeros({4, 1}, torch::kLong);
    std::vector<at::Tensor> out;
    for (int s = 0; s < 5; ++s) {  // the cached path (attention_decode) with fixed inputs: logits comparable a step
      auto lg = m->t5->decode(ids, enc, mask, &cache).select(1, -1);
      out.push_back(lg);
      ids = torch::full({4, 1}, 5 + s, torch::kLong);
    }
    return torch::stack(out);
  };
  auto a = step_logits(Precision::fp32), b = step_logits(Precision::bf16);
  EXPECT_LT(rel_diff(a, b, "decoding logits (5 cached steps)"), 2e-2);
  // Greedy decoding through t5_generate agrees on most tokens (random weights: near-ties may flip a few).
  GenerateOptions opt;
  opt.max_length = 9;
  at::Tensor s32, s16;
  {
    MatmulPrecisionGuard g(Precision::fp32);
    s32 = m->generate(e, opt);
  }
  {
    MatmulPrecisionGuard g(Precision::bf16);
    s16 = m->generate(e, opt);
  }
  ASSERT_EQ(s32.size(0), s16.size(0));
  const int64_t L = std::min(s32.size(1), s16.size(1));
  const double same = (s32.narrow(1, 0, L) == s16.narrow(1, 0, L)).to(torch::kDouble).mean().item<double>();
  std::cout << "[precision] greedy tokens equal in bf16 and fp32: " << same << "\n";
  EXPECT_GE(same, 0.75);
}
