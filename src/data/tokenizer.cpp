// The run's vocabulary: character-level over UTF-8 code points, nanoGPT's itos, bare ids, or a
// SentencePiece model applied through poslab-tokenize (data/sentencepiece.h).
#include "data/tokenizer.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "config/config.h"
#include "data/sentencepiece.h"
#include "util/utf8.h"

namespace poslab {

size_t utf8_char_length(const std::string& text, size_t i) {
  return i < text.size() ? utf8_char_at(reinterpret_cast<const unsigned char*>(text.data()) + i, text.size() - i) : 0;
}

std::vector<std::string> split_utf8(const std::string& text, const std::string& source) {
  std::vector<std::string> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = utf8_char_length(text, i);
    if (len == 0)
      throw ConfigError(source + ": invalid UTF-8 at byte " + std::to_string(i) +
                        (source.rfind("--prompt", 0) == 0
                             ? std::string(" (a prompt must be UTF-8 text)")
                             : std::string(" (the char-level tokenizer needs UTF-8 text; convert the file, e.g. with iconv)")));
    out.push_back(text.substr(i, len));
    i += len;
  }
  return out;
}

Tokenizer::Tokenizer(std::vector<std::string> symbols, int64_t vocab_size) : symbols_(std::move(symbols)) {
  for (size_t i = 0; i < symbols_.size(); ++i) {
    const std::string& sym = symbols_[i];
    index_[sym] = static_cast<int64_t>(i);
    longest_ = std::max(longest_, sym.size());
    const unsigned char c = sym.empty() ? 0 : static_cast<unsigned char>(sym[0]);
    const size_t first = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (sym.size() != first) strings_ = true;
  }
  vocab_size_ = std::max<int64_t>(vocab_size, static_cast<int64_t>(symbols_.size()));
}

Tokenizer Tokenizer::from_text(const std::string& text, const std::string& source) {
  auto chars = split_utf8(text, source);
  std::set<std::string> unique(chars.begin(), chars.end());
  return Tokenizer(std::vector<std::string>(unique.begin(), unique.end()));
}

Tokenizer Tokenizer::ids(int64_t vocab_size) {
  Tokenizer t;
  t.vocab_size_ = vocab_size;
  return t;
}

Tokenizer Tokenizer::sentencepiece(int64_t vocab_size, const std::string& model_path) {
  Tokenizer t = ids(vocab_size);
  t.sp_model_ = model_path;
  return t;
}

Tokenizer Tokenizer::from_json(const nlohmann::json& j, const std::string& run_dir) {
  if (j.is_array()) {
    for (const auto& s : j)
      if (!s.is_string()) throw ConfigError("vocab.json: expected a list of characters");
    return Tokenizer(j.get<std::vector<std::string>>());
  }
  if (!j.is_object() || !j.contains("vocab_size") || !j["vocab_size"].is_number_integer() ||
      j["vocab_size"].get<int64_t>() <= 0)
    throw ConfigError("vocab.json: expected a list of characters or {\"vocab_size\": N, ...}");
  const int64_t n = j["vocab_size"].get<int64_t>();
  if (j.contains("sentencepiece")) {
    if (!j["sentencepiece"].is_string()) throw ConfigError("vocab.json: sentencepiece must name the model file");
    const std::string name = j["sentencepiece"].get<std::string>();
    return sentencepiece(n, run_dir.empty() ? name : run_dir + "/" + name);
  }
  if (j.contains("symbols")) {
    if (!j["symbols"].is_array()) throw ConfigError("vocab.json: symbols must be a list of strings");
    for (const auto& s : j["symbols"])
      if (!s.is_string()) throw ConfigError("vocab.json: symbols must be a list of strings");
    return Tokenizer(j["symbols"].get<std::vector<std::string>>(), n);
  }
  return ids(n);
}

std::string vocabulary_difference(const Tokenizer& a, const Tokenizer& b, const std::string& label_a,
                                  const std::string& label_b) {
  const nlohmann::json ja = a.to_json(), jb = b.to_json();
  if (ja == jb) return "";
  const nlohmann::json::json_pointer at(nlohmann::json::diff(ja, jb)[0]["path"].get<std::string>());
  const auto value = [&](const nlohmann::json& j) { return j.contains(at) ? j.at(at).dump() : std::string("nothing"); };
  const bool id = ja.is_array() && at.to_string().find('/', 1) == std::string::npos;
  return (id ? "id " + at.back() : at.to_string()) + ": " + value(ja) + " " + label_a + ", " + value(jb) + " " + label_b;
}

nlohmann::json Tokenizer::to_json() const {
  if (!sp_model_.empty()) return {{"vocab_size", vocab_size_}, {"sentencepiece", "tokenizer.model"}};
  if (symbols_.empty()) return {{"vocab_size", vocab_size_}};
  if (vocab_size_ == static_cast<int64_t>(symbols_.size())) return symbols_;  // the character-level form
  return {{"vocab_size", vocab_size_}, {"symbols", symbols_}};
}

int64_t Tokenizer::id(const std::string& symbol) const {
  auto it = index_.find(symbol);
  if (it == index_.end()) throw ConfigError("character '" + symbol + "' is not in the vocabulary");
  return it->second;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text, const std::string& source) const {
  if (!sp_model_.empty()) {
    auto ids = sentencepiece_encode(sp_model_, text, source);
    // A model of more pieces than the run's vocabulary (a meta.json whose vocab_size is below its tokenizer's)
    // writes ids the model has no row for.
    for (int64_t id : ids)
      if (id >= vocab_size_)
        throw ConfigError(source + ": SentencePiece gives id " + std::to_string(id) + ", past the run's vocabulary of " +
                          std::to_string(vocab_size_) + " (" + sp_model_ + " has more pieces than that vocabulary)");
    return ids;
  }
  std::vector<int64_t> ids;
  if (symbols_.empty()) {  // bare ids: the text is the ids
    std::stringstream ss(text);
    for (std::string item; ss >> item;) {
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || v < 0 || v >= vocab_size_)
        throw ConfigError(source + ": '" + item + "' is not a token id below " + std::to_string(vocab_size_) +
                          " (this run has no tokenizer: write the prompt as ids, e.g. \"" +
                          std::to_string(std::min<int64_t>(12, vocab_size_ - 1)) + " " +
                          std::to_string(std::min<int64_t>(7, vocab_size_ - 1)) + " " + std::to_string(vocab_size_ - 1) + "\")");
      ids.push_back(v);
    }
    return ids;
  }
  if (strings_) {  // the longest symbol that the text continues with, at each step
    split_utf8(text, source);  // UTF-8 is checked as for characters
    for (size_t i = 0; i < text.size();) {
      size_t len = std::min(longest_, text.size() - i);
      auto it = index_.end();
      for (; len > 0 && (it = index_.find(text.substr(i, len))) == index_.end(); --len) {
      }
      if (len == 0)
        throw ConfigError(source + ": the text from byte " + std::to_string(i) + " ('" + split_utf8(text.substr(i), source)[0] +
                          "...') starts with none of the run's " + std::to_string(symbols_.size()) + " vocabulary entries");
      ids.push_back(it->second);
      i += len;
    }
    return ids;
  }
  for (const auto& ch : split_utf8(text, source)) {
    auto it = index_.find(ch);
    if (it == index_.end())
      throw ConfigError(source + ": character '" + ch + "' is not in the run's vocabulary (" +
                        std::to_string(symbols_.size()) + " characters)");
    ids.push_back(it->second);
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  if (!sp_model_.empty()) return sentencepiece_decode(sp_model_, ids);
  std::string out;
  if (symbols_.empty()) {
    for (auto id : ids) out += " " + std::to_string(id);
    return out;
  }
  for (auto id : ids) out += (id >= 0 && id < static_cast<int64_t>(symbols_.size())) ? symbols_[id] : "?";
  return out;
}

}  // namespace poslab
