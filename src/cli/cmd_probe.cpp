// poslab probe: does a trained run retrieve information past its training length? Passkey retrieval
// (a key hidden at a depth in filler) per length and depth, or mqar (a run trained on multi-query
// associative recall) per length on two axes; writes RUN/probe-<task>.json and a heatmap.
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/validators.h"
#include "config/config.h"
#include "probe/probe.h"
#include "train/run_dir.h"
#include "util/files.h"
#include "util/scripts.h"

namespace poslab::cli {

static std::vector<double> parse_depths(const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    double v = -1;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || !(v >= 0 && v <= 1))
      throw ConfigError("--depths: '" + item + "' is not a fraction in [0, 1] (expected e.g. 0,0.25,0.5,0.75,1)");
    out.push_back(v);
  }
  if (out.empty()) throw ConfigError("--depths: expected a comma-separated list of fractions in [0, 1]");
  if (text.back() == ',') throw ConfigError("--depths: '" + text + "' ends with a comma (expected e.g. 0,0.25,0.5,0.75,1)");
  return out;
}

void add_probe(CLI::App& app) {
  struct Opts {
    std::string run, lengths, depths;
    ProbeOptions probe;
    RopeScalingFlags rope_scaling;
    bool no_controls = false, no_plot = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("probe", "Retrieval past the training length (passkey, mqar); writes RUN/probe-TASK.json and "
                                          "RUN/probe-TASK.png");
  cmd->add_option("--run,-r", o->run, "Run directory")->required();
  auto* task_opt = cmd->add_option("--task,-t", o->probe.task,
                  "Probe: passkey (a key hidden in filler, any run whose vocabulary has digits) or mqar (a run trained on "
                  "data.task mqar: distance and load axes) (default: mqar for a run trained on data.task mqar, else passkey)");
  // Given empty (--lengths "") is an error, not the default: counted, not tested for emptiness.
  auto* lengths_opt = cmd->add_option("--lengths,-l", o->lengths, "Comma-separated document lengths in tokens (default: passkey: the run's eval lengths; mqar: 1, 2, 4 and 8 "
                  "times its training length in tokens)");
  auto* depths_opt = cmd->add_option("--depths", o->depths,
                  "Comma-separated needle depths in [0, 1], the fraction of the filler before the needle (default 0,0.25,0.5,0.75)");
  cmd->add_option("--trials", o->probe.trials, "Documents per (length, depth) cell (default 50)");
  cmd->add_option("--haystack", o->probe.haystack, "Filler: noise (the reference's sentences) or text (held-out text of "
                                                   "the run's corpus) (default noise)");
  // 0 stands for "the run's" inside the options an experiment passes; on the command line leaving the flag out says it.
  cmd->add_option("--digits", o->probe.digits, "Key digits, 1 to 18 (default: the run's data.probes.passkey.digits, 5 unless set)")
      ->check(integer_at_least(1, "between 1 and 18 (leave it out for the run's own)"));
  cmd->add_option("--template", o->probe.template_name,
                  "auto|reference|compact (default: the run's data.probes.passkey.template, auto)");
  cmd->add_flag("--no-needle", o->probe.no_needle, "Remove the needle from every cell: chance level");
  cmd->add_flag("--no-controls", o->no_controls,
                "Skip the control rows (depth 1, the needle next to the question; and no needle) at each length");
  cmd->add_option("--threshold", o->probe.threshold,
                  "Effective length: the lower 95% Wilson bound of exact match must reach this (default 0.85)");
  cmd->add_option("--seed", o->probe.seed, "Seed of the documents (default 1)");
  add_rope_scaling_flags(cmd, o->rope_scaling);
  cmd->add_flag("--no-plot", o->no_plot, "Write the JSON only");
  cmd->callback([o, lengths_opt, depths_opt, task_opt] {
    // A run trained on mqar has no characters to write a passkey document in: its own probe is the default.
    if (task_opt->count() == 0 && is_run_dir(o->run)) try {
        const Config rc = RunPaths{o->run}.read_config();
        if (rc.data.kind == "task" && rc.data.task == "mqar") o->probe.task = "mqar";
      } catch (const ConfigError&) {
        // probe_run names what is wrong with the run
      }
    if (lengths_opt->count() > 0) o->probe.lengths = parse_lengths(o->lengths, "--lengths");
    if (depths_opt->count() > 0) o->probe.depths = parse_depths(o->depths);
    o->probe.controls = !o->no_controls;
    o->probe.rope_scaling = rope_scaling_from_flags(o->rope_scaling, "probe");
    o->probe.strict_lengths = lengths_opt->count() > 0;  // a length asked for must fit the template
    const std::string json_path = o->run + "/probe-" + o->probe.task + ".json";
    const std::string png = o->run + "/probe-" + o->probe.task + ".png";
    const std::string script = o->no_plot ? "" : find_script("plots");
    if (!o->no_plot && script.empty())
      throw ConfigError("probe: scripts/plots not found for the heatmap (set POSLAB_SCRIPTS, or pass --no-plot)");
    check_run_writable(o->run, "probe-" + o->probe.task + ".json");
    use_newest_blas_kernels();
    const auto result = probe_run(o->run, o->probe);
    std::cout << format_probe_table(result) << "written: " << json_path << "\n";
    // A heatmap drawn from the JSON before: it no longer shows it.
    for (const auto& path : remove_stale_files({png}))
      if (o->no_plot) std::cout << "removed: " << path << " (drawn from the previous " << json_path << ")\n";
    if (o->no_plot) return;
    if (const int rc = run_python_script(script, {"probe", json_path, png}); rc != 0)
      throw std::runtime_error(json_path + " is written, but the heatmap failed: scripts/plots " + plot_failure(rc));
    std::cout << "written: " << png << "\n";
  });
}

}  // namespace poslab::cli
