// Whether a system's recoveries are text or a template: the shape columns of every results table.
//   distinct      the share of distinct recoveries (a constant system: 1/n; the truths themselves: 100 %)
//   top template  the share of recoveries holding the most common word 3-gram that their own truth lacks
//                 ("a person who", "in the United States" repeated over texts that say neither)
//   loops         the share with a word or a phrase of up to 8 words immediately repeated
//   artefacts     the share with a word followed by a case or spacing variant of itself ("The the", "thethe"):
//                 what a repetition penalty leaves when it bans the exact piece and the model takes its twin
// Words are runs of letters, digits and apostrophes (non-ASCII bytes count as letters), compared without case;
// punctuation only separates them. Torch-free.
#pragma once
#include <string>
#include <vector>

namespace daei {

// The words of a text as the shape rules read them: lower-cased runs of letters, digits, apostrophes and non-ASCII.
std::vector<std::string> shape_words(const std::string& text);

// One token (whitespace-separated) repeated `times` or more times in a row ("an an an an ...").
bool repeats_a_token(const std::string& text, int times);
// A loop: a word, or a phrase of up to `max_phrase` words, immediately repeated ("sudden sudden", "a b a b",
// "the cat. the cat", "one two three four five one two three four five").
bool has_short_loop(const std::string& text, int max_phrase = 8);
// A word immediately followed by a case variant of itself ("The the", "OF of": equal without case, not with it), or
// a word that is a piece of two or more letters written twice without a space ("thethe", "OfOf").
bool has_penalty_artefact(const std::string& text);

struct TextShape {
  double distinct = 0;      // share of distinct recoveries
  double top_template = 0;  // share of recoveries holding template_ngram
  std::string template_ngram;  // the most common 3-gram of words absent from the recovery's own truth ("" if none)
  double loops = 0;         // share with has_short_loop (≤ 8 words)
  double artefacts = 0;     // share with has_penalty_artefact
  double repeat4 = 0;       // share with a token repeated ≥ 4 times in a row
};
// Throws std::invalid_argument when the sizes differ.
TextShape text_shape(const std::vector<std::string>& recovered, const std::vector<std::string>& truths);

}  // namespace daei
