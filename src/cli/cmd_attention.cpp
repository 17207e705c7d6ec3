// poslab attention: what a trained run's attention does in and past its training length: mean
// distance, entropy and first-token share per layer and head at each length, and one example's maps.
#include <iostream>

#include "cli/commands.h"
#include "config/config.h"
#include "eval/attention_stats.h"
#include "util/files.h"
#include "util/scripts.h"

namespace poslab::cli {

void add_attention(CLI::App& app) {
  struct Opts {
    std::string run, lengths;
    AttentionOptions stats;
    bool no_plot = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("attention", "Attention statistics per layer and head at several lengths; writes "
                                              "RUN/attention.json, attention.png and attention_maps.png");
  cmd->add_option("--run,-r", o->run, "Run directory")->required();
  // Given empty (--lengths "") is an error, not the default: counted, not tested for emptiness.
  auto* lengths_opt = cmd->add_option("--lengths,-l", o->lengths,
                  "Comma-separated lengths: items per example for tasks, tokens for text (default: the config's)");
  cmd->add_option("--example", o->stats.example, "Which of the --sequences validation sequences gives the maps, 0 to --sequences - 1 (default 0, the first)");
  cmd->add_option("--sequences", o->stats.sequences, "Validation sequences averaged per length (default 8)");
  cmd->add_option("--map-size", o->stats.map_size, "Maps are pooled to at most this many positions a side (default 64)");
  cmd->add_flag("--no-plot", o->no_plot, "Write attention.json only");
  cmd->callback([o, lengths_opt] {
    if (lengths_opt->count() > 0) o->stats.lengths = parse_lengths(o->lengths, "--lengths");
    if (o->stats.example < 0) throw ConfigError("--example: must be a non-negative integer");
    if (o->stats.sequences <= 0) throw ConfigError("--sequences: must be a positive integer");
    if (o->stats.map_size <= 0) throw ConfigError("--map-size: must be a positive integer");
    check_run_writable(o->run, "attention.json");
    use_newest_blas_kernels();
    attention_run(o->run, o->stats);
    std::cout << "written: " << o->run << "/attention.json\n";
    const std::string stats_png = o->run + "/attention.png", maps_png = o->run + "/attention_maps.png";
    // Pictures drawn from the JSON before: they no longer show it.
    for (const auto& path : remove_stale_files({stats_png, maps_png}))
      if (o->no_plot) std::cout << "removed: " << path << " (drawn from the previous attention.json)\n";
    if (o->no_plot) return;
    const std::string script = find_script("plots");
    if (script.empty()) throw std::runtime_error("attention.json is written, but scripts/plots was not found (set POSLAB_SCRIPTS)");
    if (const int rc = run_python_script(script, {"attention", o->run + "/attention.json", stats_png, maps_png}); rc != 0)
      throw std::runtime_error("attention.json is written, but the plots failed: scripts/plots " + plot_failure(rc));
    std::cout << "written: " << stats_png << ", " << maps_png << "\n";
  });
}

}  // namespace poslab::cli
