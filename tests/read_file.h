// The whole content of a file, for tests that compare what a run wrote.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace runlens::testing {

// "" when the file cannot be read.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace runlens::testing
