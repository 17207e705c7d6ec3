// meta.json and nanoGPT's meta.pkl. The pickle reader runs a tiny stack machine over the opcodes
// Python's pickle emits for {'vocab_size': int, 'itos': {int: str}, 'stoi': {str: int}} at
// protocols 2 to 5; any other opcode or shape is refused with one line naming the file.
#include "data/token_meta.h"

#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/tokenizer.h"
#include "util/files.h"

namespace poslab {

TokenMeta parse_meta_json(const std::string& text, const std::string& path) {
  const nlohmann::json j = parse_json_text(text, path);
  auto bad = [&](const std::string& what) {
    return ConfigError(path + ": " + what + " (expected {\"vocab_size\": N, \"dtype\": \"uint16\"|\"uint32\", "
                                          "\"eot_id\": N, \"tokenizer\": \"file.model\"})");
  };
  if (!j.is_object()) throw bad("not a JSON object");
  TokenMeta m;
  m.source = path;
  if (!j.contains("vocab_size") || !j["vocab_size"].is_number_integer() || j["vocab_size"].get<int64_t>() <= 0 ||
      j["vocab_size"].get<int64_t>() > (int64_t{1} << 32))
    throw bad("vocab_size must be a positive integer up to 2^32");
  m.vocab_size = j["vocab_size"].get<int64_t>();
  if (j.contains("dtype")) {
    if (!j["dtype"].is_string() || (j["dtype"] != "uint16" && j["dtype"] != "uint32")) throw bad("dtype must be uint16 or uint32");
    m.dtype = j["dtype"].get<std::string>();
    if (m.dtype == "uint16" && m.vocab_size > 65536) throw bad("vocab_size above 65536 needs dtype uint32");
  }
  if (j.contains("eot_id") && !j["eot_id"].is_null()) {
    if (!j["eot_id"].is_number_integer() || j["eot_id"].get<int64_t>() < 0 || j["eot_id"].get<int64_t>() >= m.vocab_size)
      throw bad("eot_id must be an id below vocab_size");
    m.eot_id = j["eot_id"].get<int64_t>();
  }
  if (j.contains("tokenizer") && !j["tokenizer"].is_null()) {
    if (!j["tokenizer"].is_string() || j["tokenizer"].get<std::string>().empty()) throw bad("tokenizer must be a file name");
    m.tokenizer = absolute_path(resolve_relative(path, j["tokenizer"].get<std::string>()));
  }
  return m;
}

namespace {

// A pickled value of the few kinds nanoGPT's meta uses.
struct Value {
  enum Kind { Int, Str, Dict, Mark } kind = Int;
  explicit Value(Kind k = Int, int64_t v = 0) : kind(k), i(v) {}
  int64_t i = 0;
  std::string s;
  std::shared_ptr<std::vector<std::pair<Value, Value>>> dict;  // shared: the memo and the stack alias one dict
};

class PickleReader {
 public:
  PickleReader(const std::string& bytes, const std::string& path) : b_(bytes), path_(path) {}

  Value run() {
    while (true) {
      const uint8_t op = u8();
      switch (op) {
        case 0x80: {  // PROTO
          const int proto = u8();
          if (proto < 2 || proto > 5) fail("pickle protocol " + std::to_string(proto) + " (expected 2 to 5)");
          break;
        }
        case 0x95: take(8); break;  // FRAME: a length hint only
        case '}': push(new_dict()); break;  // EMPTY_DICT
        case '(': push(Value(Value::Mark)); break;  // MARK
        case 'K': push(integer(u8())); break;  // BININT1
        case 'M': push(integer(le(2))); break;  // BININT2
        case 'J': push(integer(static_cast<int32_t>(le(4)))); break;  // BININT
        case 0x8a: {  // LONG1: Python's ints past 32 bits (a vocab_size of 2**40), two's complement
          const int n = u8();
          if (n > 8) fail("an integer of " + std::to_string(n) + " bytes");
          const auto* p = reinterpret_cast<const uint8_t*>(take(static_cast<uint64_t>(n)));
          uint64_t v = n > 0 && (p[n - 1] & 0x80) ? ~uint64_t{0} : 0;  // sign-extended
          for (int k = n - 1; k >= 0; --k) v = v << 8 | p[k];
          push(integer(static_cast<int64_t>(v)));
          break;
        }
        case 0x8c: push(string(u8())); break;  // SHORT_BINUNICODE
        case 'X': push(string(le(4))); break;  // BINUNICODE
        case 0x8d: push(string(le(8))); break;  // BINUNICODE8
        case 0x94: memo_[static_cast<int64_t>(memo_.size())] = top(); break;  // MEMOIZE
        case 'q': memo_[u8()] = top(); break;  // BINPUT
        case 'r': memo_[le(4)] = top(); break;  // LONG_BINPUT
        case 'h': push(memo(u8())); break;  // BINGET
        case 'j': push(memo(le(4))); break;  // LONG_BINGET
        case 's': {  // SETITEM
          Value v = pop(), k = pop();
          dict_of(top()).emplace_back(k, v);
          break;
        }
        case 'u': {  // SETITEMS: key/value pairs down to the mark
          std::vector<Value> items;
          while (!stack_.empty() && stack_.back().kind != Value::Mark) items.push_back(pop());
          if (stack_.empty()) fail("SETITEMS without a mark");
          stack_.pop_back();
          if (items.size() % 2) fail("SETITEMS with an odd number of items");
          auto& d = dict_of(top());
          for (size_t k = items.size(); k >= 2; k -= 2) d.emplace_back(items[k - 1], items[k - 2]);
          break;
        }
        case '.':  // STOP
          if (stack_.size() != 1) fail("a stack of " + std::to_string(stack_.size()) + " values at STOP");
          if (pos_ != b_.size()) fail("bytes after the end of the pickle");
          return stack_.back();
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("pickle opcode ") + hex + " at byte " + std::to_string(pos_ - 1) +
               " (only dicts of strings and integers are read)");
        }
      }
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(path_ + ": not nanoGPT's meta.pkl: " + what +
                      " (expected a pickled dict {'vocab_size': int, 'itos': {int: str}, 'stoi': {str: int}})");
  }

 private:
  uint8_t u8() {
    if (pos_ >= b_.size()) fail("it ends before the STOP opcode");
    return static_cast<uint8_t>(b_[pos_++]);
  }
  const char* take(uint64_t n) {
    if (n > b_.size() - pos_) fail("a field runs past the end of the file");
    const char* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  int64_t le(int n) {
    const auto* p = reinterpret_cast<const uint8_t*>(take(n));
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = v << 8 | p[k];
    if (n == 8 && v > (uint64_t{1} << 40)) fail("a length of " + std::to_string(v) + " bytes");
    return static_cast<int64_t>(v);
  }
  static Value integer(int64_t v) { return Value(Value::Int, v); }
  Value string(int64_t n) {
    Value v(Value::Str);
    v.s.assign(take(static_cast<uint64_t>(n)), static_cast<size_t>(n));
    return v;
  }
  static Value new_dict() {
    Value v(Value::Dict);
    v.dict = std::make_shared<std::vector<std::pair<Value, Value>>>();
    return v;
  }
  void push(Value v) {
    if (stack_.size() > 1000000) fail("a stack deeper than 1e6");
    stack_.push_back(std::move(v));
  }
  Value pop() {
    if (stack_.empty() || stack_.back().kind == Value::Mark) fail("an opcode with too few operands");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.empty()) fail("an opcode with an empty stack");
    return stack_.back();
  }
  std::vector<std::pair<Value, Value>>& dict_of(Value& v) {
    if (v.kind != Value::Dict) fail("items set on something other than a dict");
    return *v.dict;
  }
  Value memo(int64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) fail("a memo reference to an unknown slot");
    return it->second;
  }

  const std::string& b_;
  std::string path_;
  size_t pos_ = 0;
  std::vector<Value> stack_;
  std::map<int64_t, Value> memo_;
};

}  // namespace

TokenMeta parse_meta_pkl(const std::string& bytes, const std::string& path) {
  PickleReader reader(bytes, path);
  const Value top = reader.run();
  if (top.kind != Value::Dict) reader.fail("the top value is not a dict");
  const Value* vocab = nullptr;
  const Value* itos = nullptr;
  for (const auto& [k, v] : *top.dict) {
    if (k.kind != Value::Str) reader.fail("a top-level key that is not a string");
    if (k.s == "vocab_size") vocab = &v;
    if (k.s == "itos") itos = &v;
  }
  if (vocab == nullptr || vocab->kind != Value::Int || vocab->i <= 0 || vocab->i > 65536)
    reader.fail(vocab == nullptr || vocab->kind != Value::Int ? "vocab_size missing or not an integer"
                                                              : "vocab_size " + std::to_string(vocab->i) + " is not in 1..65536");
  if (itos == nullptr || itos->kind != Value::Dict) reader.fail("itos missing or not a dict");
  TokenMeta m;
  m.source = path;
  m.vocab_size = vocab->i;
  m.dtype = "uint16";  // nanoGPT's prepare.py writes uint16
  m.itos.assign(static_cast<size_t>(m.vocab_size), std::string());
  std::vector<bool> seen(static_cast<size_t>(m.vocab_size), false);
  for (const auto& [k, v] : *itos->dict) {
    if (k.kind != Value::Int || v.kind != Value::Str) reader.fail("itos must map integers to strings");
    if (k.i < 0 || k.i >= m.vocab_size || seen[static_cast<size_t>(k.i)])
      reader.fail("itos key " + std::to_string(k.i) + " outside 0..vocab_size-1 or repeated");
    seen[static_cast<size_t>(k.i)] = true;
    // Written to the run's vocab.json later: UTF-8 only (Python pickles a lone surrogate as bytes JSON refuses).
    for (size_t i = 0; i < v.s.size();) {
      const size_t len = utf8_char_length(v.s, i);
      if (len == 0) reader.fail("itos[" + std::to_string(k.i) + "] is not UTF-8 text (byte " + std::to_string(i) + ")");
      i += len;
    }
    m.itos[static_cast<size_t>(k.i)] = v.s;
  }
  // Each id a distinct, non-empty string: a prompt is encoded through the inverse map, which a repeated string
  // makes ambiguous, and an empty one is text no prompt can contain (nanoGPT writes each character once).
  std::map<std::string, int64_t> id_of;
  for (int64_t id = 0; id < m.vocab_size; ++id) {
    const std::string& text = m.itos[static_cast<size_t>(id)];
    if (!seen[static_cast<size_t>(id)]) continue;  // a missing id: the count below names it
    if (text.empty()) reader.fail("itos[" + std::to_string(id) + "] is the empty string (each id must be text)");
    if (const auto [it, fresh] = id_of.emplace(text, id); !fresh)
      reader.fail("itos[" + std::to_string(it->second) + "] and itos[" + std::to_string(id) + "] are the same string " +
                  nlohmann::json(text).dump() + " (each id must be its own text)");
  }
  if (itos->dict->size() != static_cast<size_t>(m.vocab_size))
    reader.fail("itos has " + std::to_string(itos->dict->size()) + " entries for vocab_size " + std::to_string(m.vocab_size));
  return m;
}

TokenMeta read_token_meta(const std::string& dir) {
  const std::string json_path = dir + "/meta.json", pkl_path = dir + "/meta.pkl";
  if (file_exists(json_path)) return parse_meta_json(read_text_file(json_path, "meta.json"), json_path);
  if (file_exists(pkl_path)) return parse_meta_pkl(read_text_file(pkl_path, "meta.pkl"), pkl_path);
  return {};
}

}  // namespace poslab
