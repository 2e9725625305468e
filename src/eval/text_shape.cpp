#include "eval/text_shape.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace daei {

namespace {

// The words of a text with their case (letters, digits, apostrophes, non-ASCII bytes; anything else separates).
std::vector<std::string> cased_words(const std::string& text) {
  std::vector<std::string> w;
  std::string cur;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '\'' || c >= 0x80) {
      cur.push_back(static_cast<char>(c));
    } else if (!cur.empty()) {
      w.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) w.push_back(std::move(cur));
  return w;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<std::string> shape_words(const std::string& text) {
  auto w = cased_words(text);
  for (auto& x : w) x = lower(std::move(x));
  return w;
}

bool has_short_loop(const std::string& text, int max_phrase) {
  const auto w = shape_words(text);
  const int64_t n = static_cast<int64_t>(w.size());
  for (int64_t k = 1; k <= max_phrase; ++k)
    for (int64_t i = 0; i + 2 * k <= n; ++i)
      if (std::equal(w.begin() + i, w.begin() + i + k, w.begin() + i + k)) return true;
  return false;
}

bool repeats_a_token(const std::string& text, int times) {
  std::istringstream in(text);
  std::string prev, w;
  int run = 0;
  while (in >> w) {
    run = w == prev ? run + 1 : 1;
    if (run >= times) return true;
    prev = w;
  }
  return false;
}

namespace {

// "thethe", "OfOf": a word of two halves equal without case, each of at least two letters.
bool doubled_word(const std::string& w) {
  if (w.size() < 4 || w.size() % 2 != 0) return false;
  const std::size_t h = w.size() / 2;
  for (std::size_t i = 0; i < h; ++i) {
    const auto a = static_cast<unsigned char>(w[i]), b = static_cast<unsigned char>(w[h + i]);
    if (!std::isalpha(a) || std::tolower(a) != std::tolower(b)) return false;
  }
  return true;
}

}  // namespace

bool has_penalty_artefact(const std::string& text) {
  const auto w = cased_words(text);
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (doubled_word(w[i])) return true;
    if (i + 1 < w.size() && w[i] != w[i + 1] && lower(w[i]) == lower(w[i + 1])) return true;
  }
  return false;
}

TextShape text_shape(const std::vector<std::string>& recovered, const std::vector<std::string>& truths) {
  if (recovered.size() != truths.size())
    throw std::invalid_argument("text_shape: " + std::to_string(recovered.size()) + " recoveries for " +
                                std::to_string(truths.size()) + " truths");
  TextShape s;
  const std::size_t n = recovered.size();
  if (n == 0) return s;
  const auto share = [n](std::size_t k) { return static_cast<double>(k) / static_cast<double>(n); };
  s.distinct = share(std::set<std::string>(recovered.begin(), recovered.end()).size());
  std::map<std::string, std::size_t> held;  // 3-gram -> recoveries holding it while their truth lacks it
  std::size_t loops = 0, artefacts = 0, repeat4 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    loops += has_short_loop(recovered[i]) ? 1 : 0;
    artefacts += has_penalty_artefact(recovered[i]) ? 1 : 0;
    repeat4 += repeats_a_token(recovered[i], 4) ? 1 : 0;
    const auto w = shape_words(recovered[i]), t = shape_words(truths[i]);
    std::set<std::string> in_truth, in_recovery;
    for (std::size_t k = 0; k + 3 <= t.size(); ++k) in_truth.insert(t[k] + ' ' + t[k + 1] + ' ' + t[k + 2]);
    for (std::size_t k = 0; k + 3 <= w.size(); ++k) in_recovery.insert(w[k] + ' ' + w[k + 1] + ' ' + w[k + 2]);
    for (const auto& g : in_recovery)
      if (!in_truth.count(g)) ++held[g];
  }
  std::size_t best = 0;
  for (const auto& [g, k] : held)  // ties: the first in byte order, so the table is the same on every run
    if (k > best) best = k, s.template_ngram = g;
  s.top_template = share(best);
  s.loops = share(loops);
  s.artefacts = share(artefacts);
  s.repeat4 = share(repeat4);
  return s;
}

}  // namespace daei
