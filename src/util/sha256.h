// SHA-256 (FIPS 180-4) of a byte string or a file, as lowercase hex: the content hash a run records
// for a plug-in, the same digest `sha256sum` prints.
#pragma once
#include <string>

namespace poslab {

std::string sha256_hex(const std::string& bytes);
// The file's digest; ConfigError naming `what` and the path when it cannot be read.
std::string sha256_file(const std::string& path, const std::string& what);

}  // namespace poslab
