// The legends and titles of the PNGs the pipeline draws read as written (issue 26 item 14): gnuplot's enhanced text
// turned "recall@10" into "recall0". The sigma_sweep.png script is drawn on gnuplot's text terminal (enhanced, as
// png is) and its legend read back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "eval/sweep.h"

namespace fs = std::filesystem;

TEST(Plots, SigmaSweepLegendKeepsTheAtSign) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  const fs::path d = fs::temp_directory_path() / ("daei-plots-" + std::to_string(::getpid()));
  fs::create_directories(d);
  const std::string dat = (d / "sweep.dat").string(), txt = (d / "sweep.txt").string();
  std::ofstream(dat) << "# sigma cos_noisy recall1 recall10 bleu token_f1 content_f1\n0.02 0.95 0.9 0.97 0.3 0.4 0.2\n"
                        "0.04 0.90 0.7 0.85 0.2 0.3 0.1\n0.06 0.80 0.5 0.70 0.1 0.2 0.05\n";
  std::string script = daei::sigma_sweep_gnuplot(dat, (d / "unused.png").string());
  ASSERT_EQ(script.rfind("set terminal png", 0), 0u) << script;
  // The same script on the text terminal: replace the terminal and output lines only.
  const size_t second_nl = script.find('\n', script.find('\n') + 1);
  script = "set terminal dumb size 200,50 enhanced\nset output '" + txt + "'\n" + script.substr(second_nl + 1);
  std::ofstream(d / "plot.gp") << script;
  ASSERT_EQ(std::system(("gnuplot '" + (d / "plot.gp").string() + "' 2>&1").c_str()), 0) << script;
  std::stringstream drawn;
  drawn << std::ifstream(txt).rdbuf();
  const std::string out = drawn.str();
  EXPECT_NE(out.find("recall@1 "), std::string::npos) << out;
  EXPECT_NE(out.find("recall@10"), std::string::npos) << out;
  EXPECT_NE(out.find("token F1"), std::string::npos) << out;
  EXPECT_NE(out.find("content F1"), std::string::npos) << out;
  EXPECT_NE(out.find("cos(noisy, clean)"), std::string::npos) << out;
  fs::remove_all(d);
}
