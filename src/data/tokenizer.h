// The run's vocabulary, saved with every run as vocab.json: characters (UTF-8 code points) for
// text, nanoGPT's itos for its character-level token files, SentencePiece pieces (the model file
// kept in the run, applied by the separate poslab-tokenize executable), or bare ids.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace poslab {

// Splits UTF-8 into code points; throws ConfigError naming `source` and the byte offset of
// the first invalid sequence (poslab refuses such files rather than guessing a replacement).
std::vector<std::string> split_utf8(const std::string& text, const std::string& source);
// Bytes of the UTF-8 character at text[i], or 0 where none starts there (a bad or cut sequence, an overlong
// form, a surrogate half, past U+10FFFF).
size_t utf8_char_length(const std::string& text, size_t i);

class Tokenizer {
 public:
  Tokenizer() = default;
  // One symbol per id; `vocab_size` may exceed the symbols (ids past them decode as "?").
  explicit Tokenizer(std::vector<std::string> symbols, int64_t vocab_size = -1);
  static Tokenizer from_text(const std::string& text, const std::string& source);
  // Token files without a tokenizer: ids only (prompts are written as ids, "12 7 301").
  static Tokenizer ids(int64_t vocab_size);
  // A SentencePiece model file (absolute path) of `vocab_size` pieces.
  static Tokenizer sentencepiece(int64_t vocab_size, const std::string& model_path);
  // vocab.json: a list of characters, or {"vocab_size", "symbols"?, "sentencepiece"?}; a model
  // file named there is found in `run_dir`.
  static Tokenizer from_json(const nlohmann::json& j, const std::string& run_dir = "");
  // The SentencePiece model is written by its file name: the run keeps a copy beside vocab.json.
  nlohmann::json to_json() const;

  int64_t size() const { return vocab_size_; }
  bool is_sentencepiece() const { return !sp_model_.empty(); }
  const std::string& sentencepiece_model() const { return sp_model_; }
  // Whether decoding one token at a time gives the text (not for SentencePiece: pieces carry
  // their word boundaries and byte-fallback bytes that only make sense together).
  bool decodes_per_token() const { return sp_model_.empty(); }
  // No vocabulary but a size (token files without a sidecar): decode writes each id after a space.
  bool ids_only() const { return symbols_.empty() && sp_model_.empty(); }
  bool contains(const std::string& symbol) const { return index_.count(symbol) > 0; }
  int64_t id(const std::string& symbol) const;
  // Throws ConfigError naming the first character outside the vocabulary. Symbols of several characters
  // (nanoGPT's itos may hold words) are matched longest first.
  std::vector<int64_t> encode(const std::string& text, const std::string& source = "input") const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::vector<std::string> symbols_;
  std::unordered_map<std::string, int64_t> index_;
  size_t longest_ = 1;  // bytes of the longest symbol: above one character, text is matched longest first
  bool strings_ = false;  // some symbol is not one character (a meta.pkl whose itos holds words)
  int64_t vocab_size_ = 0;
  std::string sp_model_;
};

// Where two vocabularies of named symbols first differ, as vocab.json writes them: "id 3: \"a\" <label_a>, \"b\"
// <label_b>" (or a vocab.json key where the forms differ, "/vocab_size: ..."); "" when they are the same.
std::string vocabulary_difference(const Tokenizer& a, const Tokenizer& b, const std::string& label_a,
                                  const std::string& label_b);

// The name the character-level code grew up with.
using CharTokenizer = Tokenizer;

}  // namespace poslab
