// poslab eval: a run's loss, accuracy and exact match per length, and its per-position curve.
#include "cli/commands.h"
#include "eval/evaluator.h"

namespace poslab::cli {

void add_eval(CLI::App& app) {
  struct Opts {
    std::string run, lengths;
    int batches = 0, batch_size = 0, stride = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("eval", "Evaluate a run at several lengths; writes RUN/eval.json");
  cmd->add_option("--run,-r", o->run, "Run directory")->required();
  cmd->add_option("--lengths,-l", o->lengths,
                  "Comma-separated lengths: items per example for tasks, tokens for text (default: the config's)");
  cmd->add_option("--batches", o->batches, "Batches per length (default: eval.batches)");
  cmd->add_option("--batch-size", o->batch_size, "Examples or windows per batch (default: eval.batch_size)");
  cmd->add_option("--stride", o->stride, "Text: sliding-window stride (default: half the length)");
  cmd->callback([o] {
    if (o->batches < 0 || o->batch_size < 0 || o->stride < 0)
      throw ConfigError("eval: --batches, --batch-size and --stride must be positive");
    EvalOptions eo{{}, o->batches, o->batch_size, o->stride};
    if (!o->lengths.empty()) eo.lengths = parse_lengths(o->lengths, "--lengths");
    std::cout << format_eval_table(evaluate_run(o->run, eo)) << "written: " << o->run << "/eval.json\n";
  });
}

}  // namespace poslab::cli
