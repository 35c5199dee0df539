// tests/temp_dir.h: a fresh directory under the system temp folder for one test, removed with the object.
// Named <tag>-<pid>-<n>, so that tests running in parallel processes (ctest -j) never share one.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace kimi::testutil {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "kimi-test") {
    path_ = std::filesystem::temp_directory_path() /
            (tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

}  // namespace kimi::testutil
