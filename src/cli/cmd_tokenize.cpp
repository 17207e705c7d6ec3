// poslab tokenize: SentencePiece over text files into token files. The work is done by the
// poslab-tokenize executable (it links libsentencepiece, poslab does not; data/sentencepiece.h):
// this command replaces itself with it, so its progress and errors reach the terminal directly.
#include <unistd.h>

#include "cli/commands.h"
#include "config/config.h"
#include "data/sentencepiece.h"

namespace poslab::cli {

void add_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tokenize",
      "Train (--vocab-size N [--model-type bpe|unigram]) or apply (--tokenizer M.model) a SentencePiece model: "
      "--input FILE... --out DIR [--val-fraction 0.1] writes train.bin, val.bin, meta.json, tokenizer.model");
  cmd->allow_extras();
  cmd->set_help_flag();  // --help goes to poslab-tokenize with the rest
  cmd->callback([cmd] {
    const std::string tool = tokenize_tool();
    if (tool.empty())
      throw ConfigError("tokenize: the poslab-tokenize executable was not found beside poslab or on the PATH (it is "
                        "built where libsentencepiece-dev is installed; or set POSLAB_TOKENIZE)");
    std::vector<std::string> args{tool, "tokenize"};
    for (const auto& a : cmd->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(tool.c_str(), argv.data());
    throw std::runtime_error("tokenize: cannot run " + tool);
  });
}

}  // namespace poslab::cli
