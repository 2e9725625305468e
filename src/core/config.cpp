#include "core/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/fsutil.h"

namespace daei {
namespace {

enum class Kind { Null, Bool, Int, Float, String, Seq, Map };

Kind kind_of(const YAML::Node& n) {
  if (!n || n.IsNull()) return Kind::Null;
  if (n.IsSequence()) return Kind::Seq;
  if (n.IsMap()) return Kind::Map;
  if (n.Tag() == "!") return Kind::String;  // quoted scalar
  const std::string s = n.Scalar();
  std::string low = s;
  std::transform(low.begin(), low.end(), low.begin(), ::tolower);
  if (low == "true" || low == "false") return Kind::Bool;
  char* end = nullptr;
  errno = 0;
  (void)std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && *end == '\0' && errno == 0) return Kind::Int;
  (void)std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == '\0') return Kind::Float;
  return Kind::String;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Null: return "null";
    case Kind::Bool: return "a boolean";
    case Kind::Int: return "an integer";
    case Kind::Float: return "a number";
    case Kind::String: return "a string";
    case Kind::Seq: return "a list";
    case Kind::Map: return "a mapping";
  }
  return "?";
}

// May a value of kind `got` replace a default of kind `want`?
bool compatible(Kind want, Kind got) {
  if (want == Kind::Null || want == got) return true;
  if (want == Kind::Float && got == Kind::Int) return true;
  if (want == Kind::String && (got == Kind::Int || got == Kind::Float || got == Kind::Bool)) return true;
  if (want == Kind::Seq && got == Kind::Null) return true;  // empty list
  return false;
}

std::string join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

std::string suggest(const YAML::Node& map, const std::string& prefix, const std::string& key) {
  std::string best;
  size_t best_d = 1000;
  for (auto it = map.begin(); it != map.end(); ++it) {
    auto k = it->first.as<std::string>();
    size_t d = edit_distance(k, key);
    if (d < best_d) best_d = d, best = k;
  }
  if (best.empty() || best_d > std::max<size_t>(3, key.size() / 2)) return "";
  return fmt::format(" (did you mean '{}'?)", join(prefix, best));
}

void merge_into(YAML::Node base, const YAML::Node& overlay, const std::string& prefix, const std::string& source) {
  for (auto it = overlay.begin(); it != overlay.end(); ++it) {
    const auto key = it->first.as<std::string>();
    const std::string path = join(prefix, key);
    if (!base[key]) {
      throw UsageError(fmt::format("{}: unknown config key '{}'{}", source, path, suggest(base, prefix, key)));
    }
    YAML::Node dst = base[key];
    const YAML::Node& src = it->second;
    Kind want = kind_of(dst), got = kind_of(src);
    if (want == Kind::Map) {
      if (got != Kind::Map)
        throw UsageError(fmt::format("{}: config key '{}' must be a mapping, got {}", source, path, kind_name(got)));
      merge_into(dst, src, path, source);
      continue;
    }
    if (!compatible(want, got))
      throw UsageError(fmt::format("{}: config key '{}' must be {}, got '{}'", source, path, kind_name(want),
                                   src.IsScalar() ? src.Scalar() : std::string(kind_name(got))));
    base[key] = YAML::Clone(src);
  }
}

YAML::Node lookup(const YAML::Node& root, const std::string& key) {
  // Walk with reset() (rebinding, not assignment through the reference), so no copy of the tree is needed.
  YAML::Node cur;
  cur.reset(root);
  std::stringstream ss(key);
  std::string part;
  while (std::getline(ss, part, '.')) {
    const YAML::Node& here = cur;  // const operator[]: a missing key is not inserted
    if (!here.IsMap() || !here[part]) return YAML::Node(YAML::NodeType::Undefined);
    YAML::Node next = here[part];
    cur.reset(next);
  }
  return cur;
}

void diff_into(const YAML::Node& a, const YAML::Node& b, const std::string& prefix, std::vector<std::string>& out) {
  if (a.IsMap() && b.IsMap()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto k = it->first.as<std::string>();
      diff_into(it->second, b[k], join(prefix, k), out);
    }
    for (auto it = b.begin(); it != b.end(); ++it) {
      auto k = it->first.as<std::string>();
      if (!a[k]) out.push_back(join(prefix, k));
    }
    return;
  }
  YAML::Emitter ea, eb;
  ea << a;
  eb << b;
  if (std::string(ea.c_str()) != std::string(eb.c_str())) out.push_back(prefix);
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// configs/defaults/*.yaml, concatenated at configure time.
static const char kDefaultsYaml[] =
#include "defaults_yaml.inc"
    ;

Config Config::defaults() { return Config(YAML::Load(kDefaultsYaml)); }

Config Config::load(const std::string& file, const std::vector<std::string>& sets) {
  Config c = defaults();
  if (!file.empty()) c.merge_file(file);
  for (const auto& s : sets) c.set(s);
  return c;
}

void Config::merge_file(const std::string& path) {
  YAML::Node overlay;
  try {
    overlay = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw UsageError(fmt::format("{}: cannot read config file", path));
  } catch (const YAML::Exception& e) {
    throw UsageError(fmt::format("{}: invalid YAML: {}", path, e.what()));
  }
  if (!overlay || overlay.IsNull()) return;
  if (!overlay.IsMap()) throw UsageError(fmt::format("{}: a config file must be a YAML mapping", path));
  merge_yaml(overlay, path);
}

void Config::merge_yaml(const YAML::Node& overlay, const std::string& source) {
  merge_into(root_, overlay, "", source);
}

void Config::set(const std::string& assignment, const std::string& source) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(fmt::format("{}: expected key=value, got '{}'", source, assignment));
  std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  YAML::Node val;
  try {
    val = YAML::Load(value);
  } catch (const YAML::Exception&) {
    val = YAML::Node(value);
  }
  // Build {a: {b: value}} and merge, so the same checks apply as for files. (yaml-cpp's Node::operator= assigns
  // through references, so the nesting is built innermost-first with fresh nodes.)
  std::vector<std::string> parts;
  std::stringstream ss(key);
  std::string part;
  while (std::getline(ss, part, '.')) parts.push_back(part);
  if (parts.empty() || key.back() == '.') throw UsageError(fmt::format("{}: malformed key '{}'", source, key));
  YAML::Node inner = val;
  for (size_t i = parts.size(); i-- > 0;) {
    if (parts[i].empty()) throw UsageError(fmt::format("{}: malformed key '{}'", source, key));
    YAML::Node wrap(YAML::NodeType::Map);
    wrap[parts[i]] = inner;
    inner.reset(wrap);
  }
  YAML::Node overlay = inner;
  merge_yaml(overlay, source + " " + key);
}

bool Config::has(const std::string& key) const { return lookup(root_, key).IsDefined(); }

YAML::Node Config::node(const std::string& key) const {
  auto n = lookup(root_, key);
  DAEI_ASSERT(n.IsDefined(), "config key '{}' is read by the code but has no default", key);
  return n;
}

std::string Config::str(const std::string& key) const {
  auto n = node(key);
  return n.IsNull() ? std::string() : n.as<std::string>();
}
int64_t Config::integer(const std::string& key) const {
  auto n = node(key);
  if (kind_of(n) != Kind::Int) throw UsageError(fmt::format("config key '{}' must be an integer", key));
  return n.as<int64_t>();
}
double Config::real(const std::string& key) const {
  auto n = node(key);
  auto k = kind_of(n);
  if (k != Kind::Int && k != Kind::Float) throw UsageError(fmt::format("config key '{}' must be a number", key));
  return n.as<double>();
}
bool Config::flag(const std::string& key) const {
  auto n = node(key);
  if (kind_of(n) != Kind::Bool) throw UsageError(fmt::format("config key '{}' must be true or false", key));
  return n.as<bool>();
}
std::vector<std::string> Config::strings(const std::string& key) const {
  auto n = node(key);
  std::vector<std::string> out;
  if (n.IsNull()) return out;
  if (!n.IsSequence()) throw UsageError(fmt::format("config key '{}' must be a list", key));
  for (const auto& x : n) out.push_back(x.as<std::string>());
  return out;
}
std::vector<double> Config::reals(const std::string& key) const {
  auto n = node(key);
  std::vector<double> out;
  if (n.IsNull()) return out;
  if (n.IsScalar()) return {real(key)};
  if (!n.IsSequence()) throw UsageError(fmt::format("config key '{}' must be a list of numbers", key));
  for (const auto& x : n) {
    auto k = kind_of(x);
    if (k != Kind::Int && k != Kind::Float)
      throw UsageError(fmt::format("config key '{}' must be a list of numbers", key));
    out.push_back(x.as<double>());
  }
  return out;
}

std::string Config::dump() const {
  YAML::Emitter e;
  e << root_;
  return std::string(e.c_str()) + "\n";
}

void Config::save(const std::string& path) const { write_file_atomic(path, dump()); }

std::vector<std::string> Config::diff(const Config& a, const Config& b) {
  std::vector<std::string> out;
  diff_into(a.root_, b.root_, "", out);
  return out;
}

}  // namespace daei
