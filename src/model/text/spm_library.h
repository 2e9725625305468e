// Access to libsentencepiece through the dlopen-ed shim (see src/model/text/spm_shim/spm_shim.cpp for why it must not
// be linked into the process directly).
#pragma once
#include <string>
#include <vector>

namespace daei::spm {

class Processor {
 public:
  explicit Processor(const std::string& model_path);  // throws daei::Error naming the file
  ~Processor();
  Processor(const Processor&) = delete;
  Processor& operator=(const Processor&) = delete;
  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;
  std::string id_to_piece(int id) const;
  int vocab_size() const;

 private:
  void* handle_;
};

// Train a model: flags as for spm_train ("--input=... --model_prefix=... --vocab_size=...").
void train(const std::string& flags);

}  // namespace daei::spm
