// Words of a text as the metrics count them, torch-free: the tokenisers the text metrics reproduce (eval/metrics.h
// names each reference) and the content words of content F1 — and of the bag-of-words inverter's vocabulary, which is
// why they live here and not in the evaluation library (the training stages do not link it).
#pragma once
#include <string>
#include <vector>

namespace daei::metrics {

std::vector<std::string> word_tokenize(const std::string& s);  // NLTK NLTKWordTokenizer (one sentence)
std::vector<std::string> tokenize_13a(const std::string& s);   // sacrebleu 13a, after BLEU's rstrip()
std::vector<std::string> rouge_tokenize(const std::string& s); // rouge-score default tokeniser, no stemmer

// An English stop word (stopwords.cpp: NLTK 3.8's list of 179 and word_tokenize's clitics); lower-case input.
bool is_stop_word(const std::string& lowercased_token);
// The distinct content words of s, sorted: word_tokenize tokens, ASCII letters lower-cased, without stop words and
// without tokens that hold no letter or digit.
std::vector<std::string> content_words(const std::string& s);
// The same in the text's order, repeats kept.
std::vector<std::string> content_tokens(const std::string& s);
// F1 of the two content-word sets. Both empty: 1 (nothing to recover, nothing invented); one empty: 0.
double content_f1(const std::string& hyp, const std::string& ref);
// |content(hyp) ∩ content(ref)| / |content(ref)|; a truth without content words: 1 when hyp has none, else 0.
double content_recall(const std::string& hyp, const std::string& ref);

}  // namespace daei::metrics
