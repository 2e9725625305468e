// A C shim around libsentencepiece, built as its own shared library and opened with dlopen(RTLD_LOCAL |
// RTLD_DEEPBIND) by src/model/text/spm_library.cpp — never linked into daei directly.
//
// Why: Debian's libsentencepiece.so.0 embeds protobuf-lite and exports its symbols, while libtorch loads the full
// libprotobuf.so.32. Linked into one process, libprotobuf's static initialisers bind to sentencepiece's copies and
// crash before main (seen here: SIGSEGV in ReflectionOps::FindInitializationErrors). Opened locally with deep
// binding, each library keeps its own protobuf.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <dlfcn.h>

#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <vector>

namespace {

// RTLD_DEEPBIND has one more trap: a program that uses std::cout/cerr/clog holds copy-relocated instances, which
// libstdc++ constructs, while code opened with deep binding (this shim and sentencepiece) binds to libstdc++'s
// own instances, which nobody constructs. sentencepiece logs to std::cerr (every Train call does), and crashed
// there (SIGSEGV in ostream::sentry). So on load, build those instances over the program's stream buffers.
__attribute__((constructor)) void adopt_program_streams() {
  // The main program's handle: its lookup starts at the executable, whatever our own (deep) binding is.
  void* main_program = dlopen(nullptr, RTLD_NOW);
  if (main_program == nullptr) return;
  auto adopt = [main_program](std::ostream& own, const char* symbol, bool unitbuf) {
    auto* prog = static_cast<std::ostream*>(dlsym(main_program, symbol));
    if (prog == nullptr || prog == &own) return;  // no copy relocation: the instance is shared and constructed
    new (&own) std::ostream(prog->rdbuf());
    if (unitbuf) own.setf(std::ios_base::unitbuf);
  };
  adopt(std::cout, "_ZSt4cout", false);
  adopt(std::cerr, "_ZSt4cerr", true);
  adopt(std::clog, "_ZSt4clog", false);
}

void set_err(char* err, int len, const std::string& msg) {
  if (err && len > 0) {
    std::strncpy(err, msg.c_str(), len - 1);
    err[len - 1] = '\0';
  }
}
}  // namespace

extern "C" {

void* daei_spm_load(const char* model_path, char* err, int errlen) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  auto st = sp->Load(model_path);
  if (!st.ok()) {
    set_err(err, errlen, st.ToString());
    delete sp;
    return nullptr;
  }
  return sp;
}

void daei_spm_free(void* h) { delete static_cast<sentencepiece::SentencePieceProcessor*>(h); }

int daei_spm_vocab_size(void* h) { return static_cast<sentencepiece::SentencePieceProcessor*>(h)->GetPieceSize(); }

// Writes up to cap ids; returns the number of ids (which may exceed cap: call again with a larger buffer).
int daei_spm_encode(void* h, const char* text, int* out, int cap) {
  std::vector<int> ids;
  if (!static_cast<sentencepiece::SentencePieceProcessor*>(h)->Encode(text, &ids).ok()) return -1;
  for (int i = 0; i < static_cast<int>(ids.size()) && i < cap; ++i) out[i] = ids[i];
  return static_cast<int>(ids.size());
}

// Returns the byte length of the decoded text (which may exceed cap).
int daei_spm_decode(void* h, const int* ids, int n, char* out, int cap) {
  std::string text;
  std::vector<int> v(ids, ids + n);
  if (!static_cast<sentencepiece::SentencePieceProcessor*>(h)->Decode(v, &text).ok()) return -1;
  if (cap > 0) {
    std::memcpy(out, text.data(), std::min<size_t>(text.size(), cap));
  }
  return static_cast<int>(text.size());
}

// Returns the text of piece `id` (as "IdToPiece"), length semantics as decode.
int daei_spm_id_to_piece(void* h, int id, char* out, int cap) {
  std::string p = static_cast<sentencepiece::SentencePieceProcessor*>(h)->IdToPiece(id);
  if (cap > 0) std::memcpy(out, p.data(), std::min<size_t>(p.size(), cap));
  return static_cast<int>(p.size());
}

// args: spm_train flags as one string, e.g. "--input=x.txt --model_prefix=m --vocab_size=4000".
int daei_spm_train(const char* args, char* err, int errlen) {
  auto st = sentencepiece::SentencePieceTrainer::Train(args);
  if (!st.ok()) {
    set_err(err, errlen, st.ToString());
    return 1;
  }
  return 0;
}

}  // extern "C"
