// Named tensors of checkpoints: model.safetensors through src/core/safetensors (Hugging Face's format, readable from
// Python), and the parameters and buffers of several modules saved together under name prefixes.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <torch/types.h>

namespace torch::nn {
class Module;
}

namespace daei {

using NamedTensors = std::map<std::string, at::Tensor>;

void save_tensors(const std::string& path, const NamedTensors& tensors);
NamedTensors load_tensors(const std::string& path);

// Modules saved together under name prefixes ("" for a single module, "dae." and "inverter." in stage 3).
using ModuleList = std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>;
// Every parameter and buffer by prefixed dotted name (detached; shares storage).
NamedTensors module_tensors(const ModuleList& modules);
// Copies tensors into the modules by name; every module tensor must be present with the same shape.
void load_module_tensors(const ModuleList& modules, const NamedTensors& tensors, const std::string& source);

}  // namespace daei
