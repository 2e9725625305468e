// safetensors reader and writer (https://github.com/huggingface/safetensors format), and the one loader of module
// weights: a torch::nn::Module's parameters by Hugging Face name, several modules saved together under name
// prefixes (checkpoints), and a module's folder (model.safetensors beside its JSON config).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <torch/types.h>

namespace torch::nn { class Module; }

namespace daei {

using TensorMap = std::map<std::string, torch::Tensor>;

struct SafetensorsFile {
  TensorMap tensors;                            // owned CPU tensors (copied out of the mapping)
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Memory-maps `path`, validates the header (see safetensors_header.h) and copies every tensor out.
SafetensorsFile read_safetensors(const std::string& path);
TensorMap load_safetensors(const std::string& path);
// Same, from bytes in memory; `name` stands for the file in error messages.
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& name);

// Serialises contiguous CPU copies of `tensors` (sorted by name), header padded to 8 bytes with spaces.
std::string serialize_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata = {});
// Writes to a temporary sibling and renames into place.
void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// A module's parameters and buffers by their dotted names (detached, shared storage).
TensorMap module_state(const torch::nn::Module& module, bool with_buffers = true);

struct LoadReport {
  std::vector<std::string> missing;     // module parameters without a tensor in the file
  std::vector<std::string> unexpected;  // tensors in the file the module does not have
};
// Copies tensors into the module's parameters/buffers by name (dtype converted, shape must match exactly).
// `rename` maps a file name to a module name, "" drops the tensor. With strict, missing or unexpected
// names are an error naming `source`.
LoadReport load_module_state(torch::nn::Module& module, const TensorMap& tensors, const std::string& source,
                             bool strict = true,
                             const std::function<std::string(const std::string&)>& rename = nullptr);

// Modules saved together under name prefixes ("" for a single module, "dae." and "inverter." in stage 3).
using ModuleList = std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>;
// Every parameter and buffer by prefixed dotted name (detached; shares storage).
TensorMap module_state(const ModuleList& modules);
// Copies tensors into the modules by prefixed name; every module tensor must be present with the same shape, and
// every tensor must belong to a module.
void load_module_state(const ModuleList& modules, const TensorMap& tensors, const std::string& source);

// A module's folder: dir/model.safetensors (module_state, with `metadata`) beside dir/`config_name`, whose text is
// `config_text` (Hugging Face's config.json, or daei's dae.json). Creates dir.
void save_module_folder(const std::string& dir, const torch::nn::Module& module, const std::string& config_name,
                        const std::string& config_text, const std::map<std::string, std::string>& metadata = {});
// dir/model.safetensors, refusing a folder without one ("{dir}: no model.safetensors" + `hint`).
std::string module_folder_weights(const std::string& dir, const std::string& hint = "");

}  // namespace daei
