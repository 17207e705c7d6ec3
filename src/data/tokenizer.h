// Character-level tokenizer over UTF-8 code points, saved with every run as vocab.json.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace poslab {

// Splits UTF-8 into code points; throws ConfigError naming `source` and the byte offset of
// the first invalid sequence (poslab refuses such files rather than guessing a replacement).
std::vector<std::string> split_utf8(const std::string& text, const std::string& source);

class CharTokenizer {
 public:
  CharTokenizer() = default;
  explicit CharTokenizer(std::vector<std::string> symbols);
  static CharTokenizer from_text(const std::string& text, const std::string& source);
  static CharTokenizer from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;

  int64_t size() const { return static_cast<int64_t>(symbols_.size()); }
  bool contains(const std::string& symbol) const { return index_.count(symbol) > 0; }
  int64_t id(const std::string& symbol) const;
  // Throws ConfigError naming the first character outside the vocabulary.
  std::vector<int64_t> encode(const std::string& text, const std::string& source = "input") const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::vector<std::string> symbols_;
  std::unordered_map<std::string, int64_t> index_;
};

}  // namespace poslab
