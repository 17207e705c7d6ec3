// Evaluation by length and by position. Scores come from one teacher-forced forward pass: with
// greedy decoding, an answer is produced exactly iff every answer token is the argmax, so exact
// match needs no autoregressive loop.
#include "eval/evaluator.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <sstream>

#include "data/tasks.h"
#include "train/run_dir.h"
#include "train/memory_estimate.h"
#include "util/files.h"
#include "util/stage.h"

namespace poslab {
using nlohmann::json;

namespace {

struct Accumulator {
  double loss_sum = 0;
  int64_t scored = 0, correct = 0, examples = 0, exact = 0;
  std::vector<double> pos_loss;
  std::vector<int64_t> pos_count;

  // `scored_from`: per row, the first position that counts (sliding windows score only their tail).
  void add(GPT& model, const Batch& batch, int64_t scored_from, const Runtime& rt, int64_t budget) {
    const int64_t B = batch.x.size(0), T = batch.x.size(1);
    // Activations per row: the residual stream, q/k/v, the MLP's 4C, the logits and their log-softmax.
    // Attention scores are not counted: the model computes them in query blocks sized to its own
    // budget (GPTImpl::attention_budget_bytes), so they grow with T, not T^2.
    const auto& m = model->config;
    const int64_t bytes_per_row = T * (m.n_embd * 16 + int64_t{m.vocab_size} * 3) * 4;
    const int64_t rows = std::max<int64_t>(1, budget / std::max<int64_t>(1, bytes_per_row));
    if (static_cast<int64_t>(pos_loss.size()) < T) pos_loss.resize(T, 0.0), pos_count.resize(T, 0);
    for (int64_t b0 = 0; b0 < B; b0 += rows) {
      auto x = batch.x.slice(0, b0, std::min(B, b0 + rows)).to(rt.device);
      auto y = batch.y.slice(0, b0, std::min(B, b0 + rows)).to(rt.device);
      if (scored_from > 0) y = y.clone(), y.slice(1, 0, scored_from).fill_(-1);
      torch::Tensor logits;
      {
        AutocastGuard autocast(rt);
        logits = model->forward(x).to(torch::kFloat);  // (b, T, V)
      }
      auto mask = y.ge(0);                                                               // (b, T)
      auto safe_y = y.clamp_min(0);
      auto nll = -torch::log_softmax(logits, -1).gather(-1, safe_y.unsqueeze(-1)).squeeze(-1) * mask;  // (b, T)
      auto hit = logits.argmax(-1).eq(safe_y).logical_and(mask);                          // (b, T)
      auto nll_cpu = nll.to(torch::kDouble).cpu(), mask_cpu = mask.cpu();
      loss_sum += nll_cpu.sum().item<double>();
      scored += mask_cpu.sum().item<int64_t>();
      correct += hit.sum().item<int64_t>();
      // An example is exactly right when every scored token is: (hits == scored) per row.
      auto row_ok = hit.sum(1).eq(mask.sum(1)).logical_and(mask.sum(1).gt(0));
      exact += row_ok.sum().item<int64_t>();
      examples += x.size(0);
      auto pl = nll_cpu.sum(0).contiguous(), pc = mask_cpu.sum(0).to(torch::kLong).contiguous();
      auto pla = pl.accessor<double, 1>();
      auto pca = pc.accessor<int64_t, 1>();
      for (int64_t t = 0; t < T; ++t) pos_loss[t] += pla[t], pos_count[t] += pca[t];
    }
  }

  json result(bool with_exact) const {
    const double loss = scored ? loss_sum / scored : NAN;
    json r = {{"status", "ok"},
              {"loss", loss},
              {"ppl", std::exp(loss)},
              {"token_acc", scored ? static_cast<double>(correct) / scored : 0.0},
              {"exact_match", with_exact && examples ? json(static_cast<double>(exact) / examples) : json(nullptr)},
              {"scored_tokens", scored}};
    json curve = json::array();
    for (size_t t = 0; t < pos_loss.size(); ++t) curve.push_back(pos_count[t] ? json(pos_loss[t] / pos_count[t]) : json(nullptr));
    r["position_loss"] = curve;
    return r;
  }
};

json not_applicable(int length, int64_t tokens, const std::string& why) {
  return {{"length", length}, {"tokens", tokens},  {"status", "n/a: " + why}, {"loss", nullptr},
          {"ppl", nullptr},   {"token_acc", nullptr}, {"exact_match", nullptr}, {"position_loss", json::array()}};
}

json eval_task_length(GPT& model, const TaskCorpus& corpus, const Config& c, int n, const EvalOptions& o,
                      const Runtime& rt) {
  Rng rng(static_cast<uint64_t>(c.seed) * 1000003ULL + static_cast<uint64_t>(n));
  Accumulator acc;
  for (int i = 0; i < o.batches; ++i) acc.add(model, corpus.batch_at_length(n, o.batch_size, rng), 0, rt, o.memory_budget_bytes);
  return acc.result(task_has_answer(c.data.task));
}

json eval_text_length(GPT& model, const TextCorpus& corpus, int L, const EvalOptions& o, const Runtime& rt) {
  const auto& val = corpus.tokens(Split::Val);
  const int64_t N = val.size(0);
  const int64_t max_windows = static_cast<int64_t>(o.batches) * o.batch_size;
  auto windows_at = [&](int64_t stride) {  // starts of windows of L+1 tokens
    std::vector<int64_t> starts;
    for (int64_t s = 0; s + L + 1 <= N && static_cast<int64_t>(starts.size()) < max_windows; s += stride) starts.push_back(s);
    return starts;
  };
  auto run = [&](const std::vector<int64_t>& starts, int64_t tail) {
    Accumulator acc;
    for (size_t b0 = 0; b0 < starts.size(); b0 += o.batch_size) {
      std::vector<int64_t> chunk(starts.begin() + b0, starts.begin() + std::min(starts.size(), b0 + o.batch_size));
      auto idx = torch::tensor(chunk, torch::kLong).unsqueeze(1) + torch::arange(L + 1, torch::kLong);  // (b, L+1)
      auto w = val.index({idx});
      Batch batch{w.slice(1, 0, L).contiguous(), w.slice(1, 1, L + 1).contiguous()};
      // The first sliding window scores everything; later ones only their last `tail` tokens.
      if (b0 == 0 && tail < L) {
        acc.add(model, {batch.x.slice(0, 0, 1), batch.y.slice(0, 0, 1)}, 0, rt, o.memory_budget_bytes);
        if (batch.x.size(0) > 1)
          acc.add(model, {batch.x.slice(0, 1), batch.y.slice(0, 1)}, L - tail, rt, o.memory_budget_bytes);
      } else {
        acc.add(model, batch, tail < L ? L - tail : 0, rt, o.memory_budget_bytes);
      }
    }
    return acc.result(false);
  };
  auto windows = windows_at(L);
  if (windows.empty())
    return not_applicable(L, L, "validation split has " + std::to_string(N) + " tokens, fewer than " + std::to_string(L + 1));
  json r = run(windows, L);
  r["protocol"] = "windows";
  const int64_t stride = o.stride > 0 ? std::min(o.stride, L) : std::max(1, L / 2);
  const auto sliding_windows = windows_at(stride);
  // A split that holds one window of L tokens holds one sliding window too, the same one, scored
  // whole: its result is the windows' (at 65,536 tokens this halves the evaluation's time).
  json sliding = sliding_windows == windows ? r : run(sliding_windows, stride);
  r["sliding"] = {{"stride", stride}, {"loss", sliding["loss"]}, {"ppl", sliding["ppl"]}, {"token_acc", sliding["token_acc"]}};
  return r;
}

}  // namespace

namespace {
// Sets the model's RoPE scaling for one evaluation and restores its own (trained-with) one afterwards.
struct ScopedRopeScaling {
  GPT& model;
  RopeScaling previous;
  ScopedRopeScaling(GPT& m, const RopeScaling& s) : model(m), previous(m->pos->rope_scaling()) {
    model->pos->set_rope_scaling(s);
  }
  ~ScopedRopeScaling() { model->pos->set_rope_scaling(previous); }
};
}  // namespace

json evaluate(GPT& model, const Corpus& corpus, const Config& c, const EvalOptions& o, const Runtime& rt) {
  torch::InferenceMode guard;
  set_blas_threads(rt, /*shards_running=*/false);  // whole batches, after training's shards
  model->eval();
  // The scaling asked for (the option, else an active eval.rope_scaling), else the one the model
  // trained with (model.pos_encoding.rope_scaling, "none" for most runs).
  RopeScaling scaling = model->pos->rope_scaling();
  if (o.rope_scaling || c.eval.rope_scaling.kind != "none")
    scaling = to_rope_scaling(o.rope_scaling.value_or(c.eval.rope_scaling), corpus.tokens_at(corpus.train_length()));
  ScopedRopeScaling scoped(model, scaling);
  const json scaling_json = scaling.active() ? json{{"kind", scaling.kind},
                                                    {"factor", scaling.factor},
                                                    {"original_length", scaling.original_length}}
                                             : json("none");
  for (int length : o.lengths) {
    if (length <= 0) throw ConfigError("--lengths: each length must be a positive integer, got " + std::to_string(length));
    if (rt.device.is_cpu()) check_evaluation_fits(c, corpus.tokens_at(length));  // every length, before any work
  }
  json results = json::array();
  for (int length : o.lengths) {
    const int64_t tokens = corpus.tokens_at(length);
    Stage stage("evaluation at " + std::to_string(tokens) + " tokens");
    json r;
    try {
      model->pos->check_length(tokens);
      if (corpus.is_task() && c.data.task == "mqar" && length > c.data.symbols)
        r = not_applicable(length, tokens, "mqar keys are distinct letters: " + std::to_string(length) +
                                               " pairs need more than data.symbols = " + std::to_string(c.data.symbols));
      else if (corpus.is_task()) r = eval_task_length(model, static_cast<const TaskCorpus&>(corpus), c, length, o, rt);
      else r = eval_text_length(model, static_cast<const TextCorpus&>(corpus), length, o, rt);
    } catch (const PositionLimitError& e) {
      r = not_applicable(length, tokens, e.what());
    }
    r["length"] = length;
    r["tokens"] = tokens;
    r["rope_scaling"] = scaling_json;
    spdlog::info("eval length {:>5} ({} tokens): {}", length, tokens,
                 r["status"] == "ok" ? "loss " + std::to_string(r["loss"].get<double>()) : r["status"].get<std::string>());
    results.push_back(r);
  }
  return {{"encoding", c.model.pos_encoding.kind},
          {"data", corpus.is_task() ? c.data.task : "text"},
          {"length_unit", corpus.is_task() ? "items" : "tokens"},
          {"train_length", corpus.train_length()},
          {"rope_scaling", scaling_json},
          {"results", results}};
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
    run.config.eval = config_from_json(j).eval;
  }
  const Config& c = run.config;
  if (o.lengths.empty()) o.lengths = default_eval_lengths(c);
  if (o.batches <= 0) o.batches = c.eval.batches;
  if (o.batch_size <= 0) o.batch_size = c.eval.batch_size;
  if (o.stride <= 0) o.stride = c.eval.stride;
  Runtime rt = make_runtime(c);
  run.model->to(rt.device);
  auto corpus = make_corpus(c, run.tokenizer);
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
