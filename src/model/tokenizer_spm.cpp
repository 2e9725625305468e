#include "model/tokenizer_spm.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "model/token_batch.h"

namespace daei {
namespace {

// libsentencepiece lives behind libdaei_spm_shim.so (see spm_shim.cpp for why).
struct SpmShim {
  void* (*load)(const std::string*, std::string*) = nullptr;
  void (*destroy)(void*) = nullptr;
  void (*info)(void*, int*, int*, int*, int*) = nullptr;
  bool (*encode)(void*, const std::string*, std::vector<int>*, std::string*) = nullptr;
  bool (*decode)(void*, const std::vector<int>*, std::string*, std::string*) = nullptr;
  bool (*train)(const std::string*, std::string*) = nullptr;
};

std::string exe_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

const SpmShim& shim() {
  static SpmShim s;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> tried;
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("DAEI_SPM_SHIM")) candidates.push_back(env);
#ifdef DAEI_SPM_SHIM_PATH
    candidates.push_back(DAEI_SPM_SHIM_PATH);
#endif
    candidates.push_back(exe_dir() + "/libdaei_spm_shim.so");
    candidates.push_back(exe_dir() + "/../lib/libdaei_spm_shim.so");
    candidates.push_back("libdaei_spm_shim.so");
    void* h = nullptr;
    std::string errs;
    for (const auto& c : candidates) {
      h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (h) break;
      const char* e = ::dlerror();
      errs += fmt::format("\n  {}: {}", c, e ? e : "?");
    }
    DAEI_CHECK(h, "sentencepiece: cannot load libdaei_spm_shim.so (set DAEI_SPM_SHIM to its path):{}", errs);
    auto sym = [&](const char* name) {
      void* p = ::dlsym(h, name);
      DAEI_CHECK(p, "sentencepiece: libdaei_spm_shim.so lacks {}", name);
      return p;
    };
    auto init = reinterpret_cast<void (*)(std::ostream*, std::ostream*, std::ostream*)>(sym("daei_spm_init"));
    init(&std::cout, &std::cerr, &std::clog);
    s.load = reinterpret_cast<decltype(s.load)>(sym("daei_spm_load"));
    s.destroy = reinterpret_cast<decltype(s.destroy)>(sym("daei_spm_delete"));
    s.info = reinterpret_cast<decltype(s.info)>(sym("daei_spm_info"));
    s.encode = reinterpret_cast<decltype(s.encode)>(sym("daei_spm_encode"));
    s.decode = reinterpret_cast<decltype(s.decode)>(sym("daei_spm_decode"));
    s.train = reinterpret_cast<decltype(s.train)>(sym("daei_spm_train"));
  });
  return s;
}

}  // namespace

struct SpmHandle {
  void* h = nullptr;
  int pad = -1, eos = -1, unk = -1, size = 0;
  ~SpmHandle() {
    if (h) shim().destroy(h);
  }
};

SpmTokenizer::SpmTokenizer(const std::string& path) : sp_(std::make_unique<SpmHandle>()), path_(path) {
  DAEI_CHECK(file_exists(path), "{}: no SentencePiece model", path);
  std::string err;
  sp_->h = shim().load(&path, &err);
  DAEI_CHECK(sp_->h, "{}: cannot load SentencePiece model: {}", path, err);
  shim().info(sp_->h, &sp_->pad, &sp_->eos, &sp_->unk, &sp_->size);
  DAEI_CHECK(sp_->pad == 0 && sp_->eos == 1 && sp_->unk == 2,
             "{}: SentencePiece ids pad {} eos {} unk {}; T5 needs pad 0, eos 1, unk 2 (train with --pad_id=0 "
             "--eos_id=1 --unk_id=2 --bos_id=-1)",
             path, sp_->pad, sp_->eos, sp_->unk);
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
  std::string err;
  DAEI_CHECK(shim().train(&args, &err), "{}: SentencePiece training failed: {}", corpus, err);
}

int64_t SpmTokenizer::vocab_size() const { return sp_->size; }

std::vector<int64_t> SpmTokenizer::encode(const std::string& text, int64_t max_len, bool add_eos) const {
  std::vector<int> ids;
  std::string err;
  DAEI_CHECK(shim().encode(sp_->h, &text, &ids, &err), "{}: encode failed: {}", path_, err);
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
  std::string out, err;
  DAEI_CHECK(shim().decode(sp_->h, &keep, &out, &err), "{}: decode failed: {}", path_, err);
  return out;
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
