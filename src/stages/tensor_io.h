// Named tensors on disk for checkpoints: a minimal safetensors writer/reader (8-byte little-endian header length,
// JSON header {name: {dtype, shape, data_offsets}}, raw little-endian data), enough for model.safetensors files that
// Python's safetensors reads. Kept behind this small interface so it can switch to src/core/safetensors (models
// branch) once that lands on main.
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
