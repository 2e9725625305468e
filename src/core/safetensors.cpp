#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/safetensors_header.h"

namespace daei {
namespace {

torch::Dtype to_torch(const std::string& d) {
  if (d == "F32") return torch::kFloat32;
  if (d == "F16") return torch::kFloat16;
  if (d == "BF16") return torch::kBFloat16;
  if (d == "F64") return torch::kFloat64;
  if (d == "I64") return torch::kInt64;
  if (d == "I32") return torch::kInt32;
  if (d == "I16") return torch::kInt16;
  if (d == "I8") return torch::kInt8;
  if (d == "U8") return torch::kUInt8;
  if (d == "BOOL") return torch::kBool;
  DAEI_FAIL("unknown safetensors dtype '{}'", d);
}

std::string from_torch(torch::Dtype d, const std::string& name) {
  switch (d) {
    case torch::kFloat32: return "F32";
    case torch::kFloat16: return "F16";
    case torch::kBFloat16: return "BF16";
    case torch::kFloat64: return "F64";
    case torch::kInt64: return "I64";
    case torch::kInt32: return "I32";
    case torch::kInt16: return "I16";
    case torch::kInt8: return "I8";
    case torch::kUInt8: return "U8";
    case torch::kBool: return "BOOL";
    default: DAEI_FAIL("safetensors: tensor '{}' has dtype {} with no safetensors equivalent", name, c10::toString(d));
  }
}

struct Mapping {
  void* ptr = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (ptr != MAP_FAILED && size > 0) ::munmap(ptr, size);
  }
};

}  // namespace

SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& name) {
  SafetensorsHeader h = parse_safetensors_header(data, size, name);
  SafetensorsFile out;
  out.metadata = std::move(h.metadata);
  for (const auto& e : h.entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(to_torch(e.dtype)));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + h.data_start + e.begin, e.end - e.begin);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

SafetensorsFile read_safetensors(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DAEI_CHECK(fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    DAEI_FAIL("{}: cannot stat: {}", path, std::strerror(err));
  }
  Mapping m;
  m.size = static_cast<size_t>(st.st_size);
  if (m.size == 0) {
    ::close(fd);
    DAEI_FAIL("{}: not a safetensors file: the file is empty", path);
  }
  m.ptr = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  DAEI_CHECK(m.ptr != MAP_FAILED, "{}: cannot mmap: {}", path, std::strerror(err));
  return parse_safetensors(static_cast<const uint8_t*>(m.ptr), m.size, path);
}

TensorMap load_safetensors(const std::string& path) { return read_safetensors(path).tensors; }

std::string serialize_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::vector<torch::Tensor> cpu;
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    DAEI_CHECK(name != "__metadata__", "safetensors: a tensor may not be named __metadata__");
    auto c = t.detach().to(torch::kCPU).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    h[name] = {{"dtype", from_torch(c.scalar_type(), name)},
               {"shape", c.sizes().vec()},
               {"data_offsets", {off, off + nbytes}}};
    off += nbytes;
    cpu.push_back(std::move(c));
  }
  std::string header = h.dump();
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  std::string out;
  out.reserve(8 + header.size() + off);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += header;
  for (const auto& c : cpu) {
    out.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
  }
  return out;
}

void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

TensorMap module_state(const torch::nn::Module& module, bool with_buffers) {
  TensorMap out;
  for (const auto& p : module.named_parameters(true)) out[p.key()] = p.value().detach();
  if (with_buffers)
    for (const auto& b : module.named_buffers(true)) out[b.key()] = b.value().detach();
  return out;
}

LoadReport load_module_state(torch::nn::Module& module, const TensorMap& tensors, const std::string& source,
                             bool strict, const std::function<std::string(const std::string&)>& rename) {
  std::map<std::string, torch::Tensor> targets;
  for (const auto& p : module.named_parameters(true)) targets[p.key()] = p.value();
  for (const auto& b : module.named_buffers(true)) targets[b.key()] = b.value();
  LoadReport rep;
  std::map<std::string, bool> seen;
  torch::NoGradGuard ng;
  for (const auto& [fname, t] : tensors) {
    const std::string name = rename ? rename(fname) : fname;
    if (name.empty()) continue;
    auto it = targets.find(name);
    if (it == targets.end()) {
      rep.unexpected.push_back(fname);
      continue;
    }
    DAEI_CHECK(it->second.sizes() == t.sizes(), "{}: tensor '{}' has shape {} but the model's '{}' has shape {}",
               source, fname, fmt::format("{}", fmt::join(t.sizes(), "x")), name,
               fmt::format("{}", fmt::join(it->second.sizes(), "x")));
    it->second.copy_(t.to(it->second.dtype()));
    seen[name] = true;
  }
  for (const auto& [name, t] : targets)
    if (!seen.count(name)) rep.missing.push_back(name);
  if (strict) {
    DAEI_CHECK(rep.missing.empty(), "{}: {} model tensor(s) missing from the weights, first '{}'", source,
               rep.missing.size(), rep.missing.empty() ? "" : rep.missing.front());
    DAEI_CHECK(rep.unexpected.empty(), "{}: {} tensor(s) in the weights the model does not have, first '{}'", source,
               rep.unexpected.size(), rep.unexpected.empty() ? "" : rep.unexpected.front());
  }
  return rep;
}

TensorMap module_state(const ModuleList& modules) {
  TensorMap out;
  for (const auto& [prefix, m] : modules) {
    for (const auto& p : m->named_parameters(true)) out[prefix + p.key()] = p.value().detach();
    for (const auto& b : m->named_buffers(true)) out[prefix + b.key()] = b.value().detach();
  }
  return out;
}

void load_module_state(const ModuleList& modules, const TensorMap& tensors, const std::string& source) {
  torch::NoGradGuard no_grad;
  auto mine = module_state(modules);
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

void save_module_folder(const std::string& dir, const torch::nn::Module& module, const std::string& config_name,
                        const std::string& config_text, const std::map<std::string, std::string>& metadata) {
  make_dirs(dir);
  save_safetensors(dir + "/model.safetensors", module_state(module), metadata);
  write_file_atomic(dir + "/" + config_name, config_text);
}

std::string module_folder_weights(const std::string& dir, const std::string& hint) {
  const std::string w = dir + "/model.safetensors";
  DAEI_CHECK(file_exists(w), "{}: no model.safetensors{}", dir, hint);
  return w;
}

}  // namespace daei
