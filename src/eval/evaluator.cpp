// Evaluation by length and by position. Scores come from one teacher-forced forward pass: with
// greedy decoding, an answer is produced exactly iff every answer token is the argmax, so exact
// match needs no autoregressive loop.
#include "eval/evaluator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "data/tasks.h"
#include "train/run_dir.h"
#include "train/memory_estimate.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/stage.h"
#include "eval/accumulator.h"
#include "eval/key_tokens.h"
#include "eval/text_eval.h"

namespace poslab {
using nlohmann::json;

constexpr int64_t kTokensPerPass = 8192;

Scores score_rows(GPT& model, const torch::Tensor& x_all, const torch::Tensor& y_all, const Runtime& rt, int64_t budget) {
  const int64_t B = x_all.size(0), T = x_all.size(1);
  // Activations per row: the residual stream, q/k/v, the MLP's 4C, the logits and their log-softmax.
  // Attention scores are not counted: the model computes them in query blocks sized to its own
  // budget (GPTImpl::attention_budget_bytes), so they grow with T, not T^2.
  // At most kTokensPerPass tokens go through at once (one window, when windows are longer), so the
  // memory is set by the length and the model, never by --batch-size, and the model's attention
  // blocks hold as many queries as they would for a single window.
  const auto& m = model->config;
  const int64_t bytes_per_row = T * (m.n_embd * 16 + int64_t{m.vocab_size} * 3) * 4;
  const int64_t rows = std::max<int64_t>(1, std::min(budget / std::max<int64_t>(1, bytes_per_row), kTokensPerPass / T));
  std::vector<torch::Tensor> nlls, hits;
  for (int64_t b0 = 0; b0 < B; b0 += rows) {
    auto x = x_all.slice(0, b0, std::min(B, b0 + rows)).to(rt.device);
    auto y = y_all.slice(0, b0, std::min(B, b0 + rows)).to(rt.device);
    torch::Tensor logits;
    {
      AutocastGuard autocast(rt);
      logits = model->forward(x).to(torch::kFloat);  // (b, T, V)
    }
    auto mask = y.ge(0);                                                                    // (b, T)
    auto safe_y = y.clamp_min(0);
    auto nll = -torch::log_softmax(logits, -1).gather(-1, safe_y.unsqueeze(-1)).squeeze(-1) * mask;  // (b, T)
    nlls.push_back(nll.to(torch::kDouble).cpu());
    hits.push_back(logits.argmax(-1).eq(safe_y).logical_and(mask).cpu());                    // (b, T)
  }
  return {torch::cat(nlls, 0), torch::cat(hits, 0)};
}

namespace {

json eval_task_length(GPT& model, const TaskCorpus& corpus, const Config& c, int n, const EvalOptions& o,
                      const Runtime& rt) {
  Rng rng(static_cast<uint64_t>(c.seed) * 1000003ULL + static_cast<uint64_t>(n));
  Accumulator acc;
  Ticker ticker(o.progress_seconds);
  for (int i = 0; i < o.batches; ++i) {
    const Batch batch = corpus.batch_at_length(n, o.batch_size, rng);
    acc.add(score_rows(model, batch.x, batch.y, rt, o.memory_budget_bytes), batch.y.ge(0));
    if (i + 1 < o.batches && ticker.due()) {
      const double took = ticker.elapsed();
      spdlog::info("eval length {}: batch {} of {} done in {}, about {} left", n, i + 1, o.batches, format_duration(took),
                   format_duration(took / (i + 1) * (o.batches - i - 1)));
    }
  }
  return acc.result(task_has_answer(c.data.task));
}

}  // namespace

EvalRopeScaling::EvalRopeScaling(GPT& m, const Config& c, const std::optional<RopeScalingConfig>& asked,
                                 int64_t train_tokens)
    : model(m), previous(m->pos->rope_scaling()), scaling(previous) {
  if (asked || c.eval.rope_scaling.kind != "none") {
    scaling = to_rope_scaling(asked.value_or(c.eval.rope_scaling), train_tokens);
    // The length a scaling stretches from is the one the model learned: one past it stretches from positions
    // the model never saw (allowed: it is what the flag says; said, as it is rarely meant).
    if (scaling.active() && scaling.original_length > train_tokens)
      spdlog::warn("RoPE scaling: original length {} is past the run's training length of {} tokens; the scaling "
                   "stretches from positions the model never saw (the default, its training length, is what YaRN and "
                   "NTK assume)", scaling.original_length, train_tokens);
  }
  model->pos->set_rope_scaling(scaling);
}

EvalRopeScaling::~EvalRopeScaling() { model->pos->set_rope_scaling(previous); }

json EvalRopeScaling::to_json() const {
  return scaling.active() ? json{{"kind", scaling.kind}, {"factor", scaling.factor}, {"original_length", scaling.original_length}}
                          : json("none");
}

json evaluate(GPT& model, const Corpus& corpus, const Config& c, const EvalOptions& o, const Runtime& rt) {
  torch::InferenceMode guard;
  set_blas_threads(rt, /*shards_running=*/false);  // whole batches, after training's shards
  model->eval();
  const EvalRopeScaling scaling(model, c, o.rope_scaling, corpus.tokens_at(corpus.train_length()));
  const json scaling_json = scaling.to_json();
  for (int length : o.lengths) {
    if (length <= 0) throw ConfigError("--lengths: each length must be a positive integer, got " + std::to_string(length));
    // Every length, before any work; one past the validation data is n/a, not a memory question.
    if (rt.device.is_cpu() && corpus.holds_eval_length(length)) check_evaluation_fits(c, corpus.tokens_at(length));
  }
  // Text: every length together, a chunk of targets at a time, with the key-token loss (after LongPPL):
  // every target's loss with a short context, once for all lengths.
  std::vector<json> text_results;
  if (!corpus.is_task()) {
    const KeyTokenOptions key = key_token_options(c, corpus);
    // A short context asked for that no length exceeds would leave key_tokens null at every length, unsaid.
    if (c.eval.key_short > 0 && !o.lengths.empty() && *std::max_element(o.lengths.begin(), o.lengths.end()) <= key.short_context)
      throw ConfigError("eval.key_short: " + std::to_string(c.eval.key_short) +
                        " tokens is not shorter than any length evaluated (the longest is " +
                        std::to_string(*std::max_element(o.lengths.begin(), o.lengths.end())) +
                        "); set it below that, or -1 to turn key tokens off");
    // The default's (a quarter of the training length) is no choice of the user's: said, not refused.
    if (c.eval.key_short == 0 && key.short_context > 0 && !o.lengths.empty() &&
        *std::max_element(o.lengths.begin(), o.lengths.end()) <= key.short_context)
      spdlog::info("key tokens: no length evaluated is longer than the short context ({} tokens, a quarter of the "
                   "training length), so key_tokens is null at every length (eval.key_short sets another)",
                   key.short_context);
    text_results = evaluate_text(model, static_cast<const TextCorpus&>(corpus), o, rt, key);
  }
  json results = json::array();
  for (size_t i = 0; i < o.lengths.size(); ++i) {
    const int length = o.lengths[i];
    const int64_t tokens = corpus.tokens_at(length);
    Stage stage("during evaluation at " + std::to_string(tokens) + " tokens");
    json r;
    if (!corpus.is_task()) {
      r = text_results[i];
    } else {
      try {
        model->pos->check_length(tokens);
        if (c.data.task == "mqar" && length > c.data.symbols)
          r = not_applicable(length, tokens, "mqar keys are distinct letters: " + std::to_string(length) +
                                                 " pairs need more than data.symbols = " + std::to_string(c.data.symbols));
        else r = eval_task_length(model, static_cast<const TaskCorpus&>(corpus), c, length, o, rt);
        // Positions 0 .. tokens-1, as for text: examples drawn shorter than the longest leave the tail unscored.
        if (r.contains("position_loss") && r["position_loss"].is_array())
          while (static_cast<int64_t>(r["position_loss"].size()) < tokens) r["position_loss"].push_back(nullptr);
      } catch (const PositionLimitError& e) {
        r = not_applicable(length, tokens, e.what());
      }
    }
    r["length"] = length;
    r["tokens"] = tokens;
    r["rope_scaling"] = scaling_json;
    // A task's length is in items, so its tokens are said; a text length is tokens, so the targets scored are.
    const bool ok = r["status"] == "ok";
    const std::string what = corpus.is_task() ? " (" + std::to_string(tokens) + " tokens)" : "";
    const std::string over = ok && r.contains("scored_tokens") ? ", " + r["scored_tokens"].dump() + " targets" : "";
    spdlog::info("eval length {:>5}{}: {}{}", length, what, ok ? "loss " + std::to_string(r["loss"].get<double>()) : r["status"].get<std::string>(),
                 over);
    results.push_back(r);
  }
  return {{"encoding", c.model.pos_encoding.kind},
          {"data", corpus.is_task() ? c.data.task : c.data.kind},  // text or tokens
          {"length_unit", corpus.is_task() ? "items" : "tokens"},
          {"train_length", corpus.train_length()},
          {"rope_scaling", scaling_json},
          {"settings", evaluation_settings(c, o)},
          {"results", results}};
}

json evaluation_settings(const Config& c, const EvalOptions& o) {
  Config used = c;
  used.eval.lengths = o.lengths.empty() ? default_eval_lengths(c) : o.lengths;
  if (o.batches > 0) used.eval.batches = o.batches;
  if (o.stride > 0) used.eval.stride = o.stride;
  if (o.tokens > 0) used.eval.tokens = o.tokens;
  if (o.batch_size > 0) used.eval.batch_size = o.batch_size;
  json eval = config_to_json(used)["eval"];
  // Text: memory only, the numbers do not depend on it. Tasks: batches x batch_size examples are scored.
  if (c.data.kind != "task") eval.erase("batch_size");
  json flag = nullptr;       // `--rope-scaling`, beside the eval section's own
  if (o.rope_scaling) flag = {{"kind", o.rope_scaling->kind}, {"factor", o.rope_scaling->factor},
                              {"original_length", o.rope_scaling->original_length}};
  return {{"eval", eval}, {"rope_scaling_flag", flag}};
}

std::vector<int> default_eval_lengths(const Config& c) {
  if (!c.eval.lengths.empty()) return c.eval.lengths;
  const int L = c.data.kind == "task" ? c.data.max_len : c.model.block_size;
  return {L, 2 * L, 4 * L, 8 * L};
}

json evaluate_run(const std::string& dir, EvalOptions o) {
  auto run = load_run(dir);
  for (const auto& item : o.overrides)
    if (item.rfind("eval.", 0) != 0)
      throw ConfigError("--set " + item + ": evaluation can only change eval.* keys (the model is trained already)");
  if (!o.overrides.empty()) {
    json j = config_to_json(run.config);
    apply_overrides(j, o.overrides);
    // Checked against the lengths this evaluation runs (--lengths), not the run's own eval.lengths.
    if (!o.lengths.empty()) j["eval"]["lengths"] = o.lengths;
    run.config.eval = config_from_json(j).eval;
  }
  const Config& c = run.config;
  if (o.lengths.empty()) o.lengths = default_eval_lengths(c);
  if (o.batches <= 0) o.batches = c.eval.batches;
  if (o.batch_size <= 0) o.batch_size = c.eval.batch_size;
  if (o.stride <= 0) o.stride = c.eval.stride;
  if (o.tokens <= 0) o.tokens = c.eval.tokens;
  Runtime rt = make_runtime(in_run_precision(c, RunPaths{dir}, run.state.precision, "evaluating"));
  run.model->to(rt.device);
  // The validation split is checked against the lengths evaluated here (--lengths), not the run's own.
  Config cc = c;
  cc.eval.lengths = o.lengths;
  auto corpus = make_corpus(cc, run.tokenizer);
  check_validation_files(dir);
  json out = evaluate(run.model, *corpus, c, o, rt);
  out["run"] = dir;
  out["step"] = run.state.step;
  if (!o.tag.empty()) out["tag"] = o.tag;
  write_file_atomic(RunPaths{dir}.eval(o.tag), out.dump(1) + "\n");
  return out;
}

std::string format_eval_table(const json& e) {
  std::ostringstream out;
  const bool task = e["length_unit"] == "items";
  char line[256];
  std::snprintf(line, sizeof line, "%-8s %7s %9s %10s %9s %9s  %s\n", task ? "items" : "length", "tokens", "loss", "ppl",
                "tok_acc", task ? "exact" : "sliding", "status");
  out << "encoding " << e["encoding"].get<std::string>() << " on " << e["data"].get<std::string>()
      << " (trained at " << e["train_length"] << " " << e["length_unit"].get<std::string>() << ")\n" << line;
  for (const auto& r : e["results"]) {
    if (r["status"] != "ok") {
      std::snprintf(line, sizeof line, "%-8d %7lld %9s %10s %9s %9s  %s\n", r["length"].get<int>(),
                    static_cast<long long>(r["tokens"].get<int64_t>()), "-", "-", "-", "-",
                    r["status"].get<std::string>().c_str());
    } else {
      std::string last = "-";
      char buf[32];
      if (task && r["exact_match"].is_number()) std::snprintf(buf, sizeof buf, "%.3f", r["exact_match"].get<double>()), last = buf;
      if (!task && r.contains("sliding")) std::snprintf(buf, sizeof buf, "%.4f", r["sliding"]["loss"].get<double>()), last = buf;
      std::snprintf(line, sizeof line, "%-8d %7lld %9.4f %10.3f %9.3f %9s  ok\n", r["length"].get<int>(),
                    static_cast<long long>(r["tokens"].get<int64_t>()), r["loss"].get<double>(), r["ppl"].get<double>(),
                    r["token_acc"].get<double>(), last.c_str());
    }
    out << line;
  }
  return out.str();
}

}  // namespace poslab
