// The vocabulary beside a token file: poslab's meta.json (vocab_size, dtype, eot_id, tokenizer) or
// nanoGPT's meta.pkl (a pickled dict: vocab_size, itos, stoi), read without Python: a pickle
// reader for exactly that shape (protocols 2-5: dicts, strings, integers), refusing anything else.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace poslab {

struct TokenMeta {
  std::string source;            // the file it came from ("" = none found)
  int64_t vocab_size = 0;
  std::string dtype = "auto";    // meta.json: uint16|uint32
  int64_t eot_id = -1;           // meta.json: end-of-text id (-1: none)
  std::string tokenizer;         // meta.json: SentencePiece model, absolute (resolved beside meta.json)
  std::vector<std::string> itos;  // meta.pkl: id -> character, vocab_size entries
};

// Parses poslab's meta.json text; `path` names the file in errors and anchors a relative tokenizer.
TokenMeta parse_meta_json(const std::string& text, const std::string& path);
// Parses nanoGPT's meta.pkl bytes; throws ConfigError "<path>: ..." for any other shape.
TokenMeta parse_meta_pkl(const std::string& bytes, const std::string& path);
// meta.json, else meta.pkl, in `dir`; source "" when there is neither.
TokenMeta read_token_meta(const std::string& dir);

}  // namespace poslab
