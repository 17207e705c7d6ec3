// poslab-tokenize: SentencePiece for poslab, in its own process. `poslab tokenize` runs it to
// train a model (or apply one) and write train.bin, val.bin, meta.json and tokenizer.model
// (token_files.cpp); poslab runs it to encode prompts and decode samples (here). It links
// libsentencepiece and never LibTorch, so the protobuf-lite inside one never meets the libprotobuf of
// the other (data/sentencepiece.h).
#include <sentencepiece_processor.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include "tokenize/tokenize.h"

namespace fs = std::filesystem;
using poslab::tok::InputError;
using poslab::tok::Interrupted;
using poslab::tok::load_model;
using poslab::tok::tokenize;
using poslab::tok::TokenizeOptions;

namespace {

std::string read_stdin() {
  std::stringstream ss;
  ss << std::cin.rdbuf();
  return ss.str();
}

void encode(const std::string& model, const std::string& source) {
  sentencepiece::SentencePieceProcessor sp;
  load_model(sp, model, "--model");
  const std::string text = read_stdin();
  size_t carry = 0;
  const int64_t bad = poslab::tok::invalid_utf8_at(text.data(), text.size(), 0, false, &carry);
  if (bad >= 0) throw InputError(source + ": invalid UTF-8 at byte " + std::to_string(bad));
  if (text.find(poslab::tok::kSpaceMarker) != std::string::npos)
    std::cerr << "poslab: warning: " << source << " holds U+2581 ('\xe2\x96\x81'), SentencePiece's space marker: it decodes as a space\n";
  std::vector<int> ids;
  const auto st = sp.Encode(text, &ids);
  if (!st.ok()) throw std::runtime_error("sentencepiece: " + st.ToString());
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
}

void pieces(const std::string& model) {  // the model's piece count: the ids it can write are 0 .. count-1
  sentencepiece::SentencePieceProcessor sp;
  load_model(sp, model, "--model");
  std::cout << sp.GetPieceSize() << "\n";
}

void decode(const std::string& model) {
  sentencepiece::SentencePieceProcessor sp;
  load_model(sp, model, "--model");
  std::vector<int> ids;
  std::stringstream in(read_stdin());
  for (std::string item; in >> item;) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > std::numeric_limits<int>::max())
      throw InputError("decode: '" + item + "' is not a token id (a non-negative integer)");
    ids.push_back(static_cast<int>(v));
  }
  // Ids past the model's pieces (a padded vocabulary: the model has rows the tokenizer never writes, and a
  // barely trained one may sample them) decode as the unknown piece (" \u2047 "), as a char vocabulary's
  // decode as '?'; without an unknown piece, as '?' between the runs of real pieces.
  const int pieces = sp.GetPieceSize();
  std::string text;
  auto decode_run = [&](const std::vector<int>& run) {
    std::string part;
    const auto st = sp.Decode(run, &part);
    if (!st.ok()) throw std::runtime_error("sentencepiece: " + st.ToString());
    text += part;
  };
  if (sp.unk_id() >= 0) {
    for (auto& id : ids)
      if (id >= pieces) id = sp.unk_id();
    decode_run(ids);
  } else {
    std::vector<int> run;
    for (int id : ids) {
      if (id < pieces) {
        run.push_back(id);
        continue;
      }
      decode_run(run);
      run.clear();
      text += "?";
    }
    decode_run(run);
  }
  std::cout << text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"poslab-tokenize: SentencePiece for poslab (train/apply a model, encode, decode)"};
  app.require_subcommand(1);
  TokenizeOptions t;
  auto* tok = app.add_subcommand("tokenize", "Write train.bin, val.bin, meta.json and tokenizer.model from text files");
  tok->add_option("--input,-i", t.inputs, "UTF-8 text files (one document each)");
  tok->add_option("--out,-o", t.out, "Output directory (new, or empty)");
  tok->add_option("--vocab-size", t.vocab_size,
                  "Train a SentencePiece model of this many pieces (260 to 1000000; a text needs its 256 byte "
                  "pieces, 3 specials and its distinct characters)");
  tok->add_option("--model-type", t.model_type, "bpe or unigram")->check(CLI::IsMember({"bpe", "unigram"}));
  tok->add_option("--tokenizer", t.tokenizer, "Apply this SentencePiece .model instead of training one");
  tok->add_option("--val-fraction", t.val_fraction, "Tail fraction of the text held out for validation");
  tok->add_flag("--from-config", t.from_config, "Errors name poslab's config keys (poslab itself passes this)")->group("");
  std::string model, source = "stdin";
  auto* enc = app.add_subcommand("encode", "Text on stdin -> ids on stdout");
  enc->add_option("--model", model, "SentencePiece .model")->required();
  enc->add_option("--source", source, "How errors name the text");
  auto* dec = app.add_subcommand("decode", "Ids on stdin -> text on stdout");
  dec->add_option("--model", model, "SentencePiece .model")->required();
  auto* cnt = app.add_subcommand("pieces", "The model's count of pieces on stdout");
  cnt->add_option("--model", model, "SentencePiece .model")->required();
  try {
    app.parse(argc, argv);
    if (*tok) tokenize(t);
    if (*enc) encode(model, source);
    if (*dec) decode(model);
    if (*cnt) pieces(model);
  } catch (const Interrupted& e) {
    std::cerr << "\nposlab: tokenize: interrupted (" << (e.signal == SIGINT ? "SIGINT" : "SIGTERM") << "); nothing written to "
              << t.out << "\n";
    return 128 + e.signal;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "poslab: error: tokenize: " << e.what() << " (see poslab tokenize --help)\n";
    return 2;
  } catch (const InputError& e) {
    std::cerr << "poslab: error: " << e.what() << "\n";
    return 2;
  } catch (const fs::filesystem_error& e) {
    std::cerr << "poslab: error: " << e.path1().string() << ": " << e.code().message() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "poslab: failed: tokenize: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
