// Token files as a corpus: resolving the files and the vocabulary, the checks that refuse bad
// input before training, and windows copied out of the memory maps.
#include "data/token_corpus.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "data/sentencepiece.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace poslab {

// A run's token files read again (--resume, eval, probe, attention) must mean what they meant in training:
// a meta.pkl or meta.json rewritten since (another character at an id, more symbols, another SentencePiece
// model) would feed the model ids whose text changed, and nothing else would notice. Checked where both
// the run and the sidecar name their symbols; bare ids (or a sidecar giving only a size) leave the id check.
static void check_run_vocabulary(const TokenMeta& meta, const DataConfig& d, const Tokenizer& run) {
  if (run.ids_only() || (meta.itos.empty() && meta.tokenizer.empty())) return;
  const std::string why = "; these token files are not the ones the run was trained on, or their sidecar changed "
                          "since (token ids would mean other text)";
  const auto kind = [](bool sp) { return sp ? std::string("SentencePiece pieces") : std::string("characters"); };
  if (run.is_sentencepiece() != meta.itos.empty())
    throw ConfigError(meta.source + ": its vocabulary is " + kind(meta.itos.empty()) + ", the run's " +
                      kind(run.is_sentencepiece()) + why);
  if (!meta.itos.empty()) {
    const Tokenizer data(meta.itos, d.vocab_size > 0 ? d.vocab_size : meta.vocab_size);
    const std::string diff = vocabulary_difference(run, data, "in the run", "here");
    if (!diff.empty())
      throw ConfigError(meta.source + ": its vocabulary (" + std::to_string(data.size()) + " symbols) differs from the run's (" +
                        std::to_string(run.size()) + " symbols; first at " + diff + ")" + why);
    return;
  }
  // Both SentencePiece: the run keeps a copy of its model; a sidecar's model moved away leaves that copy in use.
  if (file_exists(meta.tokenizer) &&
      read_text_file(meta.tokenizer, meta.source + ": its tokenizer") !=
          read_text_file(run.sentencepiece_model(), "the run's tokenizer"))
    throw ConfigError(meta.source + ": its SentencePiece model " + meta.tokenizer + " differs from the run's (" +
                      run.sentencepiece_model() + ")" + why);
}

TokenCorpus::TokenCorpus(TokenFile train, TokenFile val, const TokenMeta& meta, const Config& c,
                         const Tokenizer* run_tokenizer)
    : TextCorpus(c.model.block_size), train_(std::move(train)), val_(std::move(val)) {
  const auto& d = c.data;
  if (run_tokenizer != nullptr) {
    check_run_vocabulary(meta, d, *run_tokenizer);
    tokenizer_ = *run_tokenizer;
  } else {
    int64_t n = d.vocab_size > 0 ? d.vocab_size : meta.vocab_size;
    if (n == 0)
      throw ConfigError("data.vocab_size: token files need a vocabulary size: set data.vocab_size, or put meta.json or "
                        "meta.pkl beside " + train_.path());
    if (d.vocab_size > 0 && meta.vocab_size > d.vocab_size)
      throw ConfigError("data.vocab_size: " + std::to_string(d.vocab_size) + " is below the " +
                        std::to_string(meta.vocab_size) + " of " + meta.source);
    if (n > (int64_t{1} << 31) - 1) throw ConfigError("data.vocab_size: above 2^31-1 is not supported");
    if (!meta.itos.empty()) tokenizer_ = Tokenizer(meta.itos, n);
    else if (!meta.tokenizer.empty()) {
      if (!file_exists(meta.tokenizer))
        throw ConfigError(meta.source + ": its tokenizer " + meta.tokenizer + " does not exist");
      // A damaged model, or one of more pieces than the vocabulary has rows (ids the model could not embed),
      // is refused now, not after training, when sample and probe first load it.
      if (!tokenize_tool().empty()) {
        int64_t pieces = 0;
        try {
          pieces = sentencepiece_pieces(meta.tokenizer);
        } catch (const ConfigError& e) {
          throw ConfigError(meta.source + ": " + e.what());
        }
        if (pieces > n)
          throw ConfigError(meta.source + ": its tokenizer " + meta.tokenizer + " has " + std::to_string(pieces) +
                            " pieces, more than the vocabulary of " + std::to_string(n) + " (" +
                            (d.vocab_size > 0 ? "data.vocab_size" : "its vocab_size") + "): the model would meet ids it has no row for");
      }
      tokenizer_ = Tokenizer::sentencepiece(n, meta.tokenizer);
    } else {
      tokenizer_ = Tokenizer::ids(n);
    }
  }
  const int64_t vocab = tokenizer_.size();
  // Ids are checked once per file (a scan, cached beside it) so that a bad id is refused now,
  // not thousands of steps in; every window read checks its own ids again.
  for (const TokenFile* f : {&train_, &val_}) {
    if (f->max_id() >= vocab) {
      const int64_t at = f->first_id_at_or_above(vocab);
      // None found: the cached largest id was stale (the file was rewritten keeping its size and time), and
      // this scan of the whole file has just checked every id.
      if (at >= 0)
        throw ConfigError(f->offset_message(
            at, f->at(at), vocab,
            run_tokenizer == nullptr ? "" : "the run's vocabulary: these token files are not the ones it was trained on"));
    }
  }
  const int64_t need_train = block_size_ + 1;
  if (train_.size() < need_train)
    throw ConfigError(train_.source() + ": " + std::to_string(train_.size()) + " tokens is too short: training needs at least "
                      "model.block_size+1 = " + std::to_string(need_train));
  // Validation while training reads windows of block_size+1; an evaluation length past the file is reported
  // not applicable by the evaluation, as for text, and the other lengths are evaluated.
  const int64_t need_val = block_size_ + 1;
  if (val_.size() < need_val)
    throw ConfigError(val_.source() + ": " + std::to_string(val_.size()) + " tokens is too short: validation needs at "
                      "least model.block_size+1 = " + std::to_string(need_val));
}

torch::Tensor TokenCorpus::windows(Split split, const std::vector<int64_t>& starts, int64_t len) const {
  const TokenFile& f = file(split);
  auto out = torch::empty({static_cast<int64_t>(starts.size()), len}, torch::kLong);  // (B, len)
  auto* p = out.data_ptr<int64_t>();
  for (size_t b = 0; b < starts.size(); ++b) f.read(starts[b], len, p + b * len, tokenizer_.size());
  return out;
}

// A validation file in a folder of its own may carry a sidecar of its own: it must describe the same
// vocabulary and layout as the training file's (`meta`, read from `meta_dir`), or the validation ids would be
// read as another format (uint32 as uint16: an id and a 0) or mean other characters.
static void check_val_sidecar(const std::string& val_path, const std::string& meta_dir, const TokenMeta& meta) {
  const std::string val_dir = fs::path(val_path).parent_path().string();
  std::error_code ec;
  if (fs::equivalent(val_dir.empty() ? "." : val_dir, meta_dir.empty() ? "." : meta_dir, ec)) return;
  const TokenMeta val_meta = read_token_meta(val_dir.empty() ? "." : val_dir);
  if (val_meta.source.empty()) return;
  const std::string train_side = meta.source.empty() ? "the training file's folder has none" : meta.source;
  auto differ = [&](const std::string& what) {
    return ConfigError("data.val_path: " + val_meta.source + " differs from " + train_side + " (" + what +
                       "): both files must hold ids of one vocabulary, in one layout");
  };
  if (meta.source.empty()) throw differ("a sidecar beside one file only");
  if (val_meta.vocab_size != meta.vocab_size)
    throw differ("vocab_size " + std::to_string(val_meta.vocab_size) + " against " + std::to_string(meta.vocab_size));
  auto dtype = [](const std::string& t) { return t == "auto" ? std::string("none given") : t; };
  if (val_meta.dtype != meta.dtype) throw differ("dtype " + dtype(val_meta.dtype) + " against " + dtype(meta.dtype));
  if (val_meta.itos != meta.itos) throw differ("another character at some id");
  if (val_meta.tokenizer != meta.tokenizer &&
      (val_meta.tokenizer.empty() || meta.tokenizer.empty() ||
       read_text_file(val_meta.tokenizer, val_meta.source + ": its tokenizer") !=
           read_text_file(meta.tokenizer, meta.source + ": its tokenizer")))
    throw differ("another tokenizer");
  if (val_meta.eot_id != meta.eot_id)
    throw differ("eot_id " + std::to_string(val_meta.eot_id) + " against " + std::to_string(meta.eot_id));
}

std::unique_ptr<Corpus> make_token_corpus(const Config& c, const Tokenizer* run_tokenizer) {
  DataConfig d = c.data;
  std::string train_key = "data.train_path", val_key = "data.val_path";
  if (d.kind == "text") {  // SentencePiece text: tokenized once into the cache, then read as token files
    const std::string root = d.cache_dir.empty() ? (fs::temp_directory_path() / "poslab-cache").string() : d.cache_dir;
    std::string model = d.tokenizer.model;
    if (run_tokenizer != nullptr && run_tokenizer->is_sentencepiece()) model = run_tokenizer->sentencepiece_model();
    if (!model.empty() && !file_exists(model)) throw ConfigError("data.tokenizer.model " + model + ": no such file");
    d.dir = tokenized_text_dir(d.path, d.val_fraction, d.tokenizer.sp_vocab_size, d.tokenizer.sp_model_type, model, root);
    d.format = "nanogpt";
    d.dtype = "auto";
    d.vocab_size = 0;
    train_key = val_key = "data.path " + d.path + ", tokenized:";
  }
  if (!d.dir.empty()) {
    if (!fs::is_directory(d.dir))
      throw ConfigError("data.dir " + d.dir + ": " + (fs::exists(d.dir) ? "not a directory" : "no such directory") +
                        " (expected one holding train.bin and val.bin)");
    d.train_path = d.dir + "/train.bin";
    d.val_path = d.dir + "/val.bin";
    if (d.kind == "tokens") train_key = val_key = "data.dir";
  }
  const std::string meta_dir = d.dir.empty() ? fs::path(d.train_path).parent_path().string() : d.dir;
  const TokenMeta meta = read_token_meta(meta_dir.empty() ? "." : meta_dir);
  if (d.dir.empty()) check_val_sidecar(d.val_path, meta_dir, meta);
  // A sidecar's dtype describes raw arrays; an llm.c shard's magic outranks it (only data.dtype is explicit).
  // Without one, a vocabulary above 65536 means uint32: uint16 cannot hold its ids, and reading uint32
  // ids as uint16 would train on halves of ids without a word (the other way round, the ids are refused).
  const int64_t vocab = d.vocab_size > 0 ? d.vocab_size : meta.vocab_size;
  const std::string raw_dtype = meta.dtype != "auto" ? meta.dtype : vocab > 65536 ? "uint32" : "uint16";
  TokenFile train(d.train_path, d.format, d.dtype, train_key + " " + d.train_path, raw_dtype);
  TokenFile val(d.val_path, d.format, d.dtype, val_key + " " + d.val_path, raw_dtype);
  // Two widths are two vocabularies (llm.c's GPT-2 shards are uint16, its Llama 3 shards uint32): the
  // validation ids would not be the training ids' kind.
  if (train.layout().token_bytes != val.layout().token_bytes) {
    auto kind = [](const TokenFile& f) {
      const std::string width = f.layout().token_bytes == 4 ? "uint32" : "uint16";
      return f.layout().format == "llmc" ? "an llm.c shard of " + width + " tokens" : width + " tokens";
    };
    throw ConfigError(val_key + " " + d.val_path + ": " + kind(val) + ", but " + train_key + " " + d.train_path + " holds " +
                      kind(train) + ": both files must hold ids of one vocabulary, in one layout");
  }
  // Allowed (a smoke test may want it), but every validation loss would then be a training loss.
  std::error_code same_error;
  if (fs::equivalent(d.train_path, d.val_path, same_error))
    spdlog::warn("{} and {} are the same file: the validation loss is measured on the training tokens", d.train_path,
                 d.val_path);
  // data.dtype against meta.json's own dtype, for raw arrays (an llm.c header was checked against it
  // already): read as the other width, every id would be garbage (uint32 as uint16: an id and a 0).
  const bool declared = meta.dtype != "auto" && fs::path(meta.source).filename() == "meta.json";
  for (const TokenFile* f : {&train, &val})
    if (declared && d.dtype != "auto" && d.dtype != meta.dtype && f->layout().format == "nanogpt")
      throw ConfigError("data.dtype is " + d.dtype + " but " + meta.source + " says dtype " + meta.dtype + " for " +
                        f->path() + " (set data.dtype to " + meta.dtype + " or auto)");
  return std::make_unique<TokenCorpus>(std::move(train), std::move(val), meta, c, run_tokenizer);
}

}  // namespace poslab
