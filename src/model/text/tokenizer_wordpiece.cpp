#include "model/text/tokenizer_wordpiece.h"

#include "core/utf8.h"
#include "model/text/unicode_classes.h"

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "model/text/token_batch.h"

namespace daei {
namespace {

struct CpMap {
  uint32_t cp;
  uint32_t to[4];
};

#include "model/text/unicode_tables.inc"

template <size_t N>
const CpMap* find_map(const CpMap (&m)[N], char32_t c) {
  auto it = std::lower_bound(std::begin(m), std::end(m), static_cast<uint32_t>(c),
                             [](const CpMap& x, uint32_t v) { return x.cp < v; });
  return it != std::end(m) && it->cp == c ? it : nullptr;
}

void append_map(std::u32string& out, const CpMap* m) {
  for (uint32_t v : m->to)
    if (v) out.push_back(static_cast<char32_t>(v));
}

// Hugging Face `tokenizers` BertNormalizer and BertPreTokenizer, through the tables read off that library
// (unicode_tables_gen.py).
bool is_bert_white(char32_t c) { return in_ranges(kBertWhite, c); }
bool is_punctuation(char32_t c) { return in_ranges(kBertPunct, c); }

// BertNormalizer: clean_text (drop NUL, U+FFFD and every "other" C* character but \t \n \r; whitespace -> ' '),
// handle_chinese_chars (spaces around CJK ideographs), then with lower-casing strip_accents (NFD, drop non-spacing
// marks) and lowercase character by character (every capital sigma becomes U+03C3: no final-sigma rule).
std::u32string bert_normalize(const std::u32string& s, bool lower) {
  std::u32string out;
  out.reserve(s.size());
  auto fold = [&](char32_t c) {
    if (!lower) {
      out.push_back(c);
    } else if (c >= 0xAC00 && c <= 0xD7A3) {  // Hangul syllable -> L V (T) jamo
      const uint32_t si = c - 0xAC00;
      out.push_back(0x1100 + si / (21 * 28));
      out.push_back(0x1161 + (si % (21 * 28)) / 28);
      if (si % 28) out.push_back(0x11A7 + si % 28);
    } else if (in_ranges(kBertDrop, c)) {
    } else if (const CpMap* m = find_map(kBertFold, c)) {
      append_map(out, m);
    } else {
      out.push_back(c);
    }
  };
  for (char32_t c : s) {
    if (in_ranges(kBertClean, c)) continue;
    if (is_bert_white(c)) {
      out.push_back(' ');
    } else if (in_ranges(kBertCjk, c)) {
      out.push_back(' ');
      fold(c);
      out.push_back(' ');
    } else {
      fold(c);
    }
  }
  return out;
}

// BertPreTokenizer: split on whitespace (dropped) and on punctuation (each mark its own word).
std::vector<std::u32string> bert_pre_tokenize(const std::u32string& s) {
  std::vector<std::u32string> out;
  std::u32string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(std::move(cur));
    cur.clear();
  };
  for (char32_t c : s) {
    if (is_bert_white(c)) {
      flush();
    } else if (is_punctuation(c)) {
      flush();
      out.push_back(std::u32string(1, c));
    } else {
      cur.push_back(c);
    }
  }
  flush();
  return out;
}

// UTF-8 <-> code points. Invalid bytes are dropped (Python's decode(errors="ignore")), as BERT reads text.
std::u32string utf8_to_u32(const std::string& s) { return decode_utf8(s, InvalidUtf8::kDrop); }

std::string u32_to_utf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

}  // namespace

bool is_python_space(char32_t c) { return in_ranges(kPySpace, c); }

WordPieceTokenizer::WordPieceTokenizer(const std::string& path, bool lower, int max_chars) {
  std::ifstream in(path);
  DAEI_CHECK(in.good(), "{}: cannot read the WordPiece vocabulary", path);
  std::vector<std::string> toks;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n' || line.back() == ' ')) line.pop_back();
    toks.push_back(line);
  }
  init(std::move(toks), lower, max_chars, path);
}

WordPieceTokenizer WordPieceTokenizer::from_tokens(const std::vector<std::string>& tokens, bool lower,
                                                   int max_chars) {
  WordPieceTokenizer t;
  t.init(tokens, lower, max_chars, "vocabulary");
  return t;
}

void WordPieceTokenizer::init(std::vector<std::string> tokens, bool lower, int max_chars, const std::string& src) {
  tokens_ = std::move(tokens);
  lower_ = lower;
  max_chars_ = max_chars;
  for (size_t i = 0; i < tokens_.size(); ++i) vocab_.emplace(tokens_[i], static_cast<int64_t>(i));  // first wins
  auto need = [&](const char* t) {
    auto it = vocab_.find(t);
    DAEI_CHECK(it != vocab_.end(), "{}: WordPiece vocabulary has no {} token", src, t);
    return it->second;
  };
  pad_ = need("[PAD]");
  unk_ = need("[UNK]");
  cls_ = need("[CLS]");
  sep_ = need("[SEP]");
  for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
    if (vocab_.count(t)) specials_.emplace_back(t);
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (const auto& t : bert_pre_tokenize(bert_normalize(utf8_to_u32(text), lower_))) out.push_back(u32_to_utf8(t));
  return out;
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  // The special tokens written in the text itself ("[SEP]", "[MASK]" ...) are cut out first and kept whole, as the
  // library's added tokens are (matched case-sensitively, before normalisation, leftmost then longest).
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t at = text.find('['); at != std::string::npos; at = text.find('[', at + 1)) {
    const std::string* match = nullptr;
    for (const auto& sp : specials_)
      if (text.compare(at, sp.size(), sp) == 0 && (!match || sp.size() > match->size())) match = &sp;
    if (!match || at < from) continue;
    tokenize_plain(text.substr(from, at - from), out);
    out.push_back(*match);
    from = at + match->size();
  }
  tokenize_plain(text.substr(from), out);
  return out;
}

void WordPieceTokenizer::tokenize_plain(const std::string& text, std::vector<std::string>& out) const {
  for (const auto& word : basic_tokenize(text)) {
    const std::u32string chars = utf8_to_u32(word);
    if (static_cast<int>(chars.size()) > max_chars_) {
      out.push_back("[UNK]");
      continue;
    }
    std::vector<std::string> subs;
    size_t start = 0;
    bool bad = false;
    while (start < chars.size()) {
      size_t end = chars.size();
      std::string cur;
      bool found = false;
      while (start < end) {
        std::string sub = u32_to_utf8(chars.substr(start, end - start));
        if (start > 0) sub = "##" + sub;
        if (vocab_.count(sub)) {
          cur = std::move(sub);
          found = true;
          break;
        }
        --end;
      }
      if (!found) {
        bad = true;
        break;
      }
      subs.push_back(std::move(cur));
      start = end;
    }
    if (bad)
      out.push_back("[UNK]");
    else
      out.insert(out.end(), subs.begin(), subs.end());
  }
}

int64_t WordPieceTokenizer::id(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? unk_ : it->second;
}

std::vector<int64_t> WordPieceTokenizer::tokens_to_ids(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> out;
  out.reserve(tokens.size());
  for (const auto& t : tokens) out.push_back(id(t));
  return out;
}

std::vector<int64_t> WordPieceTokenizer::encode(const std::string& text, int64_t max_len) const {
  DAEI_CHECK(max_len >= 2, "wordpiece: max_len {} leaves no room for [CLS] and [SEP]", max_len);
  auto pieces = tokens_to_ids(tokenize(text));
  if (static_cast<int64_t>(pieces.size()) > max_len - 2) pieces.resize(max_len - 2);
  std::vector<int64_t> out;
  out.reserve(pieces.size() + 2);
  out.push_back(cls_);
  out.insert(out.end(), pieces.begin(), pieces.end());
  out.push_back(sep_);
  return out;
}

WordPieceTokenizer::Batch WordPieceTokenizer::encode_batch(const std::vector<std::string>& texts, int64_t max_len,
                                                           bool pad_to_max) const {
  std::vector<std::vector<int64_t>> rows;
  for (const auto& t : texts) rows.push_back(encode(t, max_len));
  auto b = pad_token_rows(rows, pad_, pad_to_max ? max_len : 0);
  return {b.input_ids, b.attention_mask, torch::zeros_like(b.input_ids)};
}

}  // namespace daei
