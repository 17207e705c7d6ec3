// Passkey documents (Mohtashami & Jaggi 2023): a key hidden at a depth in filler text and asked for
// at the end. The reference template is landmark-attention's `generate_prompt` word for word; the
// compact one keeps its parts (needle, filler, question) for models trained on short windows.
// Used by the passkey probe (probe/probe.h) and mixed into training (data.probes.passkey).
#pragma once
#include <string>
#include <vector>

#include "data/rng.h"
#include "data/tokenizer.h"

namespace poslab {

struct PasskeyTemplate {
  std::string name;
  std::string task;      // first line; empty: none
  std::string needle;    // "{k}" stands for the key wherever it appears
  std::string question;  // the prompt ends with it and one space; the key's digits follow
  std::string sep;       // between the parts (the reference joins its lines with "\n")
};

// epfml/landmark-attention llama/run_test.py, generate_prompt().
extern const PasskeyTemplate kReferenceTemplate;
// The same parts, short enough to leave most of a 64-token window to filler.
extern const PasskeyTemplate kCompactTemplate;
// The reference's filler: these five sentences, repeated, joined by single spaces.
extern const std::string kNoiseFiller;
extern const std::vector<std::string> kPasskeyTemplates;  // "auto", "reference", "compact"

// The template a run uses: "reference" or "compact" by name; "auto": the reference when its fixed parts
// take at most half the training window (block_size tokens), else the compact one.
const PasskeyTemplate& passkey_template(const std::string& name, int block_size, int digits);

// Filler: a stream of sentences as tokens, and where each sentence starts.
struct Haystack {
  std::vector<int64_t> ids;     // tokens
  std::vector<int64_t> starts;  // ascending indices into ids where a sentence starts
};
// The reference's noise sentences, repeated to at least `tokens` tokens (the reference always starts
// its filler at the stream's beginning, so every trial sees the same filler).
Haystack noise_haystack(const CharTokenizer& tok, int64_t tokens);
// Held-out text as filler: a sentence starts after ". ", "? ", "! " or a newline.
Haystack text_haystack(const CharTokenizer& tok, std::vector<int64_t> text);
// A sentence start from which `tokens` tokens of filler fit, drawn with `rng`; throws ConfigError naming
// `what` when the haystack holds fewer tokens.
int64_t draw_sentence_start(const Haystack& h, int64_t tokens, Rng& rng, const std::string& what);

struct PasskeyDoc {
  std::vector<int64_t> ids;  // the prompt followed by the key's digits
  int64_t key_start = 0;     // index in ids of the answer's first digit
  int64_t needle_start = -1; // index in ids of the needle's first token; -1 without a needle
  double depth = 0;          // filler tokens before the needle / filler tokens (the depth actually hit)
  std::string key;
};

// A random key of `digits` digits, the first not 0 (a 5-digit key is 10000..99999).
std::string random_key(int digits, Rng& rng);

// A document of exactly `length` + 1 tokens (the model reads `length`: prompt and key but its last
// digit), the needle at the sentence boundary nearest `depth` of the filler (0: first, 1: just before
// the question). The filler is `haystack` from token `offset` (a sentence start) on; without `needle` the filler fills its place.
// Throws ConfigError when the fixed parts leave no room for filler at this length.
PasskeyDoc make_passkey_doc(const CharTokenizer& tok, const PasskeyTemplate& t, const std::string& key, int64_t length,
                            double depth, const Haystack& haystack, int64_t offset, bool needle = true);
// A part of a document in the run's tokens; SentencePiece parts are encoded once per process and remembered.
std::vector<int64_t> encode_part(const CharTokenizer& tok, const std::string& text, const std::string& source);
// The key one token per digit; throws ConfigError when the tokenizer writes a digit as more than one token.
std::vector<int64_t> encode_key(const CharTokenizer& tok, const std::string& key);
// Tokens of the fixed parts (task line, needle, question, separators, key) at this key length.
int64_t passkey_fixed_tokens(const CharTokenizer& tok, const PasskeyTemplate& t, int digits);

}  // namespace poslab
