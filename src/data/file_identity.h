// The data files a config's corpus reads, and each one's identity (size and a SHA-256 of its bytes, or of
// blocks spread over a large one): what a run records when it starts, so that --resume and eval can tell
// files changed since from the ones it trained on.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "config/config.h"

namespace poslab {

struct DataFile {
  std::string role;  // "train", "val" (token files) or "text" (a text read for both splits)
  std::string key;   // the config key that names it: data.dir, data.train_path, data.val_path, data.path
  std::string path;  // as the loader opens it
};

// The files `c`'s corpus reads (none for a task), as make_corpus resolves them.
std::vector<DataFile> data_files_read(const Config& c);

// Files up to this size are hashed whole; larger ones by kIdentityBlocks blocks of kIdentityBlockBytes, the
// i-th at byte floor(i * (size - kIdentityBlockBytes) / (kIdentityBlocks - 1)): a corpus larger than memory
// is identified by reading 16 MiB of it. A change inside no block (an edit of a few bytes) keeps their hash; the
// file's modification time, recorded beside it, tells such a file apart (or one only copied or touched).
constexpr int64_t kIdentityWholeBytes = int64_t{16} << 20;
constexpr int64_t kIdentityBlocks = 256;
constexpr int64_t kIdentityBlockBytes = int64_t{64} << 10;

// {"bytes": N, "sha256": hex, "hashed": "whole" | "blocks"} (+ "mtime_ns" for "blocks"); ConfigError naming `key`
// and the path when it cannot be read.
nlohmann::json file_identity(const std::string& path, const std::string& key);

}  // namespace poslab
