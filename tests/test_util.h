// Helpers shared by the tests: temporary directories and small config files.
#pragma once
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace poslab::testing {

// A fresh directory under the system temp dir, removed when the object goes away.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("poslab-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name, const std::string& content) const {
    auto p = path / name;
    std::ofstream(p) << content;
    return p.string();
  }
  std::string sub(const std::string& name) const { return (path / name).string(); }
};

}  // namespace poslab::testing
