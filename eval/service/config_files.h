// The configuration files a `serve` flag names (--suites, --gates): a
// directory stands for its *.yaml and *.yml files, sorted by name; a file for
// itself.
#pragma once

#include <string>
#include <vector>

namespace runlens::eval::service {

// The files `paths` name, in order. A path that is neither a directory nor a
// file adds "PATH: no such WHAT file or directory" to `problems`.
std::vector<std::string> yaml_files(const std::vector<std::string>& paths, const std::string& what,
                                    std::vector<std::string>* problems);

}  // namespace runlens::eval::service
