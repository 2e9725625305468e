// daei corpus build: real text in, corpus/{train,val,test,ood-*}.jsonl out (issue 4).
//
// Streaming: texts are normalised and filtered as they are read, then sorted externally (bounded memory, runs of
// corpus.sort_buffer_mb spilled to disk) by a seeded 64-bit key of their content. That order is the seeded
// shuffle, and exact duplicates end up adjacent, where the merge drops them. Memory therefore does not grow with
// the corpus. The splits take the shuffled stream in order: test, val, then train (capped by train_size and the
// total cap max_examples).
//
// corpus_sources.cpp reads and normalises the sources; corpus.cpp sorts, splits and writes.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace daei {

class Config;

struct CorpusStats {
  std::map<std::string, int64_t> read;           // texts read per source
  int64_t invalid_utf8 = 0, empty = 0, too_short = 0, too_long = 0, duplicates = 0;
  std::map<std::string, int64_t> split_rows;     // rows written per split
  double seconds = 0;
};

// Whitespace runs → one space, trimmed. Returns false (and leaves out untouched) for invalid UTF-8 (valid_utf8,
// core/utf8.h).
bool normalize_text(const std::string& in, std::string& out);
// Words of a normalised text: runs of non-space characters.
int64_t count_words(const std::string& s);

// The text sources. Each calls emit(text) for every raw text; errors name the file.
void read_wordnet(const std::string& dir, const std::function<void(std::string)>& emit);
// GCIDE (Debian dict-gcide: DIR/gcide.index and DIR/gcide.dict.dz): definitions, usage notes and quotations, one
// sentence each, with pronunciations, etymologies, bracketed labels and sources, sense numbers, subject labels and
// the quotations' attributions stripped; paragraphs GCIDE took from WordNet alone are left out (the wordnet source
// has them). A missing file, a damaged index or a damaged or truncated .dict.dz is one Error naming the file.
void read_gcide(const std::string& dir, const std::function<void(std::string)>& emit);
// The texts of one GCIDE entry (its dictd text: head line(s), then the body), as read_gcide emits them.
void gcide_entry_texts(const std::string& entry, const std::function<void(std::string)>& emit);
// Records separated by "%" lines; attribution lines ("-- Name", indented "--") stripped.
void read_fortunes(const std::string& dir, const std::function<void(std::string)>& emit);
// .jsonl (field), .tsv (column), anything else one text a line.
void read_user_file(const std::string& path, const std::string& field, int64_t column,
                    const std::function<void(std::string)>& emit);
// Splits running text into sentences (., ! or ? followed by space and an upper-case letter or a quote;
// common abbreviations such as Mr. and U.S. do not end a sentence).
std::vector<std::string> split_sentences(const std::string& text);

// corpus.synthesize_to (a scale benchmark on real words): the in-domain texts are cut into clauses (at ", ", "; ",
// ": "), and seeded recombinations of 2 or 3 clauses (within the length filter) are added until the in-domain
// total reaches the target; the external sort shuffles them in and drops duplicates. Each row's "source" is "synth".
void split_clauses(const std::string& text, std::vector<std::string>& out);
int64_t synthesize_clauses(const std::vector<std::string>& clauses, int64_t n, uint64_t seed, int64_t min_words,
                           int64_t max_words, int64_t max_chars, const std::function<void(std::string)>& emit);

// Builds every split into out_dir (each written to a temporary name and renamed). Throws Error naming the file
// for an unreadable source or when no usable text is left.
CorpusStats build_corpus(const Config& cfg, const std::string& out_dir);

// Streams a corpus .jsonl: fn(row, id, text) for each line; throws naming the file and line on bad JSON.
void for_each_corpus_row(const std::string& path,
                         const std::function<void(int64_t row, int64_t id, std::string text)>& fn);

}  // namespace daei
