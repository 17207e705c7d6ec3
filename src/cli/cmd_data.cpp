// poslab data: print decoded examples of what a config trains on, as text or as JSON lines that
// give each scored target's position (the tests check task generators against them).
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/validators.h"
#include "data/corpus.h"

namespace poslab::cli {

void add_data(CLI::App& app) {
  struct Opts {
    std::string config, split = "train", format = "text";
    std::vector<std::string> sets;
    int n = 5;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("data", "Print decoded training or validation examples of a config");
  cmd->add_option("--config,-c", o->config, "Config file")->required();
  cmd->add_option("--set,-s", o->sets, "Override a key (repeatable)");
  cmd->add_option("--split", o->split, "train|val (default train)")->check(CLI::IsMember({"train", "val"}));
  cmd->add_option("--n", o->n, "Examples to print (default 5)")->check(positive_integer());
  cmd->add_option("--format", o->format,
                  "text (input >> scored targets) or jsonl (one {\"input\", \"targets\": [[position, target], ...]} a line)")
      ->check(CLI::IsMember({"text", "jsonl"}));
  cmd->callback([o] {
    Config c = load_config(o->config, o->sets);
    c.eval.lengths.clear();  // examples are training windows: the split need not hold an evaluation's longest
    auto corpus = make_corpus(c);
    Rng rng(static_cast<uint64_t>(c.seed) ^ (o->split == "val" ? 0x5EEDFACEULL : 0));
    auto batch = corpus->batch(o->split == "val" ? Split::Val : Split::Train, o->n, rng);
    const auto& tok = corpus->tokenizer();
    const std::string source = c.data.kind == "task"     ? "task " + c.data.task
                               : c.data.kind == "tokens" ? "tokens " + (c.data.dir.empty() ? c.data.train_path : c.data.dir)
                                                         : "text " + c.data.path;
    if (o->format == "text")
      std::cout << "# " << source << ", vocabulary "
              << tok.size() << ", scored targets shown after '>>'\n";
    for (int64_t b = 0; b < batch.x.size(0); ++b) {
      auto x = batch.x[b], y = batch.y[b];
      std::vector<int64_t> ids(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel()), scored;
      for (int64_t t = 0; t < y.numel(); ++t)
        if (y[t].item<int64_t>() >= 0) scored.push_back(y[t].item<int64_t>());
      // Bare ids come out of decode each after a space, for sample's stream: here the list needs no lead.
      const auto text = [&](const std::vector<int64_t>& v) {
        std::string t = tok.decode(v);
        return tok.ids_only() && !t.empty() ? t.substr(1) : t;
      };
      std::string input = text(ids);
      if (corpus->is_task()) input = input.substr(0, input.find_last_not_of('_') + 1);
      if (o->format == "jsonl") {
        nlohmann::json targets = nlohmann::json::array();
        for (int64_t t = 0; t < y.numel(); ++t)
          if (y[t].item<int64_t>() >= 0) targets.push_back({t, text({y[t].item<int64_t>()})});
        std::cout << nlohmann::json{{"input", input}, {"targets", targets}}.dump() << "\n";
        continue;
      }
      std::cout << input << "  >>" << (corpus->is_task() ? text(scored) : "(all " + std::to_string(scored.size()) + " next tokens)") << "\n";
    }
  });
}

}  // namespace poslab::cli
