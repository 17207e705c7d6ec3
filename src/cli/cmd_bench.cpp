// poslab bench: throughput, step times, memory and MFU of a config, measured after warm-up; or,
// with --generate N, generation tokens/s with and without the KV cache.
#include <filesystem>
#include <iostream>

#include "bench/benchmark.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "util/files.h"
#include "util/scripts.h"

namespace poslab::cli {

// A benchmark of more steps than this is a typo (2^31 overflowed the step count and crashed).
constexpr int64_t kMaxBenchSteps = 10'000'000;

void add_bench(CLI::App& app) {
  struct Opts {
    std::string config, json_out, precision;
    std::vector<std::string> sets;
    int steps = 50, warmup = 10, threads = -1, generate = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("bench", "Measure training/eval tokens/s, step times, peak memory and MFU");
  cmd->add_option("--config,-c", o->config, "Config file (configs/bench/*.json)")->required();
  cmd->add_option("--set,-s", o->sets, "Override a key (repeatable)");
  auto* steps_opt = cmd->add_option("--steps", o->steps, "Timed training steps (default 50)")->check(positive_integer());
  auto* warmup_opt = cmd->add_option("--warmup", o->warmup, "Untimed steps first (default 10)")
                         ->check(integer_at_least(0, "0 or a positive integer"));
  cmd->add_option("--threads", o->threads, "Intra-op threads (default: the config's, else poslab's default)")
      ->check(positive_integer());
  // auto as train.precision takes it: bf16 where this CPU's bf16 products are clearly faster (a config
  // that sets fp32 or bf16 is measured in auto's choice this way).
  auto* precision_opt = cmd->add_option("--precision", o->precision, "fp32|bf16|auto (default: the config's)")
                            ->check(CLI::IsMember({"fp32", "bf16", "auto"}));
  cmd->add_option("--json", o->json_out, "Also write the results as JSON to this file");
  cmd->add_option("--generate", o->generate,
                  "Instead: generation tokens/s for N greedy tokens, with the KV cache and with full recompute")
      ->check(positive_integer());
  cmd->callback([o, steps_opt, warmup_opt, precision_opt] {
    // Generation runs the model as `sample` does (fp32, no training steps): flags of the training benchmark
    // would be ignored without a word.
    if (o->generate > 0)
      for (const auto* opt : {steps_opt, warmup_opt, precision_opt})
        if (opt->count() > 0)
          throw ConfigError("bench: " + opt->get_name() + " applies to the training benchmark, not to --generate " +
                            "(generation runs fp32, as sample does)");
    if (static_cast<int64_t>(o->steps) + o->warmup > kMaxBenchSteps)
      throw ConfigError("bench: --steps + --warmup must be at most " + std::to_string(kMaxBenchSteps) + ", got " +
                        std::to_string(static_cast<int64_t>(o->steps) + o->warmup));
    if (!o->json_out.empty()) {
      check_output_path(o->json_out, "--json", {});  // before the benchmark, not after
      std::error_code ec;
      if (std::filesystem::equivalent(o->json_out, o->config, ec))
        throw ConfigError("--json " + o->json_out + ": is the --config file; it would be written over");
    }
    auto sets = o->sets;
    if (o->threads > 0) sets.push_back("train.threads=" + std::to_string(o->threads));
    if (!o->precision.empty()) sets.push_back("train.precision=" + o->precision);
    Config c = load_config(o->config, sets);
    become_training_process();
    const bool gen = o->generate > 0;
    auto result = gen ? run_generation_benchmark(c, o->generate) : run_benchmark(c, BenchOptions{o->steps, o->warmup});
    std::cout << (gen ? format_generation_benchmark(result) : format_benchmark(result));
    if (!o->json_out.empty()) write_file_atomic(o->json_out, result.dump(2) + "\n");
  });
}

}  // namespace poslab::cli
