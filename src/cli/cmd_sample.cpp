// poslab sample: generate text from a trained run (greedy or with temperature / top-k).
#include <iostream>

#include "cli/commands.h"
#include "train/run_dir.h"

namespace poslab::cli {

void add_sample(CLI::App& app) {
  struct Opts {
    std::string run, prompt;
    int tokens = 200, top_k = 0, seed = 1;
    double temperature = 1.0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("sample", "Generate from a trained run");
  cmd->add_option("--run,-r", o->run, "Run directory")->required();
  cmd->add_option("--prompt,-p", o->prompt, "Prompt text (characters must be in the run's vocabulary)")->required();
  cmd->add_option("--tokens,-n", o->tokens, "Tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", o->temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", o->top_k, "Sample among the k likeliest (0 = all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->seed, "Sampling seed");
  cmd->callback([o] {
    auto run = load_run(o->run);
    torch::manual_seed(o->seed);
    torch::InferenceMode guard;
    auto ids = run.tokenizer.encode(o->prompt, "--prompt");
    if (ids.empty()) throw ConfigError("--prompt: must not be empty");
    auto idx = torch::tensor(ids, torch::kLong).unsqueeze(0);  // (1, T)
    const int64_t limit = run.model->pos->max_positions();
    std::cout << o->prompt << std::flush;
    for (int i = 0; i < o->tokens; ++i) {
      // Encodings with a bounded table see only the last max_positions tokens.
      auto context = limit > 0 && idx.size(1) > limit ? idx.slice(1, idx.size(1) - limit) : idx;
      auto logits = run.model->forward(context).select(1, context.size(1) - 1);  // (1, V)
      torch::Tensor next;
      if (o->temperature == 0) {
        next = logits.argmax(-1, /*keepdim=*/true);
      } else {
        logits = logits / o->temperature;
        if (o->top_k > 0 && o->top_k < logits.size(-1)) {
          auto kth = std::get<0>(logits.topk(o->top_k)).select(-1, o->top_k - 1).unsqueeze(-1);
          logits = logits.masked_fill(logits < kth, -INFINITY);
        }
        next = torch::multinomial(torch::softmax(logits, -1), 1);
      }
      idx = torch::cat({idx, next}, 1);
      std::cout << run.tokenizer.decode({next.item<int64_t>()}) << std::flush;
    }
    std::cout << "\n";
  });
}

}  // namespace poslab::cli
