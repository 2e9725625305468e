// Content words (words.h): what is left of a text once function words and punctuation are gone, and the F1 and
// recall of content F1 (eval/metrics.h).
#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "model/text/words.h"

namespace daei::metrics {
namespace {

// NLTK 3.8 `nltk.corpus.stopwords.words("english")` (nltk_data's corpora/stopwords/english), all 179 words in
// its order, then the clitics that word_tokenize splits off contractions ("don't" -> "do" "n't"), which the list
// only holds glued to their word.
constexpr std::array<std::string_view, 186> kStopWords{
    "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "you're", "you've", "you'll", "you'd",
    "your", "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she", "she's", "her", "hers",
    "herself", "it", "it's", "its", "itself", "they", "them", "their", "theirs", "themselves", "what", "which",
    "who", "whom", "this", "that", "that'll", "these", "those", "am", "is", "are", "was", "were", "be", "been",
    "being", "have", "has", "had", "having", "do", "does", "did", "doing", "a", "an", "the", "and", "but", "if",
    "or", "because", "as", "until", "while", "of", "at", "by", "for", "with", "about", "against", "between",
    "into", "through", "during", "before", "after", "above", "below", "to", "from", "up", "down", "in", "out",
    "on", "off", "over", "under", "again", "further", "then", "once", "here", "there", "when", "where", "why",
    "how", "all", "any", "both", "each", "few", "more", "most", "other", "some", "such", "no", "nor", "not",
    "only", "own", "same", "so", "than", "too", "very", "s", "t", "can", "will", "just", "don", "don't",
    "should", "should've", "now", "d", "ll", "m", "o", "re", "ve", "y", "ain", "aren", "aren't", "couldn",
    "couldn't", "didn", "didn't", "doesn", "doesn't", "hadn", "hadn't", "hasn", "hasn't", "haven", "haven't",
    "isn", "isn't", "ma", "mightn", "mightn't", "mustn", "mustn't", "needn", "needn't", "shan", "shan't",
    "shouldn", "shouldn't", "wasn", "wasn't", "weren", "weren't", "won", "won't", "wouldn", "wouldn't",
    // clitics of word_tokenize
    "n't", "'s", "'re", "'ve", "'ll", "'d", "'m"};

const std::vector<std::string_view>& sorted_stop_words() {
  static const std::vector<std::string_view> sorted = [] {
    std::vector<std::string_view> v(kStopWords.begin(), kStopWords.end());
    std::sort(v.begin(), v.end());
    return v;
  }();
  return sorted;
}

bool has_letter_or_digit(const std::string& token) {
  // A byte >= 0x80 belongs to a non-ASCII character: counted as a letter (punctuation here is ASCII or a word).
  return std::any_of(token.begin(), token.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x80 || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
  });
}

}  // namespace

bool is_stop_word(const std::string& lowercased_token) {
  const auto& v = sorted_stop_words();
  return std::binary_search(v.begin(), v.end(), std::string_view(lowercased_token));
}

std::vector<std::string> content_tokens(const std::string& s) {
  std::vector<std::string> out;
  for (std::string t : word_tokenize(s)) {
    for (char& c : t)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (has_letter_or_digit(t) && !is_stop_word(t)) out.push_back(std::move(t));
  }
  return out;
}

std::vector<std::string> content_words(const std::string& s) {
  std::vector<std::string> out = content_tokens(s);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {
// F1 of two sorted sets; both empty scores 1, one empty 0.
double set_f1(const std::vector<std::string>& hyp, const std::vector<std::string>& ref) {
  if (hyp.empty() && ref.empty()) return 1.0;
  if (hyp.empty() || ref.empty()) return 0.0;
  std::vector<std::string> both;
  std::set_intersection(hyp.begin(), hyp.end(), ref.begin(), ref.end(), std::back_inserter(both));
  return 2.0 * static_cast<double>(both.size()) / static_cast<double>(hyp.size() + ref.size());
}

}  // namespace

double content_f1(const std::string& hyp, const std::string& ref) {
  return set_f1(content_words(hyp), content_words(ref));
}

double content_recall(const std::string& hyp, const std::string& ref) {
  const auto h = content_words(hyp), r = content_words(ref);
  if (r.empty()) return h.empty() ? 1.0 : 0.0;
  std::vector<std::string> both;
  std::set_intersection(h.begin(), h.end(), r.begin(), r.end(), std::back_inserter(both));
  return static_cast<double>(both.size()) / static_cast<double>(r.size());
}


}  // namespace daei::metrics
