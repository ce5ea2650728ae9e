#include "eval/service/config_files.h"

#include <algorithm>
#include <filesystem>

namespace runlens::eval::service {

std::vector<std::string> yaml_files(const std::vector<std::string>& paths, const std::string& what,
                                    std::vector<std::string>* problems) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> here;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        if (e.path().extension() == ".yaml" || e.path().extension() == ".yml") here.push_back(e.path().string());
      }
      std::sort(here.begin(), here.end());
      files.insert(files.end(), here.begin(), here.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      problems->push_back(p + ": no such " + what + " file or directory");
    }
  }
  return files;
}

}  // namespace runlens::eval::service
