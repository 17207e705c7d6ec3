// Character-level tokenizer over UTF-8 code points.
#include "data/tokenizer.h"

#include <set>

#include "config/config.h"

namespace poslab {

std::vector<std::string> split_utf8(const std::string& text, const std::string& source) {
  std::vector<std::string> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (!ok)
      throw ConfigError(source + ": invalid UTF-8 at byte " + std::to_string(i) +
                        " (the char-level tokenizer needs UTF-8 text; convert the file, e.g. with iconv)");
    out.push_back(text.substr(i, len));
    i += len;
  }
  return out;
}

CharTokenizer::CharTokenizer(std::vector<std::string> symbols) : symbols_(std::move(symbols)) {
  for (size_t i = 0; i < symbols_.size(); ++i) index_[symbols_[i]] = static_cast<int64_t>(i);
}

CharTokenizer CharTokenizer::from_text(const std::string& text, const std::string& source) {
  auto chars = split_utf8(text, source);
  std::set<std::string> unique(chars.begin(), chars.end());
  return CharTokenizer(std::vector<std::string>(unique.begin(), unique.end()));
}

CharTokenizer CharTokenizer::from_json(const nlohmann::json& j) {
  if (!j.is_array()) throw ConfigError("vocab.json: expected a list of characters");
  return CharTokenizer(j.get<std::vector<std::string>>());
}

nlohmann::json CharTokenizer::to_json() const { return symbols_; }

int64_t CharTokenizer::id(const std::string& symbol) const {
  auto it = index_.find(symbol);
  if (it == index_.end()) throw ConfigError("character '" + symbol + "' is not in the vocabulary");
  return it->second;
}

std::vector<int64_t> CharTokenizer::encode(const std::string& text, const std::string& source) const {
  std::vector<int64_t> ids;
  for (const auto& ch : split_utf8(text, source)) {
    auto it = index_.find(ch);
    if (it == index_.end())
      throw ConfigError(source + ": character '" + ch + "' is not in the run's vocabulary (" +
                        std::to_string(size()) + " characters)");
    ids.push_back(it->second);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (auto id : ids) out += (id >= 0 && id < size()) ? symbols_[id] : "?";
  return out;
}

}  // namespace poslab
