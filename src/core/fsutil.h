// Small file-system helpers. Writes go to a temporary name in the same folder and are renamed into place,
// so a reader never sees a half-written file.
#pragma once
#include <string>

namespace daei {

void write_file_atomic(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);  // throws Error naming the file
bool file_exists(const std::string& path);
// A path read from an untrusted file that must stay under its folder: relative, no ".." component, no NUL byte.
bool stays_inside(const std::string& rel);
void make_dirs(const std::string& path);
// A unique temporary sibling of path: "<path>.tmp-<pid>".
std::string temp_sibling(const std::string& path);

}  // namespace daei
