#include "core/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
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
  // The whole scalar must be the number: a NUL inside it would end strtoll's view of it early (found by fuzzing).
  const char* const stop = s.c_str() + s.size();
  const long long decimal = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && end == stop && errno == 0) {
    // yaml-cpp reads a leading 0 as octal ("0888" fails to convert, "0777" is 511): an integer is a scalar yaml-cpp
    // reads as the same decimal number (found by fuzzing: `batch_size: 0888` passed validation, then crashed).
    int64_t read = 0;
    return YAML::convert<int64_t>::decode(n, read) && read == decimal ? Kind::Int : Kind::String;
  }
  (void)std::strtod(s.c_str(), &end);
  if (!s.empty() && end == stop) return Kind::Float;
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

void merge_into(YAML::Node base, const YAML::Node& overlay, const std::string& prefix, const std::string& source,
                std::map<std::string, std::string>& origin) {
  for (auto it = overlay.begin(); it != overlay.end(); ++it) {
    const auto key = it->first.as<std::string>();
    const std::string path = join(prefix, key);
    if (!base[key]) {
      throw UsageError(fmt::format("{}: unknown config key '{}'{}", source, path, suggest(base, prefix, key)));
    }
    YAML::Node dst = base[key];
    const YAML::Node src = it->second;  // a copy: it->second lives in a temporary proxy (ASan: use after scope)
    Kind want = kind_of(dst), got = kind_of(src);
    if (want == Kind::Map) {
      if (got != Kind::Map)
        throw UsageError(fmt::format("{}: config key '{}' must be a mapping, got {}", source, path, kind_name(got)));
      merge_into(dst, src, path, source, origin);
      continue;
    }
    if (!compatible(want, got))
      throw UsageError(fmt::format("{}: config key '{}' must be {}, got '{}'", source, path, kind_name(want),
                                   src.IsScalar() ? src.Scalar() : std::string(kind_name(got))));
    // The key keeps its declared kind: a real key given an integer stays real (else a later layer's 0.01 would be
    // refused as "must be an integer", which happened to a run's saved config.yaml), a string key given a number
    // stays a string.
    YAML::Node value = YAML::Clone(src);
    if (want == Kind::Float && got == Kind::Int) {
      value = YAML::Node(src.Scalar() + ".0");
    } else if (want == Kind::String && got != Kind::String) {
      value = YAML::Node(src.Scalar());
      value.SetTag("!");
    }
    base[key] = value;
    origin[path] = source;
  }
}

// yaml-cpp keeps both entries of a duplicated mapping key (and reads the first): refuse them.
void check_unique_keys(const YAML::Node& n, const std::string& prefix, const std::string& source, int depth = 0) {
  if (depth > 64) throw UsageError(fmt::format("{}: config nested deeper than 64 levels", source));
  if (n.IsMap()) {
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar())
        throw UsageError(fmt::format("{}: a key under '{}' is not a plain name", source, prefix.empty() ? "/" : prefix));
      const auto key = it->first.Scalar();
      if (!seen.insert(key).second)
        throw UsageError(fmt::format("{}: duplicate config key '{}'", source, join(prefix, key)));
      check_unique_keys(it->second, join(prefix, key), source, depth + 1);
    }
  } else if (n.IsSequence()) {
    for (const auto& x : n) check_unique_keys(x, prefix, source, depth + 1);
  }
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

double parse_bound(const std::string& s, int line) {
  const std::string t = trim(s);
  if (t == "inf" || t == "+inf") return std::numeric_limits<double>::infinity();
  if (t == "-inf") return -std::numeric_limits<double>::infinity();
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0') DAEI_FAIL("config defaults line {}: bad range bound '{}'", line, t);
  return v;
}

std::string fmt_num(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

std::string value_text(const YAML::Node& n) {
  if (!n || n.IsNull()) return "''";
  if (n.IsScalar()) return Kind::String == kind_of(n) ? "'" + n.Scalar() + "'" : n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
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

// Node::reset rebinds a handle; Node::operator= would instead redirect the tree the handle held (set_ref), changing
// every other handle into it.
Config::Config(const Config& other) : root_(YAML::Clone(other.root_)), origin_(other.origin_) {}

Config& Config::operator=(const Config& other) {
  if (this != &other) {
    root_.reset(YAML::Clone(other.root_));
    origin_ = other.origin_;
  }
  return *this;
}

Config::Config(Config&& other) noexcept : root_(other.root_), origin_(std::move(other.origin_)) {
  other.root_.reset(YAML::Node());
  other.origin_.clear();
}

Config& Config::operator=(Config&& other) noexcept {
  if (this != &other) {
    root_.reset(other.root_);
    origin_ = std::move(other.origin_);
    other.root_.reset(YAML::Node());
    other.origin_.clear();
  }
  return *this;
}

Config Config::load(const std::string& file, const std::vector<std::string>& sets) {
  Config c = defaults();
  if (!file.empty()) c.merge_file(file);
  for (const auto& s : sets) c.set(s);
  c.validate();
  return c;
}

std::vector<ConfigRule> parse_config_rules(const std::string& text) {
  std::vector<ConfigRule> rules;
  std::vector<std::pair<size_t, std::string>> stack;  // (indent, key)
  std::stringstream ss(text);
  std::string line;
  int lineno = 0;
  while (std::getline(ss, line)) {
    ++lineno;
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos || line[indent] == '#') continue;
    // key: value   # comment   (the defaults use plain keys; quotes may appear in values only)
    const size_t colon = line.find(':', indent);
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(indent, colon - indent));
    if (key.empty() || key.find_first_of("\"' -[{") != std::string::npos) continue;  // a list item or flow text
    while (!stack.empty() && stack.back().first >= indent) stack.pop_back();
    std::string path;
    for (auto& [i, k] : stack) path += k + ".";
    path += key;
    stack.emplace_back(indent, key);
    // The comment: the first '#' outside quotes after the colon.
    std::string comment;
    char quote = 0;
    for (size_t i = colon + 1; i < line.size(); ++i) {
      char ch = line[i];
      if (quote) {
        if (ch == quote) quote = 0;
      } else if (ch == '"' || ch == '\'') {
        quote = ch;
      } else if (ch == '#' && (i == colon + 1 || line[i - 1] == ' ')) {
        comment = line.substr(i + 1);
        break;
      }
    }
    // The rule is the last ';'-separated part of the comment (or the whole comment).
    std::string part = trim(comment.substr(comment.rfind(';') == std::string::npos ? 0 : comment.rfind(';') + 1));
    ConfigRule r;
    r.key = path;
    r.text = part;
    if (part.rfind("range:", 0) == 0) {
      std::string b = trim(part.substr(6));
      const size_t comma = b.find(',');
      if (b.size() < 5 || (b.front() != '[' && b.front() != '(') || (b.back() != ']' && b.back() != ')') ||
          comma == std::string::npos)
        DAEI_FAIL("config defaults line {} ({}): malformed rule '{}' (want range: [lo, hi])", lineno, path, part);
      r.kind = ConfigRule::Kind::Range;
      r.lo_open = b.front() == '(';
      r.hi_open = b.back() == ')';
      r.lo = parse_bound(b.substr(1, comma - 1), lineno);
      r.hi = parse_bound(b.substr(comma + 1, b.size() - comma - 2), lineno);
      if (!(r.lo <= r.hi)) DAEI_FAIL("config defaults line {} ({}): empty range '{}'", lineno, path, part);
    } else if (part.rfind("one of:", 0) == 0) {
      r.kind = ConfigRule::Kind::OneOf;
      std::stringstream os(trim(part.substr(7)));
      std::string opt;
      while (std::getline(os, opt, '|')) {
        opt = trim(opt);
        r.options.push_back(opt == "\"\"" ? std::string() : opt);
      }
      if (r.options.size() < 2) DAEI_FAIL("config defaults line {} ({}): 'one of' needs two options", lineno, path);
    } else if (part.rfind("format:", 0) == 0) {
      if (trim(part.substr(7)) != "name")
        DAEI_FAIL("config defaults line {} ({}): unknown format '{}' (known: name)", lineno, path, part);
      r.kind = ConfigRule::Kind::Name;
    } else {
      continue;
    }
    rules.push_back(std::move(r));
  }
  return rules;
}

const std::vector<ConfigRule>& Config::rules() {
  static const std::vector<ConfigRule> r = parse_config_rules(kDefaultsYaml);
  return r;
}

void Config::validate() const {
  for (const auto& r : rules()) {
    const YAML::Node n = lookup(root_, r.key);
    if (!n.IsDefined()) continue;
    auto it = origin_.find(r.key);
    const std::string from = it == origin_.end() ? "defaults" : it->second;
    auto fail = [&](const YAML::Node& v, const std::string& why) {
      throw UsageError(fmt::format("{}: config key '{}' = {} {}", from, r.key, value_text(v), why));
    };
    switch (r.kind) {
      case ConfigRule::Kind::Range: {
        auto check = [&](const YAML::Node& v) {
          const Kind k = kind_of(v);
          if (k != Kind::Int && k != Kind::Float) return;  // the type check is merge_into's
          const double x = std::strtod(v.Scalar().c_str(), nullptr);
          const bool ok = !std::isnan(x) && (r.lo_open ? x > r.lo : x >= r.lo) && (r.hi_open ? x < r.hi : x <= r.hi);
          if (!ok)
            fail(v, fmt::format("is out of range {}{}, {}{}", r.lo_open ? '(' : '[', fmt_num(r.lo), fmt_num(r.hi),
                                r.hi_open ? ')' : ']'));
        };
        if (n.IsSequence())
          for (const auto& x : n) check(x);
        else
          check(n);
        break;
      }
      case ConfigRule::Kind::OneOf: {
        if (!n.IsNull() && !n.IsScalar()) break;
        const std::string v = n.IsNull() ? std::string() : n.Scalar();
        if (std::find(r.options.begin(), r.options.end(), v) == r.options.end()) {
          std::string opts;
          for (auto& o : r.options) opts += (opts.empty() ? "" : ", ") + (o.empty() ? std::string("\"\"") : o);
          fail(n, "must be one of " + opts);
        }
        break;
      }
      case ConfigRule::Kind::Name: {
        const std::string v = n.IsScalar() ? n.Scalar() : std::string();
        if (v.empty() || v == "." || v == ".." || v.find('/') != std::string::npos ||
            v.find('\0') != std::string::npos)
          fail(n, "must be one path component (not empty, no '/', not '.' or '..')");
        break;
      }
    }
  }
}

// A file's `base: OTHER.yaml` (relative to the file's folder) is merged first, so a follow-up config such as
// sigma-sweep.yaml states only what it changes and cannot drift from the run it follows. `chain` holds the files
// that named this one, for the cycle check.
static void merge_file_chain(Config& config, const std::string& path, std::vector<std::string> chain) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(fmt::format("{}: is a directory, not a config file", path));
  const std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
  for (const auto& c : chain)
    if (c == canonical)
      throw UsageError(fmt::format("{}: base configs form a cycle: {} -> {}", chain.front(), fmt::join(chain, " -> "),
                                   canonical));
  chain.push_back(canonical);
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
  if (const YAML::Node base = overlay["base"]) {
    if (!base.IsScalar() || base.Scalar().empty())
      throw UsageError(fmt::format("{}: 'base' must name a config file (a path relative to this file)", path));
    if (chain.size() > 8) throw UsageError(fmt::format("{}: more than 8 nested base configs", path));
    const std::filesystem::path p(base.Scalar());
    const std::string base_path = p.is_absolute() ? p.string() : (std::filesystem::path(path).parent_path() / p).string();
    if (!std::filesystem::exists(base_path, ec))
      throw UsageError(fmt::format("{}: base config '{}' not found ({})", path, base.Scalar(), base_path));
    merge_file_chain(config, base_path, chain);
    overlay.remove("base");
  }
  config.merge_yaml(overlay, path);
}

void Config::merge_file(const std::string& path) { merge_file_chain(*this, path, {}); }

void Config::merge_yaml(const YAML::Node& overlay, const std::string& source) {
  check_unique_keys(overlay, "", source);
  merge_into(root_, overlay, "", source, origin_);
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
