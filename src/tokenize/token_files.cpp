// poslab-tokenize's token files: text split into training and validation by bytes, SentencePiece trained
// on the training lines (or a model applied), each split encoded in chunks at newlines into train.bin and
// val.bin (nanoGPT's uint16 or uint32), meta.json and tokenizer.model beside them, written into a partial
// directory renamed into place, and removed on a signal or an error.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tokenize/tokenize.h"

namespace fs = std::filesystem;

namespace poslab::tok {

namespace {

// SIGINT or SIGTERM while token files are written: the loops stop at the next block, the partial
// directory is removed, and the exit status is 128 + the signal, as a shell reports a killed command.
volatile std::sig_atomic_t g_signal = 0;
void check_interrupt() {
  if (g_signal != 0) throw Interrupted{static_cast<int>(g_signal)};
}
void stop_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = [](int sig) { g_signal = sig; };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// A byte range of one input file; `doc` is the file's place among the inputs (a file given twice is two documents).
struct Segment {
  std::string path;
  size_t doc = 0;
  int64_t begin = 0, end = 0;
};

// The validation split is the tail `fraction` of all input bytes, starting after a newline (or,
// on a line longer than 64 KiB, at a character boundary), as the character-level split does.
void split_inputs(const std::vector<std::string>& inputs, double fraction, std::vector<Segment>* train,
                  std::vector<Segment>* val) {
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const auto& p : inputs) sizes.push_back(static_cast<int64_t>(fs::file_size(p))), total += sizes.back();
  int64_t cut = total - static_cast<int64_t>(static_cast<double>(total) * fraction);
  int64_t offset = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t size = sizes[i];
    if (cut >= offset && cut < offset + size) {
      int64_t local = cut - offset;
      if (local > 0) {  // move the cut to just after a newline, else to a character boundary
        std::ifstream in(inputs[i], std::ios::binary);
        in.seekg(local - 1);
        std::string window(65536, '\0');
        in.read(window.data(), static_cast<std::streamsize>(window.size()));
        window.resize(static_cast<size_t>(in.gcount()));
        const auto nl = window.find('\n');
        if (nl != std::string::npos) local += static_cast<int64_t>(nl);
        else {
          size_t k = 1;
          while (k < window.size() && (static_cast<unsigned char>(window[k]) >> 6) == 0x2) ++k;
          local += static_cast<int64_t>(k) - 1;
        }
        local = std::min(local, size);
      }
      if (local > 0) train->push_back({inputs[i], i, 0, local});
      if (local < size) val->push_back({inputs[i], i, local, size});
    } else if (offset + size <= cut) {
      if (size > 0) train->push_back({inputs[i], i, 0, size});
    } else if (size > 0) {
      val->push_back({inputs[i], i, 0, size});
    }
    offset += size;
  }
}

// SentencePiece's trainer skips a sentence longer than this many bytes (its max_sentence_length).
constexpr size_t kMaxSentenceBytes = 16384;

// Training sentences for SentencePiece: the lines of the training split only. A line longer than
// kMaxSentenceBytes (a corpus without newlines, such as text8) is given in pieces of at most that
// many bytes, each cut before a space where there is one, else at a character start: the trainer
// would skip it whole. Reads are bounded, so a line of any length never sits in memory.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<Segment>& segments) : segments_(segments) { advance(); }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void advance() {
    while (true) {
      if (in_.is_open() && next_line()) return;
      if (in_.is_open()) in_.close(), ++seg_;
      if (seg_ >= segments_.size()) {
        done_ = true;
        return;
      }
      in_.open(segments_[seg_].path, std::ios::binary);
      in_.seekg(segments_[seg_].begin);
      pos_ = segments_[seg_].begin;
      buf_.clear();
      head_ = 0;
    }
  }
  // The next line (or piece of a long line) of the open segment into line_; false at its end.
  bool next_line() {
    size_t nl = buf_.find('\n', head_);
    while (nl == std::string::npos && buf_.size() - head_ <= kMaxSentenceBytes && pos_ < segments_[seg_].end) {
      buf_.erase(0, head_);
      head_ = 0;
      const size_t old = buf_.size();
      const auto want = static_cast<size_t>(std::min<int64_t>(segments_[seg_].end - pos_, 1 << 16));
      buf_.resize(old + want);
      in_.read(&buf_[old], static_cast<std::streamsize>(want));
      const auto got = static_cast<size_t>(in_.gcount());
      buf_.resize(old + got);
      if (got == 0) break;
      pos_ += static_cast<int64_t>(got);
      nl = buf_.find('\n', old);
    }
    const size_t have = buf_.size() - head_;
    if (nl != std::string::npos && nl - head_ <= kMaxSentenceBytes) {
      line_.assign(buf_, head_, nl - head_);
      head_ = nl + 1;
      return true;
    }
    if (have == 0) return false;
    size_t cut = have;
    if (have > kMaxSentenceBytes) {  // a long line: cut before the last space that fits, else at a character start
      const size_t space = buf_.rfind(' ', head_ + kMaxSentenceBytes - 1);
      if (space != std::string::npos && space > head_) {
        cut = space - head_;
      } else {
        cut = kMaxSentenceBytes;
        while (cut > 1 && (static_cast<unsigned char>(buf_[head_ + cut]) >> 6) == 0x2) --cut;
      }
    }
    line_.assign(buf_, head_, cut);
    head_ += cut;
    return true;
  }
  const std::vector<Segment>& segments_;
  size_t seg_ = 0;
  std::ifstream in_;
  int64_t pos_ = 0;  // the file offset up to which buf_ holds bytes
  std::string buf_;  // bytes read from the segment; those before head_ were given out
  size_t head_ = 0;
  std::string line_;
  bool done_ = false;
};

// Progress on stderr every few seconds for inputs above 16 MiB.
struct Progress {
  int64_t total, done = 0;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  void add(int64_t n, const char* what) {
    done += n;
    if (total < (16 << 20)) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(2) && done < total) return;
    last = now;
    std::fprintf(stderr, "poslab tokenize: %s %.0f%% (%lld of %lld MB)\n", what, 100.0 * done / total,
                 static_cast<long long>(done >> 20), static_cast<long long>(total >> 20));
  }
};

void write_ids(std::ofstream& out, const std::vector<int>& ids, int bytes) {
  std::string buf(ids.size() * bytes, '\0');
  for (size_t i = 0; i < ids.size(); ++i)
    for (int b = 0; b < bytes; ++b) buf[i * bytes + b] = static_cast<char>((static_cast<uint32_t>(ids[i]) >> (8 * b)) & 0xFF);
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}

// Writes `data` as the whole of `path`; a short write (a full disk) is an error, not a truncated file.
void write_whole(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + path + " (" + std::strerror(errno) + ")");
}

// Encodes segments into `path`, chunk by chunk at newlines (pieces never span a newline: the
// trainer saw lines), with the end-of-text id between different files. Returns the token count.
int64_t encode_segments(const sentencepiece::SentencePieceProcessor& sp, const std::vector<Segment>& segments,
                        const std::string& path, int bytes, int eot, Progress& progress) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + path + " (" + std::strerror(errno) + ")");
  int64_t count = 0;
  std::vector<int> ids;
  auto encode = [&](const std::string& text) {
    if (text.empty()) return;
    const auto st = sp.Encode(text, &ids);
    if (!st.ok()) throw std::runtime_error("sentencepiece: " + st.ToString());
    write_ids(out, ids, bytes);
    // Said at once, with the reason (a full disk), before later reads can change errno.
    if (!out) throw std::runtime_error("cannot write " + path + " (" + std::strerror(errno) + ")");
    count += static_cast<int64_t>(ids.size());
  };
  for (size_t s = 0; s < segments.size(); ++s) {
    const auto& seg = segments[s];
    if (s > 0 && segments[s - 1].doc != seg.doc && eot >= 0) write_ids(out, {eot}, bytes), ++count;
    std::ifstream in(seg.path, std::ios::binary);
    in.seekg(seg.begin);
    std::string carry;
    std::vector<char> buf(1 << 20);
    for (int64_t left = seg.end - seg.begin; left > 0;) {
      in.read(buf.data(), static_cast<std::streamsize>(std::min<int64_t>(left, static_cast<int64_t>(buf.size()))));
      const auto got = static_cast<int64_t>(in.gcount());
      if (got <= 0) throw std::runtime_error("read failed: " + seg.path);
      left -= got;
      carry.append(buf.data(), static_cast<size_t>(got));
      size_t cut = carry.rfind('\n');
      if (cut != std::string::npos) ++cut;
      else if (carry.size() >= buf.size()) {  // a line longer than the buffer: cut at a character start
        cut = carry.size();
        while (cut > 0 && (static_cast<unsigned char>(carry[cut - 1]) >> 6) == 0x2) --cut;
        if (cut > 0) --cut;
      } else continue;
      check_interrupt();
      encode(carry.substr(0, cut));
      carry.erase(0, cut);
      progress.add(got, "encoded");
    }
    encode(carry);
  }
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + path + " (" + std::strerror(errno) + ")");
  return count;
}

}  // namespace

void load_model(sentencepiece::SentencePieceProcessor& sp, const std::string& path, const std::string& option) {
  if (!fs::exists(path)) throw InputError(option + " " + path + ": no such file");
  if (fs::is_directory(path)) throw InputError(option + " " + path + ": is a directory, expected a SentencePiece .model file");
  const auto st = sp.Load(path);
  if (!st.ok()) throw InputError(option + " " + path + ": not a SentencePiece model (" + std::string(st.message()) + ")");
}

void tokenize(const TokenizeOptions& o) {
  if (o.inputs.empty()) throw InputError("tokenize: --input FILE is required (one or more)");
  if (o.out.empty()) throw InputError("tokenize: --out DIR is required");
  // "DIR/" names DIR: the partial folder goes beside it, not inside it.
  std::string out = o.out;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  if (o.tokenizer.empty() == (o.vocab_size == 0))
    throw InputError("tokenize: give --vocab-size N (train a model) or --tokenizer M.model (use one), exactly one");
  if (o.vocab_size != 0 && (o.vocab_size < 260 || o.vocab_size > 1000000))
    throw InputError("--vocab-size " + std::to_string(o.vocab_size) +
                     ": expected 260 to 1000000 (a text needs its 256 byte pieces, 3 specials and its distinct characters)");
  // From a config, errors name its keys (data.path, data.val_fraction), not flags its user never typed.
  const std::string fraction_name = o.from_config ? "data.val_fraction" : "--val-fraction";
  char fraction[32];
  std::snprintf(fraction, sizeof fraction, "%g", o.val_fraction);
  if (!(o.val_fraction > 0 && o.val_fraction < 1))
    throw InputError(fraction_name + " " + fraction + ": expected a fraction in (0, 1)");
  // poslab's cache entry, finished by another process since poslab looked (two runs tokenizing one text at once):
  // complete (meta.json is written last), so there is nothing to do.
  if (o.from_config && fs::exists(out + "/meta.json")) return;
  if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out)))
    throw InputError("--out " + out + ": already exists and is not an empty directory");
  int64_t total = 0;
  const std::string input_name = o.from_config ? "data.path " : "--input ";
  for (const auto& p : o.inputs) {
    if (fs::is_directory(p)) throw InputError(input_name + p + ": is a directory, expected a UTF-8 text file");
    if (!fs::exists(p)) throw InputError(input_name + p + ": no such file");
    if (!fs::is_regular_file(p))  // a pipe (<(zcat ...), /dev/stdin) or device: the text is read more than once
      throw InputError(input_name + p + ": not a regular file (a pipe or device?): the text is read more than once, "
                                        "so write it to a file first");
    if (const int64_t markers = poslab::tok::check_utf8_file(p, input_name + p))
      std::cerr << "poslab: warning: " << input_name << p << ": holds " << markers
                << " U+2581 ('\xe2\x96\x81'), SentencePiece's space marker: each decodes as a space\n";
    total += static_cast<int64_t>(fs::file_size(p));
  }
  std::vector<Segment> train, val;
  split_inputs(o.inputs, o.val_fraction, &train, &val);
  if (train.empty() || val.empty())
    throw InputError((o.from_config ? "data.path " + o.inputs[0] : std::string("--input")) + ": " + std::to_string(total) +
                     " bytes leave an empty " + (train.empty() ? "training" : "validation") + " split at " + fraction_name +
                     " " + fraction);
  sentencepiece::SentencePieceProcessor sp;
  std::string model_bytes;
  if (!o.tokenizer.empty()) {
    load_model(sp, o.tokenizer, o.from_config ? "data.tokenizer.model" : "--tokenizer");
    model_bytes = sp.serialized_model_proto();
  } else {
    // Identity normalisation, no dummy prefix and byte fallback: every UTF-8 text round-trips.
    const std::unordered_map<std::string, std::string> args = {
        {"model_type", o.model_type}, {"vocab_size", std::to_string(o.vocab_size)},
        {"byte_fallback", "true"}, {"normalization_rule_name", "identity"}, {"add_dummy_prefix", "false"},
        {"remove_extra_whitespaces", "false"}, {"character_coverage", "0.9995"}, {"hard_vocab_limit", "false"},
        {"unk_id", "0"}, {"bos_id", "1"}, {"eos_id", "2"}, {"pad_id", "-1"},
        {"input_sentence_size", "2000000"}, {"shuffle_input_sentence", "true"}, {"max_sentence_length", std::to_string(kMaxSentenceBytes)},
        {"num_threads", std::to_string(std::max(1u, std::thread::hardware_concurrency()))}, {"minloglevel", "2"},
        {"model_prefix", ""}};
    if (total >= (16 << 20)) std::fprintf(stderr, "poslab tokenize: training a %s model of %d pieces\n", o.model_type.c_str(), o.vocab_size);
    LineIterator lines(train);
    const auto st = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model_bytes);
    if (!st.ok()) {
      // "Vocabulary size is smaller than required_chars. 260 vs 286.": say the size this text needs first.
      const std::string message(st.message()), mark = "required_chars. ";
      std::string need;
      if (const auto at = message.find(mark); at != std::string::npos) {
        const auto vs = message.find(" vs ", at);
        if (vs != std::string::npos) need = message.substr(vs + 4, message.find_first_not_of("0123456789", vs + 4) - vs - 4);
      }
      const std::string key = o.from_config ? "data.tokenizer.sentencepiece.vocab_size " : "--vocab-size ";
      if (!need.empty())  // SentencePiece's own advice names its --character_coverage, which poslab does not have
        throw InputError(key + std::to_string(o.vocab_size) + ": this text needs at least " + need +
                         " pieces (its 256 byte pieces, 3 specials and its distinct characters)");
      if (message.find("sentences_.empty()") != std::string::npos)  // only empty lines: nothing to learn from
        throw InputError((o.from_config ? "data.path: " : "--input: ") +
                         std::string("the training part of the text has no line with a character in it"));
      throw InputError(key + std::to_string(o.vocab_size) + ": SentencePiece could not train on the text (" + message + ")");
    }
    const auto lst = sp.LoadFromSerializedProto(model_bytes);
    if (!lst.ok()) throw std::runtime_error("sentencepiece: " + lst.ToString());
  }
  const int vocab = sp.GetPieceSize();
  // SentencePiece stops short of the size asked for when the text holds no more pieces (hard_vocab_limit off):
  // say so, or a grid over vocabulary sizes would compare copies of one model without a word.
  if (o.vocab_size > 0 && vocab < o.vocab_size)
    std::fprintf(stderr, "poslab tokenize: %s %d: the text gives only %d pieces, so the model has %d, not %d\n",
                 o.from_config ? "data.tokenizer.sentencepiece.vocab_size" : "--vocab-size", o.vocab_size, vocab, vocab,
                 o.vocab_size);
  const int bytes = vocab <= 65536 ? 2 : 4;
  const std::string partial = out + ".partial-" + std::to_string(::getpid());
  stop_on_signals();  // from here on a signal must not leave the partial directory behind
  std::error_code made;
  fs::remove_all(partial, made);
  if (!made) fs::create_directories(partial, made);
  if (made) throw InputError("--out " + out + ": cannot create " + partial + " beside it (" + made.message() + ")");
  try {
    Progress progress{total};
    const int eot = sp.eos_id();
    const int64_t n_train = encode_segments(sp, train, partial + "/train.bin", bytes, eot, progress);
    const int64_t n_val = encode_segments(sp, val, partial + "/val.bin", bytes, eot, progress);
    write_whole(partial + "/tokenizer.model", model_bytes);
    nlohmann::json sources = nlohmann::json::array();
    for (const auto& p : o.inputs) sources.push_back(fs::absolute(p).string());
    const nlohmann::json meta = {{"vocab_size", vocab}, {"dtype", bytes == 2 ? "uint16" : "uint32"},
                                 {"eot_id", eot >= 0 ? nlohmann::json(eot) : nlohmann::json()},
                                 {"tokenizer", "tokenizer.model"}, {"train_tokens", n_train}, {"val_tokens", n_val},
                                 {"val_fraction", o.val_fraction}, {"sources", sources}};
    write_whole(partial + "/meta.json", meta.dump(2) + "\n");
    check_interrupt();
    std::error_code ec;
    // An empty directory (checked above) is replaced; one another process has filled since (the same text
    // tokenized into the same cache entry at the same time) makes the remove fail, and the rename below
    // then finds its meta.json.
    if (fs::is_directory(out, ec) && fs::is_empty(out, ec)) fs::remove(out, ec);
    fs::rename(partial, out, ec);
    if (ec) {
      // Another process tokenizing the same text into the same cache entry got there first.
      if (fs::exists(out + "/meta.json")) fs::remove_all(partial);
      else throw std::runtime_error("cannot move " + partial + " to " + out + ": " + ec.message());
    }
    std::fprintf(stderr, "poslab tokenize: %lld training and %lld validation tokens (vocabulary %d) in %s\n",
                 static_cast<long long>(n_train), static_cast<long long>(n_val), vocab, out.c_str());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(partial, ec);
    throw;
  }
}

}  // namespace poslab::tok
