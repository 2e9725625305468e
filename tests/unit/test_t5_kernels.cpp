// The fused T5 kernels (src/model/net/t5_kernels.h) against the libtorch op chains they replace, and the inverter's
// fixed-batch loss against the project's Python reference (tests/fixtures/make_inverter_step_fixture.py).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/safetensors.h"
#include "model/attack/inverter.h"
#include "model/net/t5_kernels.h"

namespace {

using daei::fast_dropout;
using daei::t5_speed;

struct SpeedGuard {  // restores the default switches whatever a test sets
  ~SpeedGuard() { t5_speed() = daei::T5Speed{}; }
};

double max_rel(const torch::Tensor& a, const torch::Tensor& b) {
  auto d = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
  return d / std::max(1e-30, b.to(torch::kDouble).abs().max().item<double>());
}

TEST(T5Kernels, DropoutKeepsShareAndScales) {
  torch::manual_seed(3);
  for (double p : {0.1, 0.5}) {
    auto x = torch::rand({1 << 20}) + 1.0;  // never 0, so y == 0 exactly where dropped
    auto y = fast_dropout(x, p, true);
    auto kept = y != 0;
    const double share = kept.to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(share, 1.0 - p, 0.003) << p;  // ~10 standard deviations at 2^20 draws
    EXPECT_LT(max_rel(y.masked_select(kept), x.masked_select(kept) / (1.0 - p)), 1e-6);
    // Neighbours (drawn from one 64-bit word) are independent: P(both kept) = (1-p)^2.
    auto k = kept.to(torch::kDouble);
    const double both = (k.slice(0, 0, -1) * k.slice(0, 1)).mean().item<double>();
    EXPECT_NEAR(both, (1.0 - p) * (1.0 - p), 0.004) << p;
  }
}

TEST(T5Kernels, DropoutBackwardIsGradTimesMaskOverKeep) {
  torch::manual_seed(4);
  const double p = 0.1;
  auto x = (torch::rand({64, 33, 17}) + 1.0).set_requires_grad(true);
  auto y = fast_dropout(x.transpose(0, 1), p, true);  // non-contiguous input
  auto g = torch::randn_like(y);
  y.backward(g);
  auto mask = (y != 0).to(torch::kFloat);
  auto want = (g * mask / (1.0 - p)).transpose(0, 1);
  EXPECT_LT(max_rel(x.grad(), want), 1e-6);
}

TEST(T5Kernels, DropoutDeterministicUnderManualSeedAndIdentityWhenOff) {
  auto x = torch::randn({1000, 37});
  torch::manual_seed(11);
  auto a = fast_dropout(x, 0.1, true);
  torch::manual_seed(11);
  auto b = fast_dropout(x, 0.1, true);
  EXPECT_TRUE(torch::equal(a, b));
  auto c = fast_dropout(x, 0.1, true);  // the generator moved on: another mask
  EXPECT_FALSE(torch::equal(a, c));
  EXPECT_TRUE(torch::equal(fast_dropout(x, 0.0, true), x));
  EXPECT_TRUE(torch::equal(fast_dropout(x, 0.3, false), x));
  EXPECT_EQ(fast_dropout(x, 1.0, true).abs().sum().item<float>(), 0.0f);
  EXPECT_THROW(fast_dropout(x, 1.5, true), std::exception);
  auto d = torch::randn({999}, torch::kDouble);  // odd count: the last element uses half a word
  torch::manual_seed(5);
  auto yd = fast_dropout(d, 0.2, true);
  EXPECT_EQ(yd.scalar_type(), torch::kDouble);
  auto kept = yd != 0;
  EXPECT_LT(max_rel(yd.masked_select(kept), d.masked_select(kept) / 0.8), 1e-12);
}

TEST(T5Kernels, DropoutAddAndReluDropoutMatchTheirOpChains) {
  const double p = 0.1;
  torch::manual_seed(8);
  auto h = torch::randn({64, 33, 17}).set_requires_grad(true);
  auto y = (torch::rand({64, 33, 17}) + 1.0).set_requires_grad(true);
  auto out = daei::t5_dropout_add(h, y, p, true);
  auto kept = ((out - h).abs() > 0.5).detach();  // kept y's are ≥ 1/(1-p), dropped ones add 0
  EXPECT_NEAR(kept.to(torch::kDouble).mean().item<double>(), 1.0 - p, 0.01);
  EXPECT_LT((out - (h + y * kept / (1.0 - p))).abs().max().item<double>(), 1e-5);
  auto g = torch::randn_like(out);
  out.backward(g);
  EXPECT_TRUE(torch::equal(h.grad(), g));
  EXPECT_LT(max_rel(y.grad(), g * kept / (1.0 - p)), 1e-6);
  EXPECT_TRUE(torch::equal(daei::t5_dropout_add(h, y, p, false), h + y));

  auto x = torch::randn({64, 33, 17}).set_requires_grad(true);
  auto r = daei::t5_relu_dropout(x, p, true);
  auto k = (r != 0).detach();
  auto pos = x.detach() > 0;
  EXPECT_EQ(k.logical_and(pos.logical_not()).sum().item<int64_t>(), 0);
  const double share = k.sum().item<double>() / pos.sum().item<double>();
  EXPECT_NEAR(share, 1.0 - p, 0.01);
  EXPECT_LT(max_rel(r, x.detach() * k / (1.0 - p)), 1e-6);
  auto gr = torch::randn_like(r);
  r.backward(gr);
  EXPECT_LT(max_rel(x.grad(), gr * k / (1.0 - p)), 1e-6);
  EXPECT_TRUE(torch::equal(daei::t5_relu_dropout(x, p, false), torch::relu(x)));
  torch::manual_seed(9);
  auto r1 = daei::t5_relu_dropout(x, p, true);
  torch::manual_seed(9);
  EXPECT_TRUE(torch::equal(r1, daei::t5_relu_dropout(x, p, true)));
}

TEST(T5Kernels, AttentionCoreMatchesOpChain) {
  torch::manual_seed(10);
  const int64_t B = 3, H = 4, Tq = 5, Tk = 7, dk = 6;
  auto ref = [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& bias) {
    auto sh = [&](const torch::Tensor& t) { return t.view({B, -1, H, dk}).transpose(1, 2); };
    auto s = torch::matmul(sh(q), sh(k).transpose(2, 3));
    if (bias.defined()) s = s + bias;
    return torch::matmul(torch::softmax(s, -1), sh(v)).transpose(1, 2).reshape({B, Tq, H * dk});
  };
  const std::vector<torch::Tensor> biases = {torch::randn({1, H, Tq, Tk}), torch::randn({B, 1, 1, Tk}), torch::Tensor()};
  for (const auto& b0 : biases) {
    auto q0 = torch::randn({B, Tq, H * dk}), k0 = torch::randn({B, Tk, H * dk}), v0 = torch::randn({B, Tk, H * dk});
    std::vector<torch::Tensor> a, r;
    for (int i = 0; i < 2; ++i) {
      auto& xs = i == 0 ? a : r;
      for (const auto& t : {q0, k0, v0}) xs.push_back(t.clone().set_requires_grad(true));
      xs.push_back(b0.defined() ? b0.clone().set_requires_grad(b0.size(0) == 1) : torch::Tensor());
    }
    ASSERT_TRUE(daei::attention_core_supported(a[0], a[1], a[2], a[3], H));
    auto ya = daei::attention_core(a[0], a[1], a[2], a[3], H, 0.1, /*train=*/false);  // eval: no dropout
    auto yr = ref(r[0], r[1], r[2], r[3]);
    EXPECT_LT(max_rel(ya, yr), 1e-5);
    auto g = torch::randn_like(ya);
    ya.backward(g);
    yr.backward(g);
    for (int i = 0; i < 4; ++i) {
      if (!a[static_cast<size_t>(i)].defined() || !a[static_cast<size_t>(i)].requires_grad()) continue;
      EXPECT_LT(max_rel(a[static_cast<size_t>(i)].grad(), r[static_cast<size_t>(i)].grad()), 1e-5) << i;
    }
  }
  // Training with dropout: reproducible under the seed, gradients finite, different from eval.
  auto q = torch::randn({B, Tq, H * dk}).set_requires_grad(true), k = torch::randn({B, Tk, H * dk}),
       v = torch::randn({B, Tk, H * dk});
  torch::manual_seed(12);
  auto y1 = daei::attention_core(q, k, v, {}, H, 0.3, true);
  torch::manual_seed(12);
  auto y2 = daei::attention_core(q, k, v, {}, H, 0.3, true);
  EXPECT_TRUE(torch::equal(y1, y2));
  EXPECT_FALSE(torch::allclose(y1, daei::attention_core(q, k, v, {}, H, 0.3, false)));
  y1.sum().backward();
  EXPECT_TRUE(torch::isfinite(q.grad()).all().item<bool>());
  EXPECT_FALSE(daei::attention_core_supported(q.to(torch::kDouble), k, v, {}, H));
  EXPECT_FALSE(daei::attention_core_supported(q, k, v, torch::randn({2, H, Tq, Tk}), H));
}

torch::Tensor rms_ref(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return w * (x * torch::rsqrt(x.pow(2).mean(-1, true) + eps));
}

TEST(T5Kernels, RmsNormMatchesOpChainForwardAndBackward) {
  torch::manual_seed(6);
  for (auto dt : {torch::kDouble, torch::kFloat}) {
    const double tol = dt == torch::kDouble ? 1e-12 : 2e-6;
    auto x0 = torch::randn({5, 7, 48}, dt) * 3.0;
    auto w0 = torch::randn({48}, dt);
    auto x1 = x0.clone().set_requires_grad(true), w1 = w0.clone().set_requires_grad(true);
    auto x2 = x0.clone().set_requires_grad(true), w2 = w0.clone().set_requires_grad(true);
    auto y1 = daei::rms_norm(x1, w1, 1e-6);
    auto y2 = rms_ref(x2, w2, 1e-6);
    EXPECT_LT(max_rel(y1, y2), tol);
    auto g = torch::randn_like(y1);
    y1.backward(g);
    y2.backward(g);
    EXPECT_LT(max_rel(x1.grad(), x2.grad()), tol * 10);
    EXPECT_LT(max_rel(w1.grad(), w2.grad()), tol * 10);
  }
}

TEST(T5Kernels, LinearCrossEntropyMatchesLogSoftmaxNll) {
  torch::manual_seed(7);
  const int64_t N = 37, d = 16, V = 50;
  auto h0 = torch::randn({N, d}) * 2.0, w0 = torch::randn({V, d});
  auto y = torch::randint(0, V, {N}, torch::kLong);
  y.index_put_({torch::tensor({0, 5, 36})}, -100);
  auto h1 = h0.clone().set_requires_grad(true), w1 = w0.clone().set_requires_grad(true);
  auto h2 = h0.clone().set_requires_grad(true), w2 = w0.clone().set_requires_grad(true);
  auto l1 = daei::linear_cross_entropy_sum(h1, w1, y, /*chunk=*/8);  // 5 chunks, the last one short
  auto l2 = at::cross_entropy_loss(torch::linear(h2, w2), y, {}, at::Reduction::Sum, -100);
  EXPECT_NEAR(l1.item<double>(), l2.item<double>(), 1e-5 * std::abs(l2.item<double>()));
  (l1 * 0.37).backward();
  (l2 * 0.37).backward();
  EXPECT_LT(max_rel(h1.grad(), h2.grad()), 1e-5);
  EXPECT_LT(max_rel(w1.grad(), w2.grad()), 1e-5);
  {
    torch::NoGradGuard ng;
    EXPECT_NEAR(daei::linear_cross_entropy_sum(h0, w0, y, 1000).item<double>(), l2.item<double>(),
                1e-5 * std::abs(l2.item<double>()));
  }
  auto bad = y.clone();
  bad[1] = V;
  EXPECT_THROW(daei::linear_cross_entropy_sum(h0, w0, bad), std::exception);
}

// ------------------------------------------------------------------------- parity with the Python reference

const std::string kDir = std::string(DAEI_FIXTURES) + "/models/inverter_step/";

daei::Inverter reference_inverter() {
  daei::InverterConfig c;  // the sizes of make_inverter_step_fixture.py
  c.dim = 16;
  c.repeat = 4;
  c.t5.vocab_size = 256;
  c.t5.d_model = 32;
  c.t5.d_kv = 8;
  c.t5.num_heads = 4;
  c.t5.d_ff = 64;
  c.t5.num_layers = c.t5.num_decoder_layers = 2;
  c.t5.feed_forward_proj = "relu";
  c.t5.dropout_rate = 0.1;
  daei::Inverter m(c);
  auto params = daei::load_safetensors(kDir + "params.safetensors");
  torch::NoGradGuard ng;
  size_t n = 0;
  for (auto& kv : m->named_parameters()) {
    EXPECT_TRUE(params.count(kv.key())) << kv.key();
    if (!params.count(kv.key())) continue;
    kv.value().copy_(params.at(kv.key()));
    ++n;
  }
  EXPECT_EQ(n, params.size());
  return m;
}

TEST(T5Kernels, InverterLossEqualsPythonReferenceOnFixedBatch) {
  SpeedGuard sg;
  auto io = daei::load_safetensors(kDir + "io.safetensors");
  const double want = io.at("loss").item<double>();
  for (bool fused : {true, false}) {
    t5_speed() = daei::T5Speed{fused, fused, fused, fused, fused};
    auto m = reference_inverter();
    m->eval();  // dropout off on both sides: the masks come from different generators
    auto l = m->loss(io.at("e"), io.at("labels"));
    auto mean = l.sum / static_cast<double>(l.count);
    std::printf("[parity] inverter loss fused=%d: %.8f (python reference %.8f, diff %.2e)\n", fused,
                mean.item<double>(), want, mean.item<double>() - want);
    EXPECT_NEAR(mean.item<double>(), want, 1e-5) << "fused " << fused;
    mean.backward();
    double worst = 0;
    for (auto& kv : m->named_parameters()) worst = std::max(worst, max_rel(kv.value().grad(), io.at("grad." + kv.key())));
    std::printf("[parity] worst gradient rel err fused=%d: %.2e\n", fused, worst);
    EXPECT_LT(worst, 1e-4) << "fused " << fused;
  }
}

// Train mode at dropout 0 runs the training-time code paths (dropout calls included) and must equal eval mode.
TEST(T5Kernels, InverterTrainModeAtDropoutZeroEqualsReference) {
  SpeedGuard sg;
  auto io = daei::load_safetensors(kDir + "io.safetensors");
  auto m = reference_inverter();
  m->train();
  for (auto& mod : m->modules(false)) {
    if (auto* a = mod->as<daei::T5AttentionImpl>()) a->dropout = 0.0;
    if (auto* d = mod->as<daei::T5DenseImpl>()) d->dropout = 0.0;
    if (auto* s = mod->as<daei::T5StackImpl>()) s->cfg.dropout_rate = 0.0;
    if (auto* d = mod->as<torch::nn::DropoutImpl>()) d->options.p(0.0);
  }
  auto l = m->loss(io.at("e"), io.at("labels"));
  EXPECT_NEAR((l.sum / static_cast<double>(l.count)).item<double>(), io.at("loss").item<double>(), 1e-5);
}

}  // namespace

// Decoding's attention: Tq queries over a cached prefix that is a view of a larger buffer (the cache's layout),
// with each broadcast shape of bias the decoder passes, against softmax(q kᵀ + bias) · v as plain ops.
TEST(T5Kernels, AttentionDecodeMatchesOpChainOnCacheViews) {
  torch::manual_seed(7);
  const int64_t B = 3, H = 4, dk = 12, D = H * dk, cap = 20;  // dk 12: an AVX2 block of 8 and a tail of 4
  for (int64_t Tq : {1, 2})
    for (int64_t Tk : {1, 5, 17}) {
      auto q = torch::randn({B, Tq, D});
      auto kbuf = torch::randn({B, cap, D}), vbuf = torch::randn({B, cap, D});
      auto k = kbuf.narrow(1, 0, Tk), v = vbuf.narrow(1, 0, Tk);  // not contiguous: rows of a bigger buffer
      ASSERT_FALSE(k.is_contiguous() && Tk < cap && B > 1);
      for (const auto& bias : {torch::Tensor(), torch::randn({1, H, Tq, Tk}), torch::randn({B, 1, 1, Tk}) * 3}) {
          torch::NoGradGuard ng;
          auto split = [&](const torch::Tensor& t) { return t.reshape({B, -1, H, dk}).transpose(1, 2); };
          auto s = torch::matmul(split(q), split(k).transpose(2, 3));
          if (bias.defined()) s = s + bias;
          auto want = torch::matmul(torch::softmax(s, -1), split(v)).transpose(1, 2).reshape({B, Tq, D});
          ASSERT_TRUE(daei::attention_decode_supported(q, k, v, bias, H));
          auto got = daei::attention_decode(q, k, v, bias, H);
          const double err = (got - want).abs().max().item<double>();
          EXPECT_LE(err, 1e-5) << "Tq " << Tq << " Tk " << Tk;
        }
    }
  EXPECT_FALSE(daei::attention_decode_supported(torch::randn({2, 1, 10}), torch::randn({2, 3, 10}), torch::randn({2, 3, 10}),
                                          {}, 3))
      << "d not divisible by heads";
  EXPECT_FALSE(daei::attention_decode_supported(torch::randn({2, 1, 8}).to(torch::kDouble), torch::randn({2, 3, 8}),
                                          torch::randn({2, 3, 8}), {}, 2));
}
