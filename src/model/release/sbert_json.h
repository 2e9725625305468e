// The small JSON files of a sentence-transformers model directory (modules.json, 1_Pooling/config.json,
// sentence_bert_config.json, tokenizer_config.json, 2_Dense/config.json, config.json's model_type), read without
// libtorch so tests/fuzz/fuzz_model_json.cpp fuzzes them. A model directory is downloaded, so untrusted: every
// malformed file is a daei::Error naming it (not a JSON library exception), and module paths stay inside the folder.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace daei {

enum class SbertModuleKind { transformer, pooling, dense, normalize };
struct SbertModule {
  SbertModuleKind kind;
  std::string path;  // relative to the model directory, "" = the directory itself
};

// modules.json: the modules in order; at least one Pooling module.
std::vector<SbertModule> parse_sbert_modules(const std::string& text, const std::string& source);
// 1_Pooling/config.json: "mean" or "cls" (exactly one of the two modes true).
std::string parse_pooling_mode(const std::string& text, const std::string& source);
// sentence_bert_config.json: max_length capped by an integer max_seq_length (never below 2).
int64_t sbert_max_length(const std::string& text, const std::string& source, int64_t max_length);
// config.json's model_type, `fallback` without one.
std::string parse_model_type(const std::string& text, const std::string& source, const std::string& fallback);
// tokenizer_config.json's do_lower_case (true without one).
bool parse_do_lower_case(const std::string& text, const std::string& source);
// 2_Dense/config.json's activation: "tanh" or "identity".
std::string parse_dense_activation(const std::string& text, const std::string& source);

}  // namespace daei
