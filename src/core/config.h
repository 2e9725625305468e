// Layered YAML configuration: built-in defaults < --config FILE < --set a.b=value (repeatable).
// The defaults (configs/defaults/*.yaml, compiled in) define every key and its type: an unknown key or a value of
// the wrong type is a UsageError naming the key and where it came from, with the nearest known key suggested.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include <yaml-cpp/yaml.h>

namespace daei {

class Config {
 public:
  // The compiled-in defaults.
  static Config defaults();
  // Defaults, then FILE (if not empty), then each "a.b=value" of sets, in order.
  static Config load(const std::string& file, const std::vector<std::string>& sets);
  explicit Config(YAML::Node root) : root_(std::move(root)) {}

  void merge_file(const std::string& path);
  void merge_yaml(const YAML::Node& overlay, const std::string& source);
  // "a.b=value": value parsed as YAML (so lists and numbers work), checked against the default's type.
  void set(const std::string& assignment, const std::string& source = "--set");

  bool has(const std::string& key) const;
  YAML::Node node(const std::string& key) const;  // throws if absent
  std::string str(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  bool flag(const std::string& key) const;
  std::vector<std::string> strings(const std::string& key) const;
  std::vector<double> reals(const std::string& key) const;

  std::string dump() const;                      // resolved config as YAML text
  void save(const std::string& path) const;      // atomic write
  // Keys whose values differ between two configs (dotted paths), for the resume check.
  static std::vector<std::string> diff(const Config& a, const Config& b);
  const YAML::Node& root() const { return root_; }

 private:
  YAML::Node root_;
};

// Edit distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace daei
