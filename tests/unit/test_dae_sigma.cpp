// The one rule for the σ the attack calls its DAE at (eval/systems.h DaeSigma), used by the systems, the DAE table,
// `eval --split FILE` and the sweep.
#include <gtest/gtest.h>

#include "eval/systems.h"

using daei::DaeSigma;
using daei::EvalSplit;

TEST(DaeSigma, TheSplitsSigmaUnlessAStudyAssumesOne) {
  EvalSplit cached, swept;
  cached.sigma = 0.04;  // a cache's manifest σ (the release's)
  swept.sigma = 0.06;   // a sweep point
  DaeSigma rule;        // stage1.sigma.assumed = 0: the split's own σ, whatever it is
  EXPECT_DOUBLE_EQ(rule(cached), 0.04);
  EXPECT_DOUBLE_EQ(rule(swept), 0.06);
  rule.assumed = 0.05;  // a sensitivity study: the attack believes σ = 0.05 everywhere
  EXPECT_DOUBLE_EQ(rule(cached), 0.05);
  EXPECT_DOUBLE_EQ(rule(swept), 0.05);
}
