// poslab pe: print an encoding itself (additive table, rope angles, alibi slopes and bias, t5 buckets,
// kerple/sandwich bias, fire's MLP input, xpos scales, randomized positions), or draw the pictures that
// explain it (--plot: poslab computes the numbers, scripts/plots draws them).
#include <cctype>
#include <cmath>
#include <regex>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "cli/pe_size.h"
#include "cli/validators.h"
#include "model/positional/positional.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/scripts.h"
#include "util/tensor_json.h"

namespace poslab::cli {

// One table for every tensor (RFC 4180, util/csv.h): a record per value, named by its tensor and
// its indices (dim0 .. dim2, empty past the tensor's rank): "angles,3,1,,0.75". A scalar (yarn's
// attention_factor, an additive kind's scale) is one record with no indices.
static void print_csv(const std::map<std::string, torch::Tensor>& tensors) {
  std::cout << csv_record({"tensor", "dim0", "dim1", "dim2", "value"});
  char buf[64];
  for (const auto& [name, t] : tensors) {
    TORCH_CHECK(t.dim() <= 3, "pe: tensor ", name, " has ", t.dim(), " dims, more than the CSV's three");
    const bool integral = !t.is_floating_point();
    auto flat = t.detach().to(torch::kCPU, torch::kDouble).contiguous().flatten();
    const auto sizes = t.sizes().vec();
    const double* v = flat.data_ptr<double>();
    for (int64_t i = 0; i < flat.numel(); ++i) {
      std::vector<std::string> fields = {csv_quote(name), "", "", ""};
      for (int64_t d = static_cast<int64_t>(sizes.size()) - 1, rest = i; d >= 0; --d)
        fields[d + 1] = std::to_string(rest % sizes[d]), rest /= sizes[d];
      if (std::isnan(v[i])) std::snprintf(buf, sizeof buf, "nan");
      else if (std::isinf(v[i])) std::snprintf(buf, sizeof buf, v[i] > 0 ? "inf" : "-inf");
      else if (v[i] == 0) std::snprintf(buf, sizeof buf, "0");  // never "-0"
      else std::snprintf(buf, sizeof buf, integral ? "%.0f" : "%.9g", v[i]);
      fields.push_back(buf);
      std::cout << csv_record(fields);
    }
  }
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
      {"model.pos_encoding.rope_scaling.kind", "--rope-scaling"}, {"model.pos_encoding.rope_scaling.factor", "--factor"},
      {"model.pos_encoding.rope_scaling.original_length", "--original-length"},
      {"model.pos_encoding.randomize.max_position", "--randomize"}, {"model.pos_encoding.kind", "--kind"},
      {"model.pos_encoding.base", "--base"}, {"model.pos_encoding.scale", "--scale"},
      {"model.pos_encoding.bits", "--bits"}, {"model.n_embd", "--dim"}, {"model.n_head", "--heads"},
      {"model.block_size", "--positions"}, {"model.pos_encoding.plugin", "--plugin"}};
  std::string what = e.what();
  // A key is replaced whole: model.pos_encoding.scale is not the start of model.pos_encoding.scale_base.
  auto replace_all = [&](const std::string& from, const std::string& to, bool whole) {
    for (auto at = what.find(from); at != std::string::npos;) {
      const char next = at + from.size() < what.size() ? what[at + from.size()] : ' ';
      if (whole && (std::isalnum(static_cast<unsigned char>(next)) || next == '_')) {
        at = what.find(from, at + from.size());
        continue;
      }
      what.replace(at, from.size(), to);
      at = what.find(from, at + to.size());
    }
  };
  replace_all("--set model.pos_encoding.", "--option ", false);  // what --option KEY=VALUE became
  for (const auto& [key, flag] : flags) replace_all(key, flag, true);
  replace_all("model.pos_encoding.", "--option ", false);  // the other keys of the section: only --option sets them
  // pe has no model width for a rotary kind: --dim is the head size itself.
  what = std::regex_replace(what, std::regex(R"(--dim must be such that the head size n_embd/n_head is even for (\w+) \(it rotates pairs; here \d+/\d+ = \d+\))"),
                            "--dim, the head size, must be even for $1 (it rotates pairs)");
  return ConfigError(what);
}

namespace {

struct PeOpts {
  std::string kind, format = "csv", plot, plot_data, plugin;
  int64_t positions = 0, dim = 0, heads = 1, bits = 16, block_size = 0, randomize = 0, seed = 0;
  double base = 10000, scale = 0, factor = 1;
  std::string params, rope_scaling = "none";
  std::vector<std::string> options;  // --option KEY=VALUE: model.pos_encoding.KEY
  int64_t original_length = 0;
  int64_t max_values = 10'000'000;  // ~300 MB of CSV at ~30 bytes a record
};

// The encoding as `pe` builds it (same factory as a model), seeded so learned tables are reproducible.
// --dim is the model width of an additive kind and the head size of every other.
std::shared_ptr<PositionalEncodingImpl> build(const PeOpts& o, const PosEncodingConfig& e, int64_t heads) {
  const bool additive = encoding_family(e.kind) == "additive";
  torch::manual_seed(Config{}.seed);
  auto pe = make_positional({e, o.dim * (additive ? 1 : heads), additive ? 1 : heads, o.positions});
  // --rope-scaling: the frequencies a scaled evaluation would use (checked against the kind in add_pe).
  if (o.rope_scaling != "none")
    pe->set_rope_scaling({o.rope_scaling, o.factor, o.original_length > 0 ? o.original_length : o.positions});
  return pe;
}

bool same_inspection(std::map<std::string, torch::Tensor> a, std::map<std::string, torch::Tensor> b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a)
    if (!b.count(name) || !t.sizes().equals(b[name].sizes()) || !torch::allclose(t.to(torch::kDouble), b[name].to(torch::kDouble)))
      return false;
  return true;
}

// Which of pe's own flags (base, bits, scale, heads) change what the kind computes, found by rebuilding
// with each changed, never by kind name, so that new kinds are judged alike.
std::set<std::string> flags_that_matter(const PeOpts& o, const PosEncodingConfig& e, const InspectParams& params) {
  torch::NoGradGuard no_grad;
  const auto reference = build(o, e, o.heads)->inspect(o.positions, o.dim, params);
  auto changes = [&](PosEncodingConfig changed, int64_t heads) {
    return !same_inspection(reference, build(o, changed, heads)->inspect(o.positions, o.dim, params));
  };
  std::set<std::string> out;
  PosEncodingConfig c = e;
  c.base = e.base * 2;
  if (changes(c, o.heads)) out.insert("base");
  c = e, c.bits = e.bits > 1 ? e.bits / 2 : 2;
  if (changes(c, o.heads)) out.insert("bits");
  c = e, c.scale = 2 * (e.scale > 0 ? e.scale : default_additive_scale(e.kind, o.dim));
  if (changes(c, o.heads)) out.insert("scale");
  if (changes(e, o.heads * 2)) out.insert("heads");
  return out;
}

// What the pictures need beyond the printed tensors, chosen by family and by which options change
// the encoding, never by kind name, so new kinds get their pictures for free.
void add_plot_data(nlohmann::json& out, const PeOpts& o, const PosEncodingConfig& e, PositionalEncodingImpl& pe,
                   const InspectParams& params, const std::map<std::string, torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  const auto matter = flags_that_matter(o, e, params);
  nlohmann::json options = nlohmann::json::object();
  const bool base_matters = matter.count("base") > 0;
  if (base_matters) options["base"] = e.base;
  if (matter.count("bits")) options["bits"] = e.bits;
  if (matter.count("scale") && out.contains("scale")) options["scale"] = out["scale"];
  if (matter.count("heads")) options["heads"] = o.heads;
  for (const auto& [name, value] : params) options[name] = value;
  if (o.rope_scaling != "none") {  // evaluation-time scaling: the pictures show the scaled frequencies
    options["rope_scaling"] = o.rope_scaling;
    options["factor"] = o.factor;
    options["original_length"] = o.original_length > 0 ? o.original_length : o.positions;
  }
  out["options"] = options;
  out["trainable"] = !pe.parameters().empty();  // learned tables: what is shown is the initialisation

  if (tensors.count("table")) {
    auto table = tensors.at("table").to(torch::kDouble);  // (N, D)
    out["similarity"] = tensor_to_json(table.matmul(table.t()));  // (N, N): PE[p] . PE[q]
    if (base_matters) {
      // The same table at three bases, with the frequencies omega_i = base^(-2i/D) its pairs turn at.
      nlohmann::json sweep = nlohmann::json::array();
      for (double base : {1e2, 1e4, 1e8}) {
        PosEncodingConfig b = e;
        b.base = base;
        sweep.push_back({{"base", base},
                         {"table", tensor_to_json(build(o, b, o.heads)->inspect(o.positions, o.dim, params).at("table"))},
                         {"frequencies", tensor_to_json(rope_angles(2, o.dim, base)[1])}});
      }
      out["by_base"] = sweep;
    }
  }
  if (pe.family() == "rotary") {
    // q = k = all-ones (RoFormer's long-term decay): q_m . k_n after the encoding's own rotation.
    auto ones = torch::ones({1, 1, o.positions, o.dim});
    auto [q, k] = pe.rotate(ones, ones, torch::arange(o.positions, torch::kLong));
    out["qk"] = tensor_to_json(q[0][0].to(torch::kDouble).matmul(k[0][0].to(torch::kDouble).t()));  // (N, N)
  }
}

std::string plots_script() {
  const std::string script = find_script("plots");
  if (script.empty()) throw std::runtime_error("scripts/plots not found (set POSLAB_SCRIPTS to the scripts directory)");
  return script;
}

void draw(const std::string& script, const nlohmann::json& data, const std::string& png) {
  TempFile json_file{png + ".pe.json"};
  write_file_atomic(json_file.path, data.dump() + "\n");
  if (const int rc = run_python_script(script, {"pe", json_file.path, png}); rc != 0)
    throw std::runtime_error("--plot " + png + ": scripts/plots " + plot_failure(rc));
}

}  // namespace

void add_pe(CLI::App& app) {
  auto o = std::make_shared<PeOpts>();
  auto* cmd = app.add_subcommand("pe", "Print a positional encoding: additive table (N x D), rope angles (N x D/2), "
                                       "a bias (H, N, N), t5 buckets, fire's MLP input, xpos scales, randomized "
                                       "positions (docs/encodings.md); or draw it (--plot)");
  cmd->add_option("--kind,-k", o->kind, join_kinds(encoding_kinds(), "|") + ", or a kind of the --plugin")->required();
  cmd->add_option("--plugin", o->plugin, "A plug-in's shared library, whose kinds --kind may name (docs/extending.md)");
  cmd->add_option("--positions,-n", o->positions, "Number of positions N")->required()->check(positive_integer());
  cmd->add_option("--dim,-d", o->dim, "Additive kinds: the model width D; others: the head size")
      ->required()
      ->check(positive_integer());
  auto* heads_opt = cmd->add_option("--heads", o->heads, "Heads H (bias kinds; default 1)")->check(positive_integer());
  cmd->add_option("--param", o->params, "Parameters to inspect at: kerple r1=..,r2=..; fire c=..,L=..");
  cmd->add_option("--option", o->options, "KEY=VALUE sets model.pos_encoding.KEY as a config would (a kind's own "
                                          "keys, e.g. npos=8 for cope, or a plug-in's options); repeatable")
      ->type_name("KEY=VALUE");
  cmd->add_option("--randomize", o->randomize,
                  "Print the sorted positions a randomized run draws from [0, MAX), MAX >= --positions (0, the default: off)")
      ->check(integer_at_least(0, "0 (off) or a positive integer"));
  cmd->add_option("--seed", o->seed, "Seed for --randomize (default 0)");
  auto* base_opt = cmd->add_option("--base", o->base, "Base for sinusoidal and rope (default 10000)");
  auto* scale_opt = cmd->add_option("--scale", o->scale, "Multiplier of additive kinds (default 0 = as in a model: 1 for index, "
                                      "1/sqrt(D) for sinusoidal and binary; 1 prints the bare formula)");
  auto* bits_opt = cmd->add_option("--bits", o->bits, "Bits for binary (default 16, or --dim where it is narrower)");
  cmd->add_option("--format,-f", o->format, "csv|json (default csv: one record per value, RFC 4180)")->check(CLI::IsMember({"csv", "json"}));
  cmd->add_option("--max-values", o->max_values, "Refuse tables of more values than this in all (default 10000000, "
                                                "~300 MB of CSV)")
      ->check(positive_integer());
  cmd->add_option("--plot", o->plot, "Draw the pictures that explain the encoding into this .png (needs python3-matplotlib)");
  cmd->add_option("--plot-data", o->plot_data, "Write the numbers behind those pictures to this .json (for your own plots)");
  cmd->add_option("--rope-scaling", o->rope_scaling, "Rotary kinds: none|linear|ntk|dynamic_ntk|yarn; prints inv_freq "
                                                    "(and yarn's attention_factor)")
      ->check(CLI::IsMember(kRopeScalingKinds));
  auto* factor_opt = cmd->add_option("--factor", o->factor, "--rope-scaling factor S: above 1 (dynamic_ntk: 1 or more)");
  auto* original_opt = cmd->add_option("--original-length", o->original_length,
                  "--rope-scaling: the training length L in tokens (default: --positions)")
      ->check(positive_integer());
  cmd->callback([o, factor_opt, original_opt, heads_opt, base_opt, scale_opt, bits_opt] {
    // Before any work: nothing is computed, drawn or half-written for an output that cannot be written.
    if (!o->plot.empty()) check_output_path(o->plot, "--plot", {".png", ".svg", ".pdf"});
    if (!o->plot_data.empty()) check_output_path(o->plot_data, "--plot-data", {".json"});
    const bool pictures = !o->plot.empty() || !o->plot_data.empty();
    const std::string script = o->plot.empty() ? "" : plots_script();
    // Build through the same config validation and factory that training uses. --dim is the model
    // width of an additive kind and the head size of every other (heads do not change an additive table).
    const auto params = parse_params(o->params);
    if (!o->plugin.empty()) o->plugin = absolute_path(o->plugin);
    if (!o->plugin.empty()) load_plugin(o->plugin, "--plugin");
    const EncodingSpec* spec = find_encoding(o->kind);
    if (!spec) throw ConfigError("--kind: unknown encoding '" + o->kind + "' (allowed: " + join_kinds(encoding_kinds()) + ")");
    const std::string family = spec->family;
    const bool additive = family == "additive";
    if (o->rope_scaling != "none" && family != "rotary")
      throw ConfigError("--rope-scaling applies to rotary kinds (" + join_kinds(encoding_kinds_of("rotary")) + "), not --kind " + o->kind);
    for (const auto& [name, value] : std::vector<std::pair<std::string, double>>{{"--base", o->base}, {"--scale", o->scale}, {"--factor", o->factor}})
      if (!std::isfinite(value)) throw ConfigError(name + " must be a finite number, got " + std::to_string(value));
    if (!(o->factor >= 1)) throw ConfigError("--factor must be >= 1, got " + std::to_string(o->factor));
    if (o->rope_scaling == "none" && (factor_opt->count() > 0 || original_opt->count() > 0))
      throw ConfigError("--factor and --original-length need --rope-scaling KIND (without it they would change nothing)");
    // binary's 16 bits by default, but no more than the table is wide: `--kind binary --dim 8` shows 8 bits
    // (a model's config states its bits; pe's default should not fail on a narrow table nobody asked bits of).
    if (bits_opt->count() == 0) o->bits = std::min<int64_t>(16, o->dim);
    nlohmann::json j = {{"model",
                         {{"n_embd", o->dim * (additive ? 1 : o->heads)},
                          {"n_head", additive ? 1 : o->heads},
                          {"block_size", o->positions},
                          {"pos_encoding",
                           {{"kind", o->kind}, {"base", o->base}, {"scale", o->scale}, {"bits", o->bits},
                            {"plugin", o->plugin}, {"randomize", {{"max_position", o->randomize}}},
                            // validated as a model's would be (a factor of 1 scales nothing)
                            {"rope_scaling",
                             {{"kind", o->rope_scaling}, {"factor", o->factor}, {"original_length", o->original_length}}}}}}}};
    Config c;
    try {
      std::vector<std::string> sets;
      // Keys pe sets from its own flags: given as an --option too, one of the two would be dropped unsaid.
      static const std::map<std::string, std::string> flagged = {
          {"kind", "--kind"}, {"base", "--base"}, {"scale", "--scale"}, {"bits", "--bits"}, {"plugin", "--plugin"},
          {"randomize", "--randomize"}, {"rope_scaling", "--rope-scaling, --factor and --original-length"}};
      for (const auto& item : o->options) {
        if (item.find('=') == std::string::npos || item.front() == '=')
          throw ConfigError("--option " + item + ": expected KEY=VALUE (a key of model.pos_encoding)");
        const std::string key = item.substr(0, item.find_first_of("=."));
        if (flagged.count(key))
          throw ConfigError("--option " + item + ": pe has its own flag for this key (" + flagged.at(key) + "); give that instead");
        sets.push_back("model.pos_encoding." + item);
      }
      nlohmann::json full = default_config_json();  // --option may name any key of the section
      merge_config(full, j, "pe");
      apply_overrides(full, sets);  // a path among them: from the working directory
      c = config_from_json(full);
    } catch (const ConfigError& e) {
      throw as_flag_error(e);
    }
    // An --option this kind does not read (npos, cope's, on rope) would print the same numbers: refused, as
    // train --set refuses it.
    const auto readers = encoding_option_readers();
    for (const auto& item : o->options) {
      const std::string key = item.substr(0, item.find_first_of("=."));
      const auto it = readers.find(key);
      if (it != readers.end() && std::find(it->second.begin(), it->second.end(), c.model.pos_encoding.kind) == it->second.end())
        throw ConfigError("--option " + key + " is read by " +
                          (it->second.size() == 1 ? "--kind " + it->second[0] : "the kinds " + join_kinds(it->second)) +
                          ", but --kind is " + c.model.pos_encoding.kind);
    }
    // A flag this kind does not read would print the same numbers and say nothing: a warning (not an error:
    // one command line looped over every kind, --heads given for the bias kinds, is a fair use).
    std::vector<std::string> given;
    for (const auto& [name, opt] : std::vector<std::pair<std::string, CLI::Option*>>{
             {"base", base_opt}, {"scale", scale_opt}, {"bits", bits_opt}, {"heads", heads_opt}})
      if (opt->count() > 0) given.push_back(name);
    if (!given.empty()) {
      const auto matter = flags_that_matter(*o, c.model.pos_encoding, params);
      for (const auto& name : given)
        if (!matter.count(name)) {
          std::string reads;
          for (const auto& m : matter) reads += (reads.empty() ? "" : ", ") + ("--" + m);
          std::cerr << "poslab: warning: --" << name << " changes nothing --kind " << o->kind << " prints (it reads "
                    << (reads.empty() ? std::string("none of --base, --bits, --scale, --heads") : reads)
                    << ")\n";  // stderr: the tables go to stdout
        }
    }
    auto pe = build(*o, c.model.pos_encoding, o->heads);
    // The tables pe prints for n positions, the randomized draw among them.
    const auto tables_at = [&](int64_t n) {
      auto tables = pe->inspect(n, o->dim, params);
      if (o->randomize > 0) {
        torch::manual_seed(o->seed);
        tables["positions"] = pe->positions(n, /*training=*/true, torch::kCPU);  // (N,)
      }
      return tables;
    };
    // A bias is (H, N, N): --positions 5000 alone would print 25 million records (~750 MB) before anyone saw
    // one, and 50 000 would take ~10 GB to compute before they could be counted.
    refuse_oversized_before_computing(tables_at, o->positions, o->kind, o->max_values);
    const auto tensors = tables_at(o->positions);
    refuse_oversized_tables(tensors, o->positions, o->kind, o->max_values);
    const double scale = o->scale > 0 ? o->scale : default_additive_scale(o->kind, o->dim);
    if (o->format == "json" || pictures) {
      nlohmann::json out = {{"kind", o->kind}, {"family", pe->family()}, {"positions", o->positions}, {"dim", o->dim}};
      if (spec->default_scale) out["scale"] = scale;  // kinds with a scale knob
      for (const auto& [name, t] : tensors) out[name] = tensor_to_json(t);
      if (!pictures) {
        std::cout << out.dump() << "\n";
        return;
      }
      add_plot_data(out, *o, c.model.pos_encoding, *pe, params, tensors);
      if (!o->plot_data.empty()) write_file_atomic(o->plot_data, out.dump() + "\n");
      if (!o->plot.empty()) draw(script, out, o->plot);
      for (const auto& f : {o->plot_data, o->plot})
        if (!f.empty()) std::cout << "written: " << f << "\n";
    } else {
      auto printed = tensors;
      if (spec->default_scale) printed["scale"] = torch::tensor(scale, torch::kDouble);
      print_csv(printed);
    }
  });
}

}  // namespace poslab::cli
