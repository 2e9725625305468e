// The only code that touches libsentencepiece. Debian's libsentencepiece.so.0 carries its own copy of
// protobuf-lite and exports those symbols; linked into a program that also loads libtorch's libprotobuf, the
// two interpose each other and the process crashes in protobuf's static initialisers before main. So this
// file is built as a separate module (libdaei_spm_shim.so) that tokenizer_spm.cpp opens with
// dlopen(RTLD_LOCAL | RTLD_DEEPBIND): sentencepiece then binds to its own protobuf and nothing else sees it.
// DEEPBIND has one known trap: the program holds copy-relocated std::cout/cerr/clog that libstdc++ constructed,
// while code in this group binds to libstdc++'s own, never-constructed instances (sentencepiece's logging
// crashed on them). daei_spm_init constructs those instances over the program's stream buffers.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <iostream>
#include <new>
#include <string>
#include <vector>

extern "C" {

void daei_spm_init(std::ostream* prog_cout, std::ostream* prog_cerr, std::ostream* prog_clog) {
  static bool done = false;
  if (done) return;
  done = true;
  if (&std::cout != prog_cout) new (&std::cout) std::ostream(prog_cout->rdbuf());
  if (&std::cerr != prog_cerr) {
    new (&std::cerr) std::ostream(prog_cerr->rdbuf());
    std::cerr.setf(std::ios_base::unitbuf);
  }
  if (&std::clog != prog_clog) new (&std::clog) std::ostream(prog_clog->rdbuf());
}

void* daei_spm_load(const std::string* path, std::string* err) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  auto st = sp->Load(*path);
  if (!st.ok()) {
    *err = st.ToString();
    delete sp;
    return nullptr;
  }
  return sp;
}

void daei_spm_delete(void* h) { delete static_cast<sentencepiece::SentencePieceProcessor*>(h); }

void daei_spm_info(void* h, int* pad, int* eos, int* unk, int* size) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(h);
  *pad = sp->pad_id();
  *eos = sp->eos_id();
  *unk = sp->unk_id();
  *size = sp->GetPieceSize();
}

bool daei_spm_encode(void* h, const std::string* text, std::vector<int>* out, std::string* err) {
  auto st = static_cast<sentencepiece::SentencePieceProcessor*>(h)->Encode(*text, out);
  if (!st.ok()) *err = st.ToString();
  return st.ok();
}

bool daei_spm_decode(void* h, const std::vector<int>* ids, std::string* out, std::string* err) {
  auto st = static_cast<sentencepiece::SentencePieceProcessor*>(h)->Decode(*ids, out);
  if (!st.ok()) *err = st.ToString();
  return st.ok();
}

bool daei_spm_train(const std::string* args, std::string* err) {
  auto st = sentencepiece::SentencePieceTrainer::Train(*args);
  if (!st.ok()) *err = st.ToString();
  return st.ok();
}

}  // extern "C"
