#include "stages/tensor_io.h"

#include <torch/torch.h>

#include "core/error.h"
#include "core/safetensors.h"

namespace daei {
void save_tensors(const std::string& path, const NamedTensors& tensors) { save_safetensors(path, tensors); }

NamedTensors load_tensors(const std::string& path) { return load_safetensors(path); }

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
