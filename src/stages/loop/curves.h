// stageK/curves.png: every logged number of metrics.jsonl against the step, one panel each, drawn with gnuplot
// (Debian gnuplot-nox). Missing gnuplot is a warning, never an error: the numbers are in metrics.jsonl.
#pragma once
#include <string>

namespace daei {
// Returns the PNG path, or "" when nothing was drawn (the reason is logged).
std::string plot_curves(const std::string& stage_dir);
}  // namespace daei
