// Each subcommand registers itself on the CLI11 app; main() dispatches. The commands are thin:
// they parse options and call into poslab_core.
#pragma once
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace poslab::cli {

void add_train(CLI::App& app);
void add_eval(CLI::App& app);
void add_pe(CLI::App& app);
void add_data(CLI::App& app);
void add_sample(CLI::App& app);
void add_compare(CLI::App& app);
void add_bench(CLI::App& app);
void add_fixture(CLI::App& app);
void add_attention(CLI::App& app);
void add_probe(CLI::App& app);
void add_tokenize(CLI::App& app);

// For train, compare and bench, once their input is checked and before any work: re-executes poslab
// with OMP_WAIT_POLICY=ACTIVE unless it (or the user) set it already (cli/main.cpp says why).
void become_training_process();
// For the commands that evaluate a run (eval, probe, attention): the OpenBLAS part of the above alone, so that
// their fp32 products run on the kernels training ran on; a restart only where OpenBLAS fell back to old ones.
void use_newest_blas_kernels();

// Parses "32,64,128" into positive integers; throws ConfigError naming `option` otherwise.
std::vector<int> parse_lengths(const std::string& text, const std::string& option);

// The --rope-scaling, --factor and --original-length flags of the commands that evaluate a run (eval, probe).
struct RopeScalingFlags {
  std::string kind;
  double factor = 1;
  int original_length = 0;
  // Whether each was given (a value alone cannot say: --factor 0 is a value to refuse, not an absent flag).
  const CLI::Option* factor_option = nullptr;
  const CLI::Option* length_option = nullptr;
};
void add_rope_scaling_flags(CLI::App* cmd, RopeScalingFlags& flags);
// The scaling asked for; unset without --rope-scaling. Throws ConfigError naming `command`'s flag.
std::optional<RopeScalingConfig> rope_scaling_from_flags(const RopeScalingFlags& flags, const std::string& command);

}  // namespace poslab::cli
