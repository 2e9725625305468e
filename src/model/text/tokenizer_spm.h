// SentencePiece tokenizer for T5 (Debian libsentencepiece): pad 0, eos 1, unk 2, no bos, as in T5's spiece.model.
// libsentencepiece is reached through daei::spm (spm_library.h), which dlopens libdaei_spm.so.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

namespace daei {
namespace spm { class Processor; }

class SpmTokenizer {
 public:
  // Loads `<prefix>.model` (or any path); checks the T5 special ids.
  explicit SpmTokenizer(const std::string& model_path);
  ~SpmTokenizer();
  SpmTokenizer(SpmTokenizer&&) noexcept;
  SpmTokenizer& operator=(SpmTokenizer&&) noexcept;

  // Trains a unigram model on a text file (one sentence a line) into out_prefix.model / .vocab with T5's ids
  // (--pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1). extra_args: further "--key=value" trainer flags.
  static void train(const std::string& corpus_txt, int vocab_size, const std::string& out_prefix,
                    const std::string& extra_args = "");

  // Pieces, truncated to max_len - 1, then eos (HF T5Tokenizer with truncation). max_len <= 0: no limit.
  std::vector<int64_t> encode(const std::string& text, int64_t max_len, bool add_eos = true) const;
  struct Batch {
    torch::Tensor input_ids;       // (B, L) int64, padded with pad (0)
    torch::Tensor attention_mask;  // (B, L) int64 1/0
  };
  // L = longest row, or max_len when pad_to_max.
  Batch encode_batch(const std::vector<std::string>& texts, int64_t max_len, bool pad_to_max = false) const;
  // Skips pad, eos, unk and ids outside the SentencePiece vocabulary (T5's extra_ids), like HF
  // decode(skip_special_tokens=True).
  std::string decode(const std::vector<int64_t>& ids) const;
  std::vector<std::string> decode_batch(const torch::Tensor& ids) const;  // (B, L)

  int64_t vocab_size() const;  // number of pieces
  const std::string& path() const { return path_; }  // the model file it was loaded from
  int64_t pad_id() const { return 0; }
  int64_t eos_id() const { return 1; }
  int64_t unk_id() const { return 2; }

 private:
  std::unique_ptr<spm::Processor> sp_;
  std::string path_;
};

}  // namespace daei
