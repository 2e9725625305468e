// Precompiled header shared by every target (see src/CMakeLists.txt).
#pragma once
#include <torch/torch.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <memory>
