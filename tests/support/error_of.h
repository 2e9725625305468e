// What a call throws: the message of the daei::Error it raises, or "" when it returns. Shared by the tests that
// assert a refusal's wording (one line, naming the file or key).
#pragma once
#include <string>
#include "core/error.h"

namespace daei::test {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace daei::test
