// BERT WordPiece tokenizer from a vocab.txt, as sentence-transformers runs it: Hugging Face's fast tokenizer (the
// Rust `tokenizers` library's BertNormalizer + BertPreTokenizer + WordPiece, tests/fixtures/minilm/make_fixtures.sh
// pins the version). Normaliser: clean text (drop NUL, U+FFFD and every "other" C* character of the library's
// Unicode data: controls, format, unassigned, private use; whitespace -> space), spaces around CJK ideographs, and
// with do_lower_case: strip accents (NFD, then drop non-spacing marks) and lower-case character by character (every
// capital sigma becomes U+03C3; no final-sigma rule, unlike the original BERT tokenization.py). Pre-tokenizer: split
// on whitespace and isolate punctuation (ASCII 33-47, 58-64, 91-96, 123-126 and the library's P* characters). Then
// greedy longest-match-first "##" sub-words, [UNK] for a word longer than max_chars_per_word or with no match.
// Special tokens written in the text ("[CLS]", "[MASK]" ...) are cut out before all that and kept whole.
// Character classes: tables read off the library per code point (unicode_tables_gen.py), plus algorithmic Hangul
// decomposition; the NFD's canonical reordering of combining marks is not modelled.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>
#include <torch/types.h>

namespace daei {

class WordPieceTokenizer {
 public:
  // vocab.txt: one token a line, id = line number.
  explicit WordPieceTokenizer(const std::string& vocab_txt_path, bool do_lower_case = true,
                              int max_chars_per_word = 100);
  static WordPieceTokenizer from_tokens(const std::vector<std::string>& tokens, bool do_lower_case = true,
                                        int max_chars_per_word = 100);

  std::vector<std::string> basic_tokenize(const std::string& text) const;
  std::vector<std::string> tokenize(const std::string& text) const;  // word pieces
  std::vector<int64_t> tokens_to_ids(const std::vector<std::string>& tokens) const;
  // [CLS] pieces [SEP], pieces truncated so that the total is at most max_len (>= 2).
  std::vector<int64_t> encode(const std::string& text, int64_t max_len) const;

  struct Batch {
    torch::Tensor input_ids;       // (B, L) int64, padded with [PAD]
    torch::Tensor attention_mask;  // (B, L) int64 1/0
    torch::Tensor token_type_ids;  // (B, L) zeros
  };
  // L = longest row, or max_len when pad_to_max.
  Batch encode_batch(const std::vector<std::string>& texts, int64_t max_len, bool pad_to_max = false) const;

  int64_t id(const std::string& token) const;  // unk id when absent
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t pad_id() const { return pad_; }
  int64_t unk_id() const { return unk_; }
  int64_t cls_id() const { return cls_; }
  int64_t sep_id() const { return sep_; }

 private:
  WordPieceTokenizer() = default;
  void init(std::vector<std::string> tokens, bool lower, int max_chars, const std::string& source);
  void tokenize_plain(const std::string& text, std::vector<std::string>& out) const;  // no special tokens in text
  std::vector<std::string> tokens_;
  std::vector<std::string> specials_;  // BERT's special tokens the vocabulary has, kept whole where a text writes them
  std::unordered_map<std::string, int64_t> vocab_;
  bool lower_ = true;
  int max_chars_ = 100;
  int64_t pad_ = 0, unk_ = 0, cls_ = 0, sep_ = 0;
};

}  // namespace daei
