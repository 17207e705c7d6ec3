// poslab pe: print an encoding itself (additive table, rope angles, alibi slopes and bias, t5 buckets,
// kerple/sandwich bias, fire's MLP input, xpos scales, randomized positions).
#include <iomanip>
#include <iostream>
#include <sstream>

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
  if (t.dim() == 0) return t.is_floating_point() ? nlohmann::json(t.item<double>()) : nlohmann::json(t.item<int64_t>());
  nlohmann::json out = nlohmann::json::array();
  for (int64_t i = 0; i < t.size(0); ++i) out.push_back(to_nested(t[i]));
  return out;
}

// "r1=0.5,r2=1" -> {r1: 0.5, r2: 1}; anything else is a one-line error naming --param.
static InspectParams parse_params(const std::string& text) {
  InspectParams out;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto eq = item.find('=');
    size_t used = 0;
    double value = 0;
    try {
      if (eq != std::string::npos && eq > 0) value = std::stod(item.substr(eq + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (eq == std::string::npos || eq == 0 || used == 0 || used != item.size() - eq - 1)
      throw ConfigError("--param '" + item + "': expected name=number[,name=number...]");
    out[item.substr(0, eq)] = value;
  }
  return out;
}

// Config errors name config keys; pe's users typed flags, so name those instead.
static ConfigError as_flag_error(const ConfigError& e) {
  static const std::vector<std::pair<std::string, std::string>> flags = {
      {"model.pos_encoding.randomize.max_position", "--randomize"}, {"model.pos_encoding.kind", "--kind"},
      {"model.pos_encoding.base", "--base"}, {"model.pos_encoding.scale", "--scale"},
      {"model.pos_encoding.bits", "--bits"}, {"model.n_embd", "--dim"}, {"model.n_head", "--heads"},
      {"model.block_size", "--positions"}};
  std::string what = e.what();
  for (const auto& [key, flag] : flags)
    for (auto at = what.find(key); at != std::string::npos; at = what.find(key)) what.replace(at, key.size(), flag);
  return ConfigError(what);
}

void add_pe(CLI::App& app) {
  struct Opts {
    std::string kind, format = "csv";
    int64_t positions = 0, dim = 0, heads = 1, bits = 16, block_size = 0, randomize = 0, seed = 0;
    double base = 10000, scale = 0, factor = 1;
    std::string params, rope_scaling = "none";
    int64_t original_length = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("pe", "Print a positional encoding: additive table (N x D), rope angles (N x D/2), "
                                       "a bias (H, N, N), t5 buckets, fire's MLP input, xpos scales, randomized "
                                       "positions (docs/encodings.md)");
  std::string kinds;
  for (const auto& k : kEncodingKinds) kinds += (kinds.empty() ? "" : "|") + k;
  cmd->add_option("--kind,-k", o->kind, kinds)->required();
  cmd->add_option("--positions,-n", o->positions, "Number of positions N")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--dim,-d", o->dim, "Additive kinds: the model width D; others: the head size")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--heads", o->heads, "Heads H (bias kinds)")->check(CLI::PositiveNumber);
  cmd->add_option("--param", o->params, "Parameters to inspect at: kerple r1=..,r2=..; fire c=..,L=..");
  cmd->add_option("--randomize", o->randomize, "Print the sorted positions a randomized run draws from [0, MAX)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->seed, "Seed for --randomize (default 0)");
  cmd->add_option("--base", o->base, "Base for sinusoidal and rope (default 10000)");
  cmd->add_option("--scale", o->scale, "Multiplier of additive kinds (default 0 = as in a model: 1 for index, "
                                      "1/sqrt(D) for sinusoidal and binary; 1 prints the bare formula)");
  cmd->add_option("--bits", o->bits, "Bits for binary (default 16)");
  cmd->add_option("--rope-scaling", o->rope_scaling, "Rotary kinds: none|linear|ntk|dynamic_ntk|yarn; prints inv_freq "
                                                    "(and yarn's attention_factor)")
      ->check(CLI::IsMember(kRopeScalingKinds));
  cmd->add_option("--factor", o->factor, "--rope-scaling factor S >= 1 (default 1)");
  cmd->add_option("--original-length", o->original_length,
                  "--rope-scaling: the training length L in tokens (default: --positions)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--format,-f", o->format, "csv|json")->check(CLI::IsMember({"csv", "json"}));
  cmd->callback([o] {
    // Build through the same config validation and factory that training uses. --dim is the model
    // width of an additive kind and the head size of every other (heads do not change an additive table).
    const auto params = parse_params(o->params);
    const std::string family = encoding_family(o->kind);
    const bool additive = family == "additive";
    if (family == "rotary" && o->dim % 2 != 0)
      throw ConfigError("--dim must be even for " + o->kind + " (it rotates pairs of the head's dims), got " +
                        std::to_string(o->dim));
    nlohmann::json j = {{"model",
                         {{"n_embd", o->dim * (additive ? 1 : o->heads)},
                          {"n_head", additive ? 1 : o->heads},
                          {"block_size", o->positions},
                          {"pos_encoding",
                           {{"kind", o->kind}, {"base", o->base}, {"scale", o->scale}, {"bits", o->bits},
                            {"randomize", {{"max_position", o->randomize}}}}}}}};
    Config c;
    try {
      c = config_from_json(j);
    } catch (const ConfigError& e) {
      throw as_flag_error(e);
    }
    torch::manual_seed(c.seed);
    auto pe = make_positional({c.model.pos_encoding, c.model.n_embd, c.model.n_head, c.model.block_size});
    if (o->rope_scaling != "none") {
      if (family != "rotary")
        throw ConfigError("--rope-scaling applies to rotary kinds (rope, xpos), not --kind " + o->kind);
      if (!(o->factor >= 1)) throw ConfigError("--factor must be >= 1, got " + std::to_string(o->factor));
      pe->set_rope_scaling({o->rope_scaling, o->factor, o->original_length > 0 ? o->original_length : o->positions});
    }
    auto tensors = pe->inspect(o->positions, o->dim, params);
    if (o->randomize > 0) {
      torch::manual_seed(o->seed);
      tensors["positions"] = pe->positions(o->positions, /*training=*/true, torch::kCPU);  // (N,)
    }
    const double scale = o->scale > 0 ? o->scale : default_additive_scale(o->kind, o->dim);
    if (o->format == "json") {
      nlohmann::json out = {{"kind", o->kind}, {"family", pe->family()}, {"positions", o->positions}, {"dim", o->dim}};
      if (pe->family() == "additive" && o->kind != "learned") out["scale"] = scale;
      for (const auto& [name, t] : tensors) out[name] = to_nested(t.is_floating_point() ? t.to(torch::kDouble) : t);
      std::cout << out.dump() << "\n";
    } else {
      if (pe->family() == "additive" && o->kind != "learned") std::cout << "# scale " << scale << "\n";
      for (const auto& [name, t] : tensors) print_csv(name, t);
    }
  });
}

}  // namespace poslab::cli
