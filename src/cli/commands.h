// Each subcommand registers itself on the CLI11 app; main() dispatches. The commands are thin:
// they parse options and call into poslab_core.
#pragma once
#include <CLI/CLI.hpp>

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

// Parses "32,64,128" into positive integers; throws ConfigError naming `option` otherwise.
std::vector<int> parse_lengths(const std::string& text, const std::string& option);

}  // namespace poslab::cli
