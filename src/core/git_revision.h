// The commit this binary was built from (+ "-dirty"), written at build time. Only src/core/git_revision.cpp sees
// the generated git_rev.h, so a new commit recompiles that one small file, not every file that prints the revision.
#pragma once

namespace daei {
const char* git_revision();
}  // namespace daei
