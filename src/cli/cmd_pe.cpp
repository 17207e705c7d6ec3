// poslab pe: print an encoding itself (additive table, rope angles, alibi slopes and bias).
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "model/positional/positional.h"

namespace poslab::cli {

static void print_csv(const std::string& name, const torch::Tensor& t) {
  std::cout << "# " << name << " " << t.sizes() << "\n";
  auto flat = t.dim() == 1 ? t.unsqueeze(0) : t.dim() == 3 ? t.flatten(0, 1) : t;  // (heads*n, n) for alibi bias
  auto a = flat.to(torch::kDouble).contiguous();
  auto acc = a.accessor<double, 2>();
  if (t.dim() == 3) std::cout << "head,row,";
  for (int64_t j = 0; j < a.size(1); ++j) std::cout << (j ? "," : "") << "c" << j;
  std::cout << "\n" << std::setprecision(7);
  for (int64_t i = 0; i < a.size(0); ++i) {
    if (t.dim() == 3) std::cout << i / t.size(1) << "," << i % t.size(1) << ",";
    for (int64_t j = 0; j < a.size(1); ++j) std::cout << (j ? "," : "") << acc[i][j];
    std::cout << "\n";
  }
}

static nlohmann::json to_nested(const torch::Tensor& t) {
  if (t.dim() == 0) return t.item<double>();
  nlohmann::json out = nlohmann::json::array();
  for (int64_t i = 0; i < t.size(0); ++i) out.push_back(to_nested(t[i]));
  return out;
}

void add_pe(CLI::App& app) {
  struct Opts {
    std::string kind, format = "csv";
    int64_t positions = 0, dim = 0, heads = 1, bits = 16, block_size = 0;
    double base = 10000, scale = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("pe", "Print a positional encoding: additive table (N x D), rope angles (N x D/2), "
                                       "or alibi slopes and (H, N, N) bias");
  cmd->add_option("--kind,-k", o->kind, "none|index|binary|sinusoidal|learned|rope|alibi")->required();
  cmd->add_option("--positions,-n", o->positions, "Number of positions N")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--dim,-d", o->dim, "Model width D (for rope: the head size)")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--heads", o->heads, "Heads H (alibi)")->check(CLI::PositiveNumber);
  cmd->add_option("--base", o->base, "Base for sinusoidal and rope (default 10000)");
  cmd->add_option("--scale", o->scale, "Multiplier of additive kinds (default 0 = as in a model: 1 for index, "
                                      "1/sqrt(D) for sinusoidal and binary; 1 prints the bare formula)");
  cmd->add_option("--bits", o->bits, "Bits for binary (default 16)");
  cmd->add_option("--format,-f", o->format, "csv|json")->check(CLI::IsMember({"csv", "json"}));
  cmd->callback([o] {
    // Build through the same config validation and factory that training uses.
    nlohmann::json j = {{"model",
                         {{"n_embd", o->dim * (o->kind == "rope" ? o->heads : 1)},
                          {"n_head", o->heads},
                          {"block_size", o->positions},
                          {"pos_encoding", {{"kind", o->kind}, {"base", o->base}, {"scale", o->scale}, {"bits", o->bits}}}}}};
    Config c = config_from_json(j);
    torch::manual_seed(c.seed);
    auto pe = make_positional({c.model.pos_encoding, c.model.n_embd, c.model.n_head, c.model.block_size});
    auto tensors = pe->inspect(o->positions, o->dim);
    const double scale = o->scale > 0 ? o->scale : default_additive_scale(o->kind, o->dim);
    if (o->format == "json") {
      nlohmann::json out = {{"kind", o->kind}, {"family", pe->family()}, {"positions", o->positions}, {"dim", o->dim}};
      if (pe->family() == "additive" && o->kind != "learned") out["scale"] = scale;
      for (const auto& [name, t] : tensors) out[name] = to_nested(t.to(torch::kDouble));
      std::cout << out.dump() << "\n";
    } else {
      if (pe->family() == "additive" && o->kind != "learned") std::cout << "# scale " << scale << "\n";
      for (const auto& [name, t] : tensors) print_csv(name, t);
    }
  });
}

}  // namespace poslab::cli
