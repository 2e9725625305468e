#include "model/text/tokenizer_spm.h"

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "model/text/spm_library.h"
#include "model/text/token_batch.h"

namespace daei {

SpmTokenizer::SpmTokenizer(const std::string& path) : path_(path) {
  DAEI_CHECK(file_exists(path), "{}: no SentencePiece model", path);
  sp_ = std::make_unique<spm::Processor>(path);
  // T5's layout: pad 0, eos 1, unk 2 with sentencepiece's default piece names (t5-base's spiece.model has them).
  const std::string p0 = sp_->id_to_piece(0), p1 = sp_->id_to_piece(1), p2 = sp_->id_to_piece(2);
  DAEI_CHECK(sp_->vocab_size() > 3 && p0 == "<pad>" && p1 == "</s>" && p2 == "<unk>",
             "{}: SentencePiece ids 0/1/2 are '{}'/'{}'/'{}'; T5 needs <pad>/</s>/<unk> (train with --pad_id=0 "
             "--eos_id=1 --unk_id=2 --bos_id=-1)",
             path, p0, p1, p2);
}

SpmTokenizer::~SpmTokenizer() = default;
SpmTokenizer::SpmTokenizer(SpmTokenizer&&) noexcept = default;
SpmTokenizer& SpmTokenizer::operator=(SpmTokenizer&&) noexcept = default;

void SpmTokenizer::train(const std::string& corpus, int vocab_size, const std::string& prefix,
                         const std::string& extra) {
  DAEI_CHECK(file_exists(corpus), "{}: no corpus file to train SentencePiece on", corpus);
  DAEI_CHECK(vocab_size > 3, "sentencepiece: vocab_size {} too small", vocab_size);
  const std::string args = fmt::format(
      "{} --input={} --model_prefix={} --vocab_size={} --model_type=unigram --character_coverage=1.0 "
      "--pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1 --input_sentence_size=2000000 --shuffle_input_sentence=true "
      "--num_threads=2 --minloglevel=2",
      extra, corpus, prefix, vocab_size);  // the first occurrence of a flag wins, so extra_args come first
  LOG_INFO("[model] training SentencePiece: {}", args);
  spm::train(args);
}

int64_t SpmTokenizer::vocab_size() const { return sp_->vocab_size(); }

std::vector<int64_t> SpmTokenizer::encode(const std::string& text, int64_t max_len, bool add_eos) const {
  const std::vector<int> ids = sp_->encode(text);
  std::vector<int64_t> out(ids.begin(), ids.end());
  if (max_len > 0) {
    const int64_t room = add_eos ? max_len - 1 : max_len;
    DAEI_CHECK(room >= 0, "spm: max_len {} too small", max_len);
    if (static_cast<int64_t>(out.size()) > room) out.resize(room);
  }
  if (add_eos) out.push_back(eos_id());
  return out;
}

SpmTokenizer::Batch SpmTokenizer::encode_batch(const std::vector<std::string>& texts, int64_t max_len,
                                               bool pad_to_max) const {
  std::vector<std::vector<int64_t>> rows;
  for (const auto& t : texts) rows.push_back(encode(t, max_len));
  auto b = pad_token_rows(rows, pad_id(), pad_to_max ? max_len : 0);
  return {b.input_ids, b.attention_mask};
}

std::string SpmTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> keep;
  const int64_t n = vocab_size();
  for (int64_t id : ids)
    if (id != pad_id() && id != eos_id() && id != unk_id() && id >= 0 && id < n) keep.push_back(static_cast<int>(id));
  return sp_->decode(keep);
}

std::vector<std::string> SpmTokenizer::decode_batch(const torch::Tensor& ids) const {
  DAEI_CHECK(ids.dim() == 2, "spm: decode_batch needs (B, L) ids");
  auto c = ids.to(torch::kCPU, torch::kLong).contiguous();
  std::vector<std::string> out;
  for (int64_t i = 0; i < c.size(0); ++i) {
    const int64_t* p = c[i].data_ptr<int64_t>();
    out.push_back(decode(std::vector<int64_t>(p, p + c.size(1))));
  }
  return out;
}

}  // namespace daei
