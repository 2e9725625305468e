// safetensors reader/writer: round trip of every dtype, metadata, and one error per malformed-header kind; the one
// loader of module weights: a module, modules under prefixes (checkpoints), and a module's folder (the DAE's).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors.h"
#include "core/safetensors_header.h"
#include "model/attack/dae.h"

namespace {

std::string tmpdir() {
  auto d = std::filesystem::temp_directory_path() / ("daei_st_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

// A file from a header JSON text and a data area.
std::string raw_file(const std::string& header, const std::string& data) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

// Expects parse to fail with a message containing every fragment.
void expect_error(const std::string& bytes, std::vector<std::string> fragments) {
  try {
    daei::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "bad.safetensors");
    ADD_FAILURE() << "no error for " << fragments.front();
  } catch (const daei::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

}  // namespace

TEST(Safetensors, RoundTripEveryDtype) {
  torch::manual_seed(1);
  daei::TensorMap in;
  in["f32"] = torch::randn({3, 4});
  in["f16"] = torch::randn({5}).to(torch::kHalf);
  in["bf16"] = torch::randn({2, 3}).to(torch::kBFloat16);
  in["f64"] = torch::randn({2, 2, 2}, torch::kDouble);
  in["i64"] = torch::randint(-1000000, 1000000, {7}, torch::kLong);
  in["i32"] = torch::randint(-1000, 1000, {3, 1}, torch::kInt);
  in["i16"] = torch::randint(-1000, 1000, {4}, torch::kShort);
  in["i8"] = torch::randint(-100, 100, {6}, torch::kChar);
  in["u8"] = torch::randint(0, 255, {6}, torch::kByte);
  in["bool"] = torch::randint(0, 2, {9}).to(torch::kBool);
  in["scalar"] = torch::tensor(3.5f).reshape({});
  in["empty"] = torch::zeros({0, 4});
  in["noncontig"] = torch::randn({4, 3}).t();
  const std::string path = tmpdir() + "/all.safetensors";
  daei::save_safetensors(path, in, {{"format", "pt"}, {"note", "daei"}});
  auto f = daei::read_safetensors(path);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("note"), "daei");
  ASSERT_EQ(f.tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    const auto& r = f.tensors.at(name);
    EXPECT_EQ(r.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(r.sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(r, t)) << name;
  }
  // Header is 8-aligned and JSON; the file does not keep a temporary sibling around.
  auto bytes = daei::read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_FALSE(std::filesystem::exists(daei::temp_sibling(path)));
}

TEST(Safetensors, MalformedHeaders) {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\0');
  expect_error("", {"shorter than the 8-byte"});
  expect_error(std::string("\x05\x00\x00", 3), {"shorter than the 8-byte"});
  {  // header length past the file
    std::string b = raw_file("{" + ok_entry + "}", data8);
    b[0] = static_cast<char>(0xff);
    b[1] = 0x10;
    expect_error(b, {"runs past the end"});
  }
  {  // header length above the cap
    std::string b = raw_file("{}", "");
    b[0] = 0;
    b[4] = 0x01;  // 2^32
    expect_error(b, {"exceeds"});
  }
  expect_error(raw_file("{\"t\": [", data8), {"not valid JSON"});
  expect_error(raw_file("[1,2]", ""), {"not a JSON object"});
  expect_error(raw_file(R"({"t":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", "xx"), {"'t'", "dtype"});
  expect_error(raw_file(R"({"t":{"dtype":"Q99","shape":[2],"data_offsets":[0,8]}})", data8), {"'t'", "Q99"});
  expect_error(raw_file(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", data8), {"'t'", "missing dtype"});
  expect_error(raw_file(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", data8), {"'t'", "missing shape"});
  expect_error(raw_file(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8), {"'t'", "non-negative"});
  expect_error(raw_file(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", data8), {"'t'", "non-negative"});
  expect_error(raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data8), {"'t'", "[begin, end]"});
  expect_error(raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data8), {"'t'", "reversed"});
  expect_error(raw_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8),
               {"'t'", "12 bytes", "8 bytes"});
  expect_error(raw_file(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8), {"'t'", "run past"});
  expect_error(raw_file(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})",
                        data8),
               {"'t'", "overflows"});
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        std::string(12, '\0')),
               {"overlaps", "'a'", "'b'"});
  expect_error(raw_file(R"({"__metadata__":{"k":3}})", ""), {"__metadata__"});
  expect_error(raw_file(R"({"t":5})", ""), {"'t'", "not an object"});
}

TEST(Safetensors, ReadsFilesAndNamesThem) {
  const std::string dir = tmpdir();
  EXPECT_THROW(daei::read_safetensors(dir + "/missing.safetensors"), daei::Error);
  daei::write_file_atomic(dir + "/empty.safetensors", "");
  try {
    daei::read_safetensors(dir + "/empty.safetensors");
    ADD_FAILURE();
  } catch (const daei::Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty.safetensors"), std::string::npos);
  }
  // Truncating a valid file anywhere gives an error, never a crash.
  daei::TensorMap in{{"a", torch::arange(10, torch::kFloat)}, {"b", torch::ones({3}, torch::kLong)}};
  const std::string full = daei::serialize_safetensors(in);
  for (size_t cut = 0; cut < full.size(); ++cut) {
    const std::string part = full.substr(0, cut);
    EXPECT_THROW(daei::parse_safetensors(reinterpret_cast<const uint8_t*>(part.data()), part.size(), "cut"),
                 daei::Error)
        << cut;
  }
}

TEST(Safetensors, LoadModuleStateChecksNamesAndShapes) {
  torch::nn::Linear lin(3, 2);
  auto st = daei::module_state(*lin);
  ASSERT_EQ(st.size(), 2u);
  daei::TensorMap w{{"weight", torch::ones({2, 3})}, {"bias", torch::zeros({2}, torch::kDouble)}};
  daei::load_module_state(*lin, w, "w.safetensors");
  EXPECT_TRUE(torch::equal(lin->weight, torch::ones({2, 3})));
  daei::TensorMap bad{{"weight", torch::ones({3, 2})}, {"bias", torch::zeros({2})}};
  EXPECT_THROW(daei::load_module_state(*lin, bad, "w.safetensors"), daei::Error);
  daei::TensorMap missing{{"weight", torch::ones({2, 3})}};
  EXPECT_THROW(daei::load_module_state(*lin, missing, "w.safetensors"), daei::Error);
  auto rep = daei::load_module_state(*lin, missing, "w.safetensors", /*strict=*/false);
  EXPECT_EQ(rep.missing, std::vector<std::string>{"bias"});
}

// Modules saved together under prefixes (a Trainer checkpoint): names carry the prefix, and loading refuses a
// missing tensor, a wrong shape and a tensor no module has.
TEST(Safetensors, ModuleListStateIsPrefixedAndStrict) {
  torch::nn::Linear a(3, 2), b(2, 4);
  const daei::ModuleList modules{{"a.", a.ptr()}, {"b.", b.ptr()}};
  const auto st = daei::module_state(modules);
  EXPECT_EQ(st.size(), 4u);
  for (const char* n : {"a.weight", "a.bias", "b.weight", "b.bias"}) EXPECT_TRUE(st.count(n)) << n;
  // The file bytes are those of the tensors by prefixed name, whatever the module.
  daei::TensorMap expected;
  for (const auto& [k, v] : daei::module_state(*a)) expected["a." + k] = v;
  for (const auto& [k, v] : daei::module_state(*b)) expected["b." + k] = v;
  EXPECT_EQ(daei::serialize_safetensors(st), daei::serialize_safetensors(expected));

  torch::nn::Linear a2(3, 2), b2(2, 4);
  const daei::ModuleList fresh{{"a.", a2.ptr()}, {"b.", b2.ptr()}};
  daei::load_module_state(fresh, st, "ckpt");
  EXPECT_TRUE(torch::equal(a2->weight, a->weight));
  EXPECT_TRUE(torch::equal(b2->bias, b->bias));

  auto expect_error = [&](daei::TensorMap t, const std::string& fragment) {
    try {
      daei::load_module_state(fresh, t, "ckpt");
      ADD_FAILURE() << fragment;
    } catch (const daei::Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  auto missing = st;
  missing.erase("b.bias");
  expect_error(missing, "ckpt: no tensor 'b.bias'");
  auto extra = st;
  extra["c.weight"] = torch::ones({1});
  expect_error(extra, "ckpt: unexpected tensor 'c.weight' (not in the model)");
  auto reshaped = st;
  reshaped["a.weight"] = torch::ones({2, 2});
  expect_error(reshaped, "ckpt: tensor 'a.weight' has shape");
}

// The DAE's folder, saved and loaded through src/model: the same options, σ₀, and every parameter and buffer.
TEST(ModuleFolder, DaeRoundTripKeepsEveryTensor) {
  const std::string dir = tmpdir() + "/dae";
  daei::DaeOptions o;
  o.dim = 8;
  o.hidden = 16;
  o.depth = 2;
  daei::Dae dae(o);
  {
    torch::NoGradGuard ng;  // no zero tensors (output_proj starts at zero), and moved power-iteration buffers
    for (auto& p : dae->parameters()) p.copy_(torch::randn(p.sizes()));
    for (auto& b : dae->buffers()) b.copy_(torch::randn(b.sizes()));
  }
  dae->set_sigma0(0.05);
  dae->save(dir);
  // dae.json: the DaeOptions fields and σ₀, sorted, indented by 2 (later stages and Python read it).
  EXPECT_EQ(daei::read_file(dir + "/dae.json"),
            "{\n  \"depth\": 2,\n  \"dim\": 8,\n  \"dropout\": 0.1,\n  \"hidden\": 16,\n  \"power_iterations\": 1,\n"
            "  \"sigma0\": 0.05,\n  \"sigma_cond\": true,\n  \"spectral_norm\": true\n}\n");
  // model.safetensors: the module's PyTorch names, no metadata.
  EXPECT_EQ(daei::read_file(dir + "/model.safetensors"), daei::serialize_safetensors(daei::module_state(*dae)));

  daei::Dae back = daei::Dae::load(dir);
  EXPECT_EQ(back->sigma0(), 0.05);
  EXPECT_FALSE(back->is_training());
  EXPECT_EQ(back->options().hidden, 16);
  EXPECT_EQ(back->options().depth, 2);
  const auto want = daei::module_state(*dae), got = daei::module_state(*back);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(want.size(), dae->parameters().size() + dae->buffers().size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(torch::equal(got.at(name), t)) << name;
  }
  EXPECT_EQ(daei::load_safetensors(dir + "/model.safetensors").size(), want.size());

  EXPECT_EQ(daei::Dae::load_for(dir, 0.05)->sigma0(), 0.05);
  EXPECT_THROW(daei::Dae::load_for(dir, 0.1), daei::Error);
  daei::write_file_atomic(dir + "/dae.json", "{\"dim\": 8}");
  EXPECT_THROW(daei::Dae::load(dir), daei::Error);
}
