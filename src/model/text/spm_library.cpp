#include "model/text/spm_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "build_info.h"
#include "core/error.h"

namespace daei::spm {
namespace {

struct Api {
  void* (*load)(const char*, char*, int);
  void (*free_)(void*);
  int (*vocab_size)(void*);
  int (*encode)(void*, const char*, int*, int);
  int (*decode)(void*, const int*, int, char*, int);
  int (*id_to_piece)(void*, int, char*, int);
  int (*train)(const char*, char*, int);
};

std::string shim_path() {
  if (const char* env = std::getenv("DAEI_SPM_SHIM")) return env;
  // Next to the running program (build/), else the build directory recorded at compile time.
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto p = exe.parent_path() / "libdaei_spm.so";
    if (std::filesystem::exists(p)) return p.string();
  }
  return std::string(DAEI_BUILD_DIR) + "/libdaei_spm.so";
}

const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string path = shim_path();
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib) DAEI_FAIL("cannot load the sentencepiece shim {}: {}", path, dlerror());
    auto sym = [&](const char* name) {
      void* s = dlsym(lib, name);
      if (!s) DAEI_FAIL("sentencepiece shim {} lacks {}", path, name);
      return s;
    };
    a.load = reinterpret_cast<decltype(a.load)>(sym("daei_spm_load"));
    a.free_ = reinterpret_cast<decltype(a.free_)>(sym("daei_spm_free"));
    a.vocab_size = reinterpret_cast<decltype(a.vocab_size)>(sym("daei_spm_vocab_size"));
    a.encode = reinterpret_cast<decltype(a.encode)>(sym("daei_spm_encode"));
    a.decode = reinterpret_cast<decltype(a.decode)>(sym("daei_spm_decode"));
    a.id_to_piece = reinterpret_cast<decltype(a.id_to_piece)>(sym("daei_spm_id_to_piece"));
    a.train = reinterpret_cast<decltype(a.train)>(sym("daei_spm_train"));
  });
  return a;
}

}  // namespace

Processor::Processor(const std::string& model_path) {
  char err[512] = {0};
  handle_ = api().load(model_path.c_str(), err, sizeof err);
  if (!handle_) DAEI_FAIL("{}: cannot load sentencepiece model: {}", model_path, err);
}

Processor::~Processor() {
  if (handle_) api().free_(handle_);
}

std::vector<int> Processor::encode(const std::string& text) const {
  std::vector<int> ids(text.size() + 8);
  int n = api().encode(handle_, text.c_str(), ids.data(), static_cast<int>(ids.size()));
  DAEI_CHECK(n >= 0, "sentencepiece could not encode a text of {} bytes", text.size());
  if (n > static_cast<int>(ids.size())) {
    ids.resize(n);
    n = api().encode(handle_, text.c_str(), ids.data(), n);
  }
  ids.resize(n);
  return ids;
}

std::string Processor::decode(const std::vector<int>& ids) const {
  std::string out(ids.size() * 16 + 16, '\0');
  int n = api().decode(handle_, ids.data(), static_cast<int>(ids.size()), out.data(), static_cast<int>(out.size()));
  DAEI_CHECK(n >= 0, "sentencepiece could not decode {} ids", ids.size());
  if (n > static_cast<int>(out.size())) {
    out.resize(n);
    n = api().decode(handle_, ids.data(), static_cast<int>(ids.size()), out.data(), n);
  }
  out.resize(n);
  return out;
}

std::string Processor::id_to_piece(int id) const {
  char buf[256];
  int n = api().id_to_piece(handle_, id, buf, sizeof buf);
  return std::string(buf, std::min<int>(n, sizeof buf));
}

int Processor::vocab_size() const { return api().vocab_size(handle_); }

void train(const std::string& flags) {
  char err[1024] = {0};
  if (api().train(flags.c_str(), err, sizeof err) != 0) DAEI_FAIL("sentencepiece training failed: {}", err);
}

}  // namespace daei::spm
