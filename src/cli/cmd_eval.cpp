// poslab eval: a run's loss, accuracy and exact match per length, and its per-position curve.
#include <filesystem>

#include "cli/commands.h"
#include "cli/validators.h"
#include "eval/evaluator.h"
#include "train/run_dir.h"
#include "util/files.h"

namespace poslab::cli {

void add_eval(CLI::App& app) {
  struct Opts {
    std::string run, lengths;
    int batches = 0, batch_size = 0, stride = 0, tokens = 0;
    RopeScalingFlags rope_scaling;
    std::string tag;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "eval",
      "Evaluate a run at several lengths; writes RUN/eval.json. Text: every length and both protocols score "
      "the same validation targets (the last --tokens of the split, all of it by default): 'windows' cuts them "
      "into windows of the length, 'sliding' moves a window of the length by --stride and scores its last "
      "--stride targets");
  cmd->add_option("--run,-r", o->run, "Run directory")->required();
  // Given empty (--lengths "") is an error, not the default: counted, not tested for emptiness.
  auto* lengths_opt = cmd->add_option("--lengths,-l", o->lengths,
                  "Comma-separated lengths: items per example for tasks, tokens for text (default: the run's "
                  "eval.lengths, else 1x, 2x, 4x and 8x its training length)");
  cmd->add_option("--tokens", o->tokens,
                  "Text: validation targets scored at every length, the last ones of the split (default: the run's "
                  "eval.tokens; 0 there = the whole split)")
      ->check(positive_integer());
  cmd->add_option("--batches", o->batches, "Tasks: batches of examples per length (default: the run's eval.batches)")
      ->check(positive_integer());
  cmd->add_option("--batch-size", o->batch_size,
                  "Examples (tasks) or windows (text) per batch; memory does not grow with it, long windows run a "
                  "few at a time (default: the run's eval.batch_size)")
      ->check(positive_integer());
  cmd->add_option("--stride", o->stride,
                  "Text: sliding-window stride in tokens, capped at each length (eval.json records the stride used; "
                  "default: the run's eval.stride; 0 there = half the length)")
      ->check(positive_integer());
  add_rope_scaling_flags(cmd, o->rope_scaling);
  cmd->add_option("--set,-s", o->sets, "Override an eval key for this evaluation: --set eval.rope_scaling.kind=yarn");
  cmd->add_option("--tag", o->tag, "Write RUN/eval-TAG.json instead of RUN/eval.json (letters, digits, '_', '-', '.')");
  auto* tag_option = cmd->get_option("--tag");
  cmd->callback([o, tag_option, lengths_opt] {
    if (tag_option->count() > 0 && o->tag.empty())
      throw ConfigError("eval: --tag must not be empty (leave it out to write RUN/eval.json)");
    if (!o->tag.empty() && o->tag.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
                               std::string::npos)
      throw ConfigError("eval: --tag '" + o->tag + "' may hold only letters, digits, '_', '-' and '.'");
    // An option of the other kind of run would be recorded in eval.json's settings as if it had been used. Only
    // the run's data kind is read here, and only when one is given; the evaluation checks the run itself.
    if ((o->stride > 0 || o->tokens > 0 || o->batches > 0) && file_exists(RunPaths{o->run}.config())) {
      const nlohmann::json rc = read_json_file(RunPaths{o->run}.config());
      const nlohmann::json data = rc.is_object() ? rc.value("data", nlohmann::json::object()) : nlohmann::json::object();
      const bool task = data.is_object() && data.value("kind", "") == "task";
      for (const auto& [given, flag] : {std::pair{o->stride > 0, "--stride"}, std::pair{o->tokens > 0, "--tokens"}})
        if (given && task)
          throw ConfigError(std::string("eval: ") + flag + " applies to text runs; " + o->run + " trained on data.task " +
                            data.value("task", "?") + " (its lengths count items; --batches sets how many examples)");
      if (o->batches > 0 && !task)
        throw ConfigError("eval: --batches applies to task runs; " + o->run + " trained on text, where every length "
                          "scores the same validation targets (--tokens sets how many)");
    }
    EvalOptions eo{{}, o->batches, o->batch_size, o->stride, o->tokens};
    if (lengths_opt->count() > 0) eo.lengths = parse_lengths(o->lengths, "--lengths");
    eo.overrides = o->sets;
    eo.tag = o->tag;
    eo.rope_scaling = rope_scaling_from_flags(o->rope_scaling, "eval");
    check_run_writable(o->run, std::filesystem::path(RunPaths{o->run}.eval(o->tag)).filename().string());
    use_newest_blas_kernels();
    std::cout << format_eval_table(evaluate_run(o->run, eo)) << "written: " << RunPaths{o->run}.eval(o->tag) << "\n";
  });
}

void add_rope_scaling_flags(CLI::App* cmd, RopeScalingFlags& flags) {
  cmd->add_option("--rope-scaling", flags.kind,
                  "Rotary runs: none|linear|ntk|dynamic_ntk|yarn frequency scaling at evaluation (default: the run's "
                  "eval.rope_scaling)")
      ->check(CLI::IsMember(kRopeScalingKinds));
  flags.factor_option = cmd->add_option("--factor", flags.factor,
                                        "--rope-scaling factor S, e.g. the evaluated length / the training length: above 1 "
                                        "(dynamic_ntk: 1 or more; required with --rope-scaling other than none)");
  flags.length_option = cmd->add_option("--original-length", flags.original_length,
                                        "--rope-scaling: the training length L in tokens (default: the run's: "
                                        "model.block_size, a task's longest example)")
                            ->check(positive_integer());
}

std::optional<RopeScalingConfig> rope_scaling_from_flags(const RopeScalingFlags& f, const std::string& command) {
  const bool factor_given = f.factor_option && f.factor_option->count() > 0;
  const bool length_given = f.length_option && f.length_option->count() > 0;
  if (f.kind.empty()) {
    if (factor_given || length_given) throw ConfigError(command + ": --factor and --original-length need --rope-scaling KIND");
    return std::nullopt;
  }
  // With none they would be ignored, unsaid.
  if (f.kind == "none" && (factor_given || length_given))
    throw ConfigError(command + ": --rope-scaling none scales nothing: drop --factor and --original-length, or name a kind");
  if (f.kind != "none" && !factor_given)
    throw ConfigError(command + ": --rope-scaling " + f.kind + " needs --factor S (above 1" +
                      (f.kind == "dynamic_ntk" ? ", or 1" : "") + ")");
  if (!(f.factor >= 1)) throw ConfigError(command + ": --factor must be >= 1, got " + number_text(f.factor));
  // As a config's eval.rope_scaling (and pe) refuse it: a variant labelled with a kind that changes nothing.
  if ((f.kind == "linear" || f.kind == "ntk" || f.kind == "yarn") && f.factor == 1.0)
    throw ConfigError(command + ": --factor: rope scaling '" + f.kind + "' needs a factor above 1 (1 scales nothing), e.g. "
                      "the evaluated length over the training length");
  return RopeScalingConfig{f.kind, f.factor, f.original_length};
}

}  // namespace poslab::cli
