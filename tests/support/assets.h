// A test that needs an installed asset (GloVe, WordNet) skips on a developer's machine without it, and fails in CI
// (CI=true), where launch/setup.sh must have installed it: a skip there would pass without checking anything.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace daei::test {
inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}
}  // namespace daei::test

#define DAEI_REQUIRE_ASSET(present, what)                                                        \
  do {                                                                                           \
    if (!(present)) {                                                                            \
      if (::daei::test::in_ci()) FAIL() << what << " is missing; in CI launch/setup.sh installs it"; \
      GTEST_SKIP() << what << " is missing (bash launch/setup.sh installs it)";                  \
    }                                                                                            \
  } while (0)
