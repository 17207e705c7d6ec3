// Passkey documents: the reference strings, the filler streams, and the needle placed at a depth.
#include "probe/passkey.h"

#include <cmath>
#include <map>
#include <mutex>

#include "config/config.h"

namespace poslab {

const PasskeyTemplate kReferenceTemplate{
    "reference",
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you "
    "about the important information there.",
    "The pass key is {k}. Remember it. {k} is the pass key.", "What is the pass key? The pass key is", "\n"};
// Chosen to fit the main job's 64-token windows with short keys: 14 + 27 + 3 separators + the key.
const PasskeyTemplate kCompactTemplate{"compact", "", "The key is {k}.", "What is the key? The key is", " "};
const std::string kNoiseFiller = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
const std::vector<std::string> kPasskeyTemplates = {"auto", "reference", "compact"};

std::vector<int64_t> encode_part(const CharTokenizer& tok, const std::string& text, const std::string& source) {
  if (!tok.is_sentencepiece()) return tok.encode(text, source);
  // SentencePiece runs through poslab-tokenize, one process a call: the few distinct parts are encoded once.
  static std::map<std::pair<std::string, std::string>, std::vector<int64_t>> memo;
  static std::mutex mu;
  const auto k = std::make_pair(tok.sentencepiece_model(), text);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(k); it != memo.end()) return it->second;
  }
  auto ids = tok.encode(text, source);
  std::lock_guard<std::mutex> lock(mu);
  return memo.emplace(k, std::move(ids)).first->second;
}

std::vector<int64_t> encode_key(const CharTokenizer& tok, const std::string& key) {
  std::vector<int64_t> ids;
  for (char d : key) {
    const auto one = encode_part(tok, std::string(1, d), "the pass key");
    if (one.size() != 1)
      throw ConfigError("the run's tokenizer writes the digit '" + std::string(1, d) + "' as " + std::to_string(one.size()) +
                        " tokens; the passkey probe needs one token per digit");
    ids.push_back(one[0]);
  }
  return ids;
}

// The needle with the key in it: the text around each "{k}" encoded on its own, the key digit by digit
// (for characters the same as encoding the whole; for SentencePiece, the same pieces for every key).
static std::vector<int64_t> encode_needle(const CharTokenizer& tok, const std::string& needle, const std::string& key) {
  std::vector<int64_t> ids;
  const auto add = [&](const std::vector<int64_t>& part) { ids.insert(ids.end(), part.begin(), part.end()); };
  size_t from = 0;
  for (size_t at; (at = needle.find("{k}", from)) != std::string::npos; from = at + 3) {
    if (at > from) add(encode_part(tok, needle.substr(from, at - from), "the passkey template"));
    add(encode_key(tok, key));
  }
  if (from < needle.size()) add(encode_part(tok, needle.substr(from), "the passkey template"));
  return ids;
}

static int64_t count(const CharTokenizer& tok, const std::string& s) {
  return static_cast<int64_t>(encode_part(tok, s, "the passkey template").size());
}

int64_t passkey_fixed_tokens(const CharTokenizer& tok, const PasskeyTemplate& t, int digits) {
  const std::string key(static_cast<size_t>(digits), '1');
  const int64_t task = t.task.empty() ? 0 : count(tok, t.task) + count(tok, t.sep);
  return task + static_cast<int64_t>(encode_needle(tok, t.needle, key).size()) + 3 * count(tok, t.sep) +
         count(tok, t.question + " ") + digits;
}

const PasskeyTemplate& passkey_template(const std::string& name, int block_size, int digits) {
  if (name == "reference") return kReferenceTemplate;
  if (name == "compact") return kCompactTemplate;
  if (name != "auto") throw ConfigError("passkey template: unknown '" + name + "' (allowed: auto, reference, compact)");
  // Character counts, which are token counts for the char-level tokenizer and an upper bound otherwise.
  const auto fixed = kReferenceTemplate.task.size() + kReferenceTemplate.needle.size() + 2 * digits +
                     kReferenceTemplate.question.size() + 5;
  return static_cast<int64_t>(fixed) * 2 <= block_size ? kReferenceTemplate : kCompactTemplate;
}

std::string random_key(int digits, Rng& rng) {
  std::string key;
  for (int i = 0; i < digits; ++i) key.push_back(static_cast<char>('0' + (i == 0 && digits > 1 ? 1 + rng.below(9) : rng.below(10))));
  return key;
}

Haystack noise_haystack(const CharTokenizer& tok, int64_t tokens) {
  // The reference's stream is " ".join([garbage] * 2000): sentences separated by one space.
  std::vector<std::vector<int64_t>> sentences;
  for (size_t i = 0; i < kNoiseFiller.size();) {
    size_t end = kNoiseFiller.find(". ", i);
    end = end == std::string::npos ? kNoiseFiller.size() : end + 1;
    sentences.push_back(encode_part(tok, kNoiseFiller.substr(i, end - i) + " ", "the noise filler"));
    i = end + 1;
  }
  Haystack h;
  while (static_cast<int64_t>(h.ids.size()) < tokens)
    for (const auto& s : sentences) h.starts.push_back(static_cast<int64_t>(h.ids.size())), h.ids.insert(h.ids.end(), s.begin(), s.end());
  return h;
}

Haystack text_haystack(const CharTokenizer& tok, std::vector<int64_t> text) {
  auto id_of = [&](const char* s) { return tok.contains(s) ? tok.id(s) : int64_t{-1}; };
  const int64_t nl = id_of("\n"), space = id_of(" "), dot = id_of("."), q = id_of("?"), bang = id_of("!");
  Haystack h;
  h.ids = std::move(text);
  const auto& v = h.ids;
  for (size_t i = 0; i < v.size(); ++i) {
    const bool after_newline = i >= 1 && v[i - 1] == nl && v[i] != nl;
    const bool after_end = i >= 2 && v[i - 1] == space && (v[i - 2] == dot || v[i - 2] == q || v[i - 2] == bang);
    if (i == 0 || after_newline || after_end) h.starts.push_back(static_cast<int64_t>(i));
  }
  return h;
}

int64_t draw_sentence_start(const Haystack& h, int64_t tokens, Rng& rng, const std::string& what) {
  // The starts from which `tokens` fit form a prefix of the ascending list.
  int64_t n = 0;
  while (n < static_cast<int64_t>(h.starts.size()) && h.starts[n] + tokens <= static_cast<int64_t>(h.ids.size())) ++n;
  if (n == 0)
    throw ConfigError(what + ": " + std::to_string(h.ids.size()) + " tokens of filler, " + std::to_string(tokens) +
                      " needed at this length");
  return h.starts[rng.below(n)];
}

PasskeyDoc make_passkey_doc(const CharTokenizer& tok, const PasskeyTemplate& t, const std::string& key, int64_t length,
                            double depth, const Haystack& haystack, int64_t offset, bool needle) {
  const auto digits = static_cast<int>(key.size());
  const std::string source = "the passkey template";
  const auto sep = encode_part(tok, t.sep, source), needle_ids = encode_needle(tok, t.needle, key);
  const int64_t filler = length + 1 - passkey_fixed_tokens(tok, t, digits);
  if (filler < 1)
    throw ConfigError("passkey at " + std::to_string(length) + " tokens: the " + t.name + " template's fixed parts take " +
                      std::to_string(length + 1 - filler) + " tokens, leaving no room for filler");
  // Without a needle, filler takes its place, so the document keeps its length.
  const int64_t n = needle ? filler : filler + static_cast<int64_t>(needle_ids.size() + 2 * sep.size());
  if (offset + n > static_cast<int64_t>(haystack.ids.size()))
    throw ConfigError("passkey at " + std::to_string(length) + " tokens: the haystack is too short");
  // The sentence boundary inside the filler nearest the requested depth; its end is one too.
  int64_t cut = n;
  for (auto s : haystack.starts) {
    if (s < offset || s - offset > n) continue;
    if (std::abs(static_cast<double>(s - offset) - depth * n) < std::abs(static_cast<double>(cut) - depth * n)) cut = s - offset;
  }
  PasskeyDoc doc;
  doc.key = key;
  auto& ids = doc.ids;
  auto add = [&](const std::vector<int64_t>& part) { ids.insert(ids.end(), part.begin(), part.end()); };
  const auto fill = haystack.ids.begin() + offset;
  if (!t.task.empty()) add(encode_part(tok, t.task, source)), add(sep);
  if (needle) {
    ids.insert(ids.end(), fill, fill + cut);
    add(sep);
    doc.needle_start = static_cast<int64_t>(ids.size());
    add(needle_ids);
    add(sep);
    ids.insert(ids.end(), fill + cut, fill + n);
    doc.depth = static_cast<double>(cut) / static_cast<double>(n);
  } else {
    ids.insert(ids.end(), fill, fill + n);
    doc.depth = NAN;
  }
  add(sep);
  add(encode_part(tok, t.question + " ", source));
  doc.key_start = static_cast<int64_t>(ids.size());
  add(encode_key(tok, key));
  return doc;
}

}  // namespace poslab
