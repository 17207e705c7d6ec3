// A warning said once per process: compare probes every cell of a grid in one process, and the same
// finding about the documents (the same template, tokenizer and length) would otherwise print per cell.
#pragma once
#include <spdlog/spdlog.h>

#include <mutex>
#include <set>
#include <string>

namespace poslab {

// Prints `message` as a warning unless this process printed the same text before; returns whether it did.
inline bool warn_once(const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> said;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!said.insert(message).second) return false;
  }
  spdlog::warn("{}", message);
  return true;
}

}  // namespace poslab
