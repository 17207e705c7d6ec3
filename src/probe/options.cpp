// Reading and checking a probe's options; the run's defaults for those left unset; whether a probe file is
// the one a set of options would write.
#include "probe/options.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "eval/evaluator.h"
#include "probe/mqar.h"
#include "probe/passkey.h"

namespace poslab {
using nlohmann::json;

const std::vector<std::string> kProbeTasks = {"passkey", "mqar"};
const std::vector<double> kDefaultDepths = {0, 0.25, 0.5, 0.75};

void check_probe_options(const ProbeOptions& o, const std::function<std::string(const std::string&)>& name) {
  if (std::find(kProbeTasks.begin(), kProbeTasks.end(), o.task) == kProbeTasks.end())
    throw ConfigError(name("task") + ": unknown probe '" + o.task + "' (allowed: passkey, mqar)");
  if (o.trials < 1) throw ConfigError(name("trials") + ": must be at least 1, got " + std::to_string(o.trials));
  // The lower Wilson bound of n successes in n trials is n / (n + z^2): below 1 at any number of trials.
  if (!(o.threshold > 0 && o.threshold < 1))
    throw ConfigError(name("threshold") + ": must be in (0, 1) (a lower 95% bound of exact match, which never reaches 1), got " +
                      number_text(o.threshold));
  if (o.haystack != "noise" && o.haystack != "text")
    throw ConfigError(name("haystack") + ": unknown '" + o.haystack + "' (allowed: noise, text)");
  for (double d : o.depths)
    if (!(d >= 0 && d <= 1))
      throw ConfigError(name("depths") + ": each depth must be in [0, 1] (a fraction of the filler), got " + std::to_string(d));
  for (int L : o.lengths)
    if (L < 1) throw ConfigError(name("lengths") + ": each length must be a positive number of tokens, got " + std::to_string(L));
  // A value listed twice would probe the same documents twice and count them twice in the effective length.
  for (size_t i = 0; i < o.depths.size(); ++i)
    if (std::find(o.depths.begin(), o.depths.begin() + i, o.depths[i]) != o.depths.begin() + i) {
      std::ostringstream depth;
      depth << o.depths[i];
      throw ConfigError(name("depths") + ": " + depth.str() + " is listed twice");
    }
  for (size_t i = 0; i < o.lengths.size(); ++i)
    if (std::find(o.lengths.begin(), o.lengths.begin() + i, o.lengths[i]) != o.lengths.begin() + i)
      throw ConfigError(name("lengths") + ": " + std::to_string(o.lengths[i]) + " is listed twice");
  if (o.digits < 0 || o.digits > 18) throw ConfigError(name("digits") + ": must be between 1 and 18, got " + std::to_string(o.digits));
  if (!o.template_name.empty() && o.template_name != "auto" && o.template_name != "reference" && o.template_name != "compact")
    throw ConfigError(name("template") + ": unknown '" + o.template_name + "' (allowed: auto, reference, compact)");
  if (o.task == "mqar") {  // the passkey's options mean nothing to mqar: say so rather than ignore them
    const std::string why = " applies to the passkey probe only (mqar has no needle: see docs/probes.md)";
    if (!o.depths.empty()) throw ConfigError(name("depths") + why);
    if (o.no_needle) throw ConfigError(name("no_needle") + why);
    if (o.haystack != "noise") throw ConfigError(name("haystack") + why);
    if (o.digits != 0) throw ConfigError(name("digits") + why);
    if (!o.template_name.empty()) throw ConfigError(name("template") + why);
    if (!o.controls) throw ConfigError(name("controls") + why);
  }
}

ProbeOptions probe_options_from_json(const std::string& task, const json& j, const std::string& where) {
  ProbeOptions o;
  o.task = task;
  auto name = [&](const std::string& key) { return where + "." + key; };
  if (std::find(kProbeTasks.begin(), kProbeTasks.end(), task) == kProbeTasks.end())
    throw ConfigError(where + ": unknown probe '" + task + "' (allowed: passkey, mqar)");
  if (!j.is_object()) throw ConfigError(where + ": must be an object of probe options");
  const std::vector<std::string> keys = {"lengths", "depths", "trials", "haystack", "threshold", "seed", "digits", "template", "controls"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    // The passkey's own keys are read for mqar too, to say they apply to the passkey only (below), but the
    // list offered is the probe's own.
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
      throw ConfigError(name(it.key()) + ": unknown key (allowed: " +
                        (task == "mqar" ? "lengths, trials, threshold, seed" : "lengths, depths, trials, haystack, threshold, seed, digits, "
                                                                              "template, controls") + ")");
    const auto& v = it.value();
    const std::string k = it.key();
    try {
      // Types first: get<int> on a float, or on an integer past int's range, would convert out of range.
      if ((k == "trials" || k == "seed" || k == "digits") && !json_fits_int(v)) throw json::type_error::create(302, "", nullptr);
      if ((k == "lengths" || k == "depths") && (!v.is_array() || v.empty())) throw json::type_error::create(302, "", nullptr);
      if (k == "lengths" && !std::all_of(v.begin(), v.end(), json_fits_int)) throw json::type_error::create(302, "", nullptr);
      if (k == "lengths") o.lengths = v.get<std::vector<int>>();
      else if (k == "depths") o.depths = v.get<std::vector<double>>();
      else if (k == "trials") o.trials = v.get<int>();
      else if (k == "haystack") o.haystack = v.get<std::string>();
      else if (k == "threshold") o.threshold = v.get<double>();
      else if (k == "seed") o.seed = v.get<int>();
      else if (k == "digits") o.digits = v.get<int>();
      else if (k == "template") o.template_name = v.get<std::string>();
      else if (k == "controls") o.controls = v.get<bool>();
    } catch (const json::exception&) {
      throw ConfigError(name(k) + ": wrong type, got " + v.dump() + " (expected " +
                        (k == "lengths" ? "a non-empty list of token counts" : k == "depths" ? "a non-empty list of fractions"
                         : k == "haystack" || k == "template" ? "a string" : k == "controls" ? "true or false"
                         : k == "threshold" ? "a number" : "an integer") + ")");
    }
  }
  check_probe_options(o, name);
  return o;
}

json probe_options_to_json(const ProbeOptions& o) {
  json j = {{"trials", o.trials}, {"threshold", o.threshold}, {"seed", o.seed}};
  if (o.task != "mqar") j.update({{"haystack", o.haystack}, {"controls", o.controls}});  // the passkey's alone
  // Unset options stay unset, so that each cell's run supplies its own default.
  if (!o.lengths.empty()) j["lengths"] = o.lengths;
  if (!o.depths.empty()) j["depths"] = o.depths;
  if (o.digits > 0) j["digits"] = o.digits;
  if (!o.template_name.empty()) j["template"] = o.template_name;
  return j;
}

ResolvedPasskey resolved_passkey(const ProbeOptions& o, const Config& c) {
  const int digits = o.digits > 0 ? o.digits : c.data.probes.passkey.digits;
  return {digits, passkey_template(o.template_name.empty() ? c.data.probes.passkey.template_name : o.template_name,
                                   c.model.block_size, digits)};
}

std::vector<int> default_probe_lengths(const ProbeOptions& o, const Config& c) {
  if (o.task == "mqar" && c.data.kind == "task" && c.data.task == "mqar") {
    const int T = mqar_train_tokens(c);  // tokens, not the evaluator's items
    return {T, 2 * T, 4 * T, 8 * T};
  }
  return default_eval_lengths(c);
}

std::string probe_file_differs(const json& file, const ProbeOptions& o, const Config& c) {
  const auto text = [](const auto& values) {
    std::ostringstream out;
    for (auto it = values.begin(); it != values.end(); ++it) out << (it == values.begin() ? "" : ",") << *it;
    return "[" + out.str() + "]";
  };
  // const json's operator[] on a missing key is undefined: a damaged file is read with contains and value.
  if (!file.is_object() || !file.contains("results") || !file["results"].is_array()) return "no results";
  if (file.value("task", std::string()) != o.task) return "task " + file.value("task", std::string("unset"));
  const json& rows = file["results"];
  std::set<int> got_lengths;
  for (const auto& r : rows) {
    if (!r.is_object()) return "a result that is not an object";
    got_lengths.insert(r.value("length", 0));
  }
  const std::vector<int> lengths = o.lengths.empty() ? default_probe_lengths(o, c) : o.lengths;
  const std::set<int> want_lengths(lengths.begin(), lengths.end());
  if (got_lengths != want_lengths) return "lengths " + text(got_lengths) + ", not " + text(want_lengths);
  const std::pair<const char*, json> scalars[] = {{"trials", o.trials}, {"seed", o.seed}, {"threshold", o.threshold}};
  for (const auto& [key, want] : scalars)
    if (!file.contains(key) || file[key] != want)
      return std::string(key) + " " + (file.contains(key) ? file[key].dump() : "unset") + ", not " + want.dump();
  // The scaling it ran with: the run's eval.rope_scaling, else the one it trained with (EvalRopeScaling).
  const RopeScalingConfig& scaling =
      c.eval.rope_scaling.kind != "none" ? c.eval.rope_scaling : c.model.pos_encoding.rope_scaling;
  const json& got_scaling = file.value("rope_scaling", json("none"));
  const std::string got_kind = got_scaling.is_object() ? got_scaling.value("kind", std::string("?")) : got_scaling.dump();
  if (scaling.kind == "none" ? got_scaling != json("none")
                             : !got_scaling.is_object() || got_kind != scaling.kind ||
                                   got_scaling.value("factor", json()) != json(scaling.factor))
    return "RoPE scaling " +
           (got_scaling.is_object() ? got_kind + " x" + got_scaling.value("factor", json()).dump() : std::string("none")) +
           ", not " + (scaling.kind == "none" ? std::string("none") : scaling.kind + " x" + json(scaling.factor).dump());
  if (o.task != "passkey") return "";
  const ResolvedPasskey passkey = resolved_passkey(o, c);
  const int digits = passkey.digits;
  const PasskeyTemplate& tmpl = passkey.tmpl;
  if (file.value("digits", 0) != digits) return "digits " + file.value("digits", json()).dump() + ", not " + std::to_string(digits);
  if (file.value("haystack", std::string()) != o.haystack)
    return "haystack " + file.value("haystack", std::string("unset")) + ", not " + o.haystack;
  if (file.value("template", std::string()) != tmpl.name)
    return "template " + file.value("template", std::string("unset")) + ", not " + tmpl.name;
  std::set<double> got_depths;
  bool got_controls = false;
  for (const auto& r : rows) {
    const json control = r.value("control", json()), depth = r.value("depth", json());
    if (control.is_null() && depth.is_number()) got_depths.insert(depth.get<double>());
    got_controls = got_controls || !control.is_null();
  }
  const std::vector<double> depths = o.depths.empty() ? kDefaultDepths : o.depths;
  if (got_depths != std::set<double>(depths.begin(), depths.end()))
    return "depths " + text(got_depths) + ", not " + text(std::set<double>(depths.begin(), depths.end()));
  if (got_controls != o.controls) return got_controls ? "control rows" : "no control rows";
  return "";
}

}  // namespace poslab
