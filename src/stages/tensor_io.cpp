#include "stages/tensor_io.h"

#include <torch/torch.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"

namespace daei {
namespace {

const std::map<at::ScalarType, std::string>& dtype_names() {
  static const std::map<at::ScalarType, std::string> m{
      {at::kFloat, "F32"}, {at::kDouble, "F64"}, {at::kHalf, "F16"}, {at::kBFloat16, "BF16"},
      {at::kLong, "I64"},  {at::kInt, "I32"},    {at::kShort, "I16"}, {at::kChar, "I8"},
      {at::kByte, "U8"},   {at::kBool, "BOOL"}};
  return m;
}

}  // namespace

void save_tensors(const std::string& path, const NamedTensors& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<at::Tensor> data;
  int64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    auto it = dtype_names().find(c.scalar_type());
    DAEI_CHECK(it != dtype_names().end(), "{}: tensor '{}' has an unsupported dtype", path, name);
    const int64_t bytes = c.numel() * static_cast<int64_t>(c.element_size());
    header[name] = {{"dtype", it->second}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h.push_back(' ');
  std::string out(8, '\0');
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += h;
  out.reserve(out.size() + offset);
  for (const auto& c : data) out.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  write_file_atomic(path, out);
}

NamedTensors load_tensors(const std::string& path) {
  const std::string bytes = read_file(path);
  DAEI_CHECK(bytes.size() >= 8, "{}: not a safetensors file (too short)", path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  DAEI_CHECK(n <= bytes.size() - 8, "{}: header length {} exceeds the file", path, n);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, n));
  } catch (const std::exception& e) {
    DAEI_FAIL("{}: bad safetensors header: {}", path, e.what());
  }
  const size_t base = 8 + n;
  NamedTensors out;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    at::ScalarType dt = at::kFloat;
    bool found = false;
    for (const auto& [t, s] : dtype_names())
      if (s == v.at("dtype").get<std::string>()) dt = t, found = true;
    DAEI_CHECK(found, "{}: tensor '{}' has unsupported dtype {}", path, name, v.at("dtype").dump());
    auto shape = v.at("shape").get<std::vector<int64_t>>();
    auto off = v.at("data_offsets").get<std::vector<uint64_t>>();
    auto t = torch::empty(shape, torch::TensorOptions().dtype(dt));
    const uint64_t want = static_cast<uint64_t>(t.numel()) * t.element_size();
    DAEI_CHECK(off.size() == 2 && off[1] >= off[0] && off[1] - off[0] == want && base + off[1] <= bytes.size(),
               "{}: tensor '{}' has bad data offsets", path, name);
    if (want) std::memcpy(t.data_ptr(), bytes.data() + base + off[0], want);
    out.emplace(name, t);
  }
  return out;
}

NamedTensors module_tensors(const ModuleList& modules) {
  NamedTensors out;
  for (const auto& [prefix, m] : modules) {
    for (const auto& p : m->named_parameters(true)) out[prefix + p.key()] = p.value().detach();
    for (const auto& b : m->named_buffers(true)) out[prefix + b.key()] = b.value().detach();
  }
  return out;
}

void load_module_tensors(const ModuleList& modules, const NamedTensors& tensors, const std::string& source) {
  torch::NoGradGuard no_grad;
  auto mine = module_tensors(modules);
  for (auto& [name, t] : mine) {
    auto it = tensors.find(name);
    DAEI_CHECK(it != tensors.end(), "{}: no tensor '{}'", source, name);
    DAEI_CHECK(it->second.sizes() == t.sizes(), "{}: tensor '{}' has shape {}, the model wants {}", source, name,
               c10::str(it->second.sizes()), c10::str(t.sizes()));
    t.copy_(it->second);
  }
  for (const auto& [name, t] : tensors)
    DAEI_CHECK(mine.count(name), "{}: unexpected tensor '{}' (not in the model)", source, name);
}

}  // namespace daei
