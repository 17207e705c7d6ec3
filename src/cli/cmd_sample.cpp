// poslab sample: generate text from a trained run (greedy or with temperature / top-k), with a KV
// cache where the encoding allows one (--no-cache recomputes the whole prefix at every token).
#include <iostream>

#include "cli/commands.h"
#include "cli/validators.h"
#include "model/generate.h"
#include "train/run_dir.h"

namespace poslab::cli {

void add_sample(CLI::App& app) {
  struct Opts {
    std::string run, prompt;
    int tokens = 200, top_k = 0, seed = 1;
    double temperature = 1.0;
    bool no_cache = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("sample", "Generate from a trained run");
  cmd->add_option("--run,-r", o->run, "Run directory")->required();
  cmd->add_option("--prompt,-p", o->prompt, "Prompt text (characters must be in the run's vocabulary; ids \"12 7 301\" for token files without a tokenizer)")->required();
  cmd->add_option("--tokens,-n", o->tokens, "Tokens to generate (default 200)")->check(positive_integer());
  cmd->add_option("--temperature", o->temperature, "Sampling temperature, 0 = greedy (default 1)")
      ->check(number_at_least(0, false, "a number >= 0 (0 = greedy)"));
  cmd->add_option("--top-k", o->top_k, "Sample among the k likeliest (default 0 = all)")
      ->check(integer_at_least(0, "0 (all) or a positive integer"));
  cmd->add_option("--seed", o->seed, "Sampling seed (default 1)");
  cmd->add_flag("--no-cache", o->no_cache, "Recompute the whole prefix for every token instead of keeping a KV cache");
  cmd->callback([o] {
    auto run = load_run(o->run);
    torch::manual_seed(o->seed);
    auto ids = run.tokenizer.encode(o->prompt, "--prompt");
    if (ids.empty()) throw ConfigError("--prompt: must not be empty");
    std::cout << o->prompt << std::flush;
    GenerateOptions g{o->tokens, o->temperature, o->top_k, !o->no_cache};
    // Characters print as they come; SentencePiece pieces are decoded together at the end (a piece
    // alone may be half a character's bytes).
    std::vector<int64_t> generated;
    generate(run.model, ids, g, [&](int64_t token, const torch::Tensor&) {
      if (run.tokenizer.decodes_per_token()) std::cout << run.tokenizer.decode({token}) << std::flush;
      else generated.push_back(token);
    });
    if (!generated.empty()) std::cout << run.tokenizer.decode(generated);
    std::cout << "\n";
  });
}

}  // namespace poslab::cli
