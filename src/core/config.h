// Layered YAML configuration: built-in defaults < --config FILE < --set a.b=value (repeatable).
// The defaults (configs/defaults/*.yaml, compiled in) define every key and its type: an unknown key or a value of
// the wrong type is a UsageError naming the key and where it came from, with the nearest known key suggested.
// Each key's allowed values are declared beside it in configs/defaults/*.yaml ("# range: [1, inf)", "# one of: a|b",
// "# format: name"; the syntax is documented at the top of configs/defaults/00-run.yaml) and checked by load().
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include <yaml-cpp/yaml.h>

namespace daei {

// One value rule parsed from a comment of the defaults (see configs/defaults/00-run.yaml).
struct ConfigRule {
  enum class Kind { Range, OneOf, Name } kind = Kind::Range;
  std::string key;                  // dotted path
  double lo = 0, hi = 0;            // Range
  bool lo_open = false, hi_open = false;
  std::vector<std::string> options; // OneOf
  std::string text;                 // as written, for messages: "range: [1, inf)"
};
// Parses the rules in a defaults text (throws Error naming the line on a malformed rule).
std::vector<ConfigRule> parse_config_rules(const std::string& defaults_text);

class Config {
 public:
  // The compiled-in defaults.
  static Config defaults();
  // Defaults, then FILE (if not empty), then each "a.b=value" of sets, in order.
  // Validates the result (validate()).
  static Config load(const std::string& file, const std::vector<std::string>& sets);
  // The rules of the compiled-in defaults.
  static const std::vector<ConfigRule>& rules();
  // Every key against its rule: throws UsageError naming the key, its value, the rule and where the value came from.
  void validate() const;
  explicit Config(YAML::Node root) : root_(std::move(root)) {}
  // A Config is a value: a copy holds a tree of its own (YAML::Clone), so `Config b = a; b.set(...)` leaves `a` as it
  // was (yaml-cpp's Node copies share one tree, and its operator= writes through into the tree it held). A move
  // takes the tree without copying it and leaves the source empty.
  Config(const Config& other);
  Config& operator=(const Config& other);
  Config(Config&& other) noexcept;
  Config& operator=(Config&& other) noexcept;
  ~Config() = default;

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
  std::map<std::string, std::string> origin_;  // dotted key -> the file or --set that last set it
};

// Edit distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace daei
