// A probe run: the run loaded, its options checked, the task's probe (passkey_probe.cpp, mqar.cpp), the
// effective length on top, RUN/probe-<task>.json written; and the console table of a probe's results.
#include "probe/probe.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "eval/evaluator.h"
#include "probe/mqar.h"
#include "probe/stats.h"
#include "train/run_dir.h"
#include "util/files.h"

namespace poslab {
using nlohmann::json;

std::string encoding_length_limit(GPT& model, int64_t L) {
  const int64_t table = model->pos->max_positions();
  if (table > 0 && L > table) return "the encoding represents " + std::to_string(table) + " positions";
  try {
    model->pos->check_length(L);
  } catch (const PositionLimitError& e) {
    return e.what();
  }
  return "";
}

// Exact-match counts per length over the non-control cells, for the effective length.
int effective_length_of(const json& results, double threshold) {
  std::map<int, LengthScore> by_length;
  for (const auto& r : results) {
    // Probe cells count; controls do not, but a --no-needle grid (its depths set) counts as it is.
    const bool counted = r["control"].is_null() || (r["control"] == "no_needle" && !r["depth"].is_null());
    if (!counted) continue;
    // A length too short for the template's fixed parts (a compare grid lets it through as n/a) was not
    // tested: no document fits it, whatever the model. Past a learned table it was, and failed.
    const std::string status = r["status"];
    if (status.rfind("n/a: the ", 0) == 0 && status.find(" template with ") != std::string::npos) continue;
    auto& s = by_length[r["length"].get<int>()];
    s.length = r["length"].get<int>();
    if (r["status"] != "ok") { s.trials = std::max<int64_t>(s.trials, 1); continue; }  // n/a counts as a failure
    s.trials += r["trials"].get<int64_t>();
    s.successes += std::llround(r["exact"].get<double>() * r["trials"].get<double>());
  }
  std::vector<LengthScore> scores;
  for (const auto& [L, s] : by_length) scores.push_back(s);
  return effective_length(scores, threshold);
}

json probe_model(GPT& model, const CharTokenizer& tok, const Config& c, const ProbeOptions& o, const Runtime& rt) {
  json out;
  int train_length = c.model.block_size;
  if (o.task == "passkey") {
    out = passkey_probe(model, tok, c, o, rt);
  } else if (o.task == "mqar") {
    out = mqar_probe(model, c, o, rt);
    train_length = mqar_train_tokens(c);
  } else {
    throw ConfigError("--task: unknown probe '" + o.task + "' (allowed: passkey, mqar)");
  }
  // mqar: the effective length is over the distance axis (the load axis changes the task as it grows).
  json counted = json::array();
  for (const auto& r : out["results"])
    if (!r.contains("axis") || r["axis"] == "distance") counted.push_back(r);
  const int eff = effective_length_of(counted, o.threshold);
  json head = {{"task", o.task}, {"encoding", c.model.pos_encoding.kind}, {"train_length", train_length},
               {"threshold", o.threshold}, {"effective_length", eff},
               {"effective_multiple", static_cast<double>(eff) / train_length}, {"trials", o.trials}, {"seed", o.seed}};
  head.update(out);
  return head;
}

json probe_run(const std::string& dir, ProbeOptions o) {
  const std::map<std::string, std::string> flags = {{"task", "--task"}, {"trials", "--trials"}, {"threshold", "--threshold"},
                                                    {"haystack", "--haystack"}, {"depths", "--depths"}, {"lengths", "--lengths"},
                                                    {"digits", "--digits"}, {"template", "--template"},
                                                    {"no_needle", "--no-needle"}, {"controls", "--no-controls"}};
  check_probe_options(o, [&](const std::string& key) { return flags.at(key); });
  auto run = load_run(dir);
  const Config& c = run.config;
  if (o.lengths.empty()) o.lengths = default_probe_lengths(o, c);
  if (o.task == "mqar") check_mqar_probe(c, o);  // before any work
  if (o.task == "passkey" && o.haystack == "text") check_validation_files(dir);  // the haystack is its validation text
  Config rc = c;
  if (o.threads > 0) rc.train.threads = o.threads;  // the run's cell may have had a share of the cores
  Runtime rt = make_runtime(in_run_precision(rc, RunPaths{dir}, run.state.precision, "probing"));
  run.model->to(rt.device);
  // As eval does: with the scaling asked for, else the run's eval.rope_scaling where it has one, so that a
  // report's row pairs its loss and its retrieval from one model.
  const EvalRopeScaling scaling(run.model, c, o.rope_scaling, o.task == "mqar" ? mqar_train_tokens(c) : c.model.block_size);
  json out = probe_model(run.model, run.tokenizer, c, o, rt);
  out["rope_scaling"] = scaling.to_json();
  out["run"] = dir;
  out["step"] = run.state.step;
  write_file_atomic(dir + "/probe-" + o.task + ".json", out.dump(1) + "\n");
  return out;
}

std::string format_probe_table(const json& p) {
  std::ostringstream out;
  char line[256];
  const bool mqar = p["task"] == "mqar";
  out << p["task"].get<std::string>() << " probe of " << p["encoding"].get<std::string>() << " (trained at "
      << p["train_length"] << " tokens; ";
  if (p.contains("rope_scaling") && p["rope_scaling"].is_object())
    out << p["rope_scaling"]["kind"].get<std::string>() << " RoPE scaling x" << p["rope_scaling"]["factor"].get<double>() << ", ";
  if (mqar)
    out << p["pairs"] << " pairs, " << p["queries"] << " queries, " << p["gaps"].get<std::string>() << " gaps, ";
  else
    out << p["template"].get<std::string>() << " template, " << p["digits"] << "-digit keys, "
        << p["haystack"].get<std::string>() << " haystack, ";
  out << p["trials"] << " trials a cell)\n";
  std::snprintf(line, sizeof line, "%7s %-12s %7s %17s %9s %10s  %s\n", "length", mqar ? "axis" : "depth", "exact",
                "95% interval", mqar ? "answers" : "digits", "logprob", "status");
  out << line;
  auto two = [](double x) { char b[32]; std::snprintf(b, sizeof b, "%.2f", x); return std::string(b); };
  bool adjacent = false;
  for (const auto& r : p["results"]) {
    std::string depth = r["depth"].is_null() ? "-" : two(r["depth"].get<double>());
    // Where the filler's sentence boundaries put the needle elsewhere (a short filler): the depth it hit.
    if (r.contains("depth_actual") && !r["depth"].is_null() &&
        std::abs(r["depth_actual"].get<double>() - r["depth"].get<double>()) >= 0.125)
      depth += " (" + two(r["depth_actual"].get<double>()) + ")";
    adjacent = adjacent || r["control"] == "adjacent";
    if (!r["control"].is_null()) depth = r["control"] == "no_needle" ? (r["depth"].is_null() ? "no needle" : depth + " none") : depth + "*";
    if (r.contains("axis")) depth = r["axis"].get<std::string>() + " " + std::to_string(r["pairs"].get<int>());
    if (r["status"] != "ok") {
      std::snprintf(line, sizeof line, "%7d %-12s %7s %17s %9s %10s  %s\n", r["length"].get<int>(), depth.c_str(), "-", "-", "-", "-",
                    r["status"].get<std::string>().c_str());
    } else {
      char iv[32];
      std::snprintf(iv, sizeof iv, "[%.2f, %.2f]", r["exact_low"].get<double>(), r["exact_high"].get<double>());
      std::snprintf(line, sizeof line, "%7d %-12s %7.3f %17s %9.3f %10.3f  ok\n", r["length"].get<int>(), depth.c_str(),
                    r["exact"].get<double>(), iv, r["digit_accuracy"].get<double>(), r["key_logprob"].get<double>());
    }
    out << line;
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, "effective length (lower 95%% bound of exact match >= %.2f at every length up to it): %d tokens (%.2fx)\n",
                p["threshold"].get<double>(), p["effective_length"].get<int>(), p["effective_multiple"].get<double>());
  out << tail << (mqar ? "(axis and pairs: distance keeps the run's pairs and stretches the query region; load scales the "
                         "pairs; the effective length is over distance)\n"
                       : std::string(adjacent ? "(* control: the needle next to the question; (x): the depth the needle "
                                                "landed at, where the filler's sentences put it elsewhere)\n"
                                              : ""));
  return out.str();
}

}  // namespace poslab
