// Evaluation by length and by position. Scores come from one teacher-forced forward pass: with
// greedy decoding, an answer is produced exactly iff every answer token is the argmax, so exact
// match needs no autoregressive loop.
#include "eval/evaluator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <sstream>

#include "data/tasks.h"
#include "train/run_dir.h"
#include "train/memory_estimate.h"
#include "util/files.h"
#include "util/stage.h"
#include "eval/key_tokens.h"

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

std::vector<double> target_losses(GPT& model, const TextCorpus& corpus, int64_t first, int64_t last, int64_t c0,
                                  int64_t c1, int64_t window, int64_t step, const Runtime& rt, int64_t budget,
                                  int batch_size) {
  std::vector<double> out(static_cast<size_t>(c1 - c0), NAN);
  const auto plan = plan_text_windows_in(first, last, window, step, c0, c1);
  for (size_t b0 = 0; b0 < plan.size(); b0 += static_cast<size_t>(batch_size)) {
    const size_t b1 = std::min(plan.size(), b0 + static_cast<size_t>(batch_size));
    std::vector<int64_t> starts;
    for (size_t i = b0; i < b1; ++i) starts.push_back(plan[i].start);
    auto w = corpus.windows(Split::Val, starts, window + 1);  // (b, W+1)
    const Scores s = score_rows(model, w.slice(1, 0, window).contiguous(), w.slice(1, 1, window + 1).contiguous(), rt, budget);
    auto nll = s.nll.accessor<double, 2>();
    for (size_t i = b0; i < b1; ++i)
      for (int64_t t = plan[i].lo; t < plan[i].hi; ++t)
        out[static_cast<size_t>(plan[i].start + t - c0)] = nll[static_cast<int64_t>(i - b0)][t];
  }
  return out;
}

namespace {

struct Accumulator {
  double loss_sum = 0;
  int64_t scored = 0, correct = 0, examples = 0, exact = 0;
  std::vector<double> pos_loss;
  std::vector<int64_t> pos_count;

  // Adds the scores where `mask` (B, T) is true; each row is one example for exact match.
  void add(const Scores& s, const torch::Tensor& mask) {
    const int64_t T = s.nll.size(1);
    if (static_cast<int64_t>(pos_loss.size()) < T) pos_loss.resize(T, 0.0), pos_count.resize(T, 0);
    auto nll = s.nll * mask, hit = s.hit.logical_and(mask);  // (B, T)
    loss_sum += nll.sum().item<double>();
    scored += mask.sum().item<int64_t>();
    correct += hit.sum().item<int64_t>();
    // An example is exactly right when every scored token is: (hits == scored) per row.
    auto row_ok = hit.sum(1).eq(mask.sum(1)).logical_and(mask.sum(1).gt(0));
    exact += row_ok.sum().item<int64_t>();
    examples += s.nll.size(0);
    auto pl = nll.sum(0).contiguous(), pc = mask.sum(0).to(torch::kLong).contiguous();
    auto pla = pl.accessor<double, 1>();
    auto pca = pc.accessor<int64_t, 1>();
    for (int64_t t = 0; t < T; ++t) pos_loss[t] += pla[t], pos_count[t] += pca[t];
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
  for (int i = 0; i < o.batches; ++i) {
    const Batch batch = corpus.batch_at_length(n, o.batch_size, rng);
    acc.add(score_rows(model, batch.x, batch.y, rt, o.memory_budget_bytes), batch.y.ge(0));
  }
  return acc.result(task_has_answer(c.data.task));
}

}  // namespace

std::vector<TextWindow> plan_text_windows(int64_t first, int64_t last, int64_t length, int64_t step) {
  return plan_text_windows_in(first, last, length, step, first, last);
}

std::vector<TextWindow> plan_text_windows_in(int64_t first, int64_t last, int64_t length, int64_t step, int64_t c0,
                                             int64_t c1) {
  // Window k ends on target e = last - k step and scores (max(first, e - step), e]; the one that would start
  // before token 0 starts there, scores every target left and is the last. Only the k that reach (c0, c1].
  // The plan's last window: the first k whose targets reach `first`, or whose start would be before token 0.
  const int64_t k_reaches_first = (last - first + step - 1) / step - 1;
  const int64_t k_clamped = last - length >= 0 ? (last - length) / step + 1 : 0;
  const int64_t k_last = std::min(k_reaches_first, k_clamped);
  std::vector<TextWindow> windows;
  for (int64_t k = std::min(k_last, std::max<int64_t>(0, (last - c1) / step - 1)); k <= k_last; ++k) {
    const int64_t end = last - k * step;
    if (end <= c0) break;
    int64_t lo = std::max(first, end - step), start = end - length;
    if (start < 0) start = 0, lo = first;
    const int64_t a = std::max(lo, c0), b = std::min(end, c1);  // the targets it scores in the chunk
    if (a < b) windows.push_back({start, a - start, b - start});
  }
  std::reverse(windows.begin(), windows.end());
  return windows;
}

namespace {

// One length's text evaluation, a chunk of targets at a time, both protocols on the same targets: the
// last `eval.tokens` of the validation split (all of it by default). "windows" cuts them into windows of
// L that each score every target; "sliding" moves by `stride` and scores only each window's last
// `stride` targets, so every target but those at the split's start sees at least L - stride tokens
// before it. A window both protocols need is run once.
struct TextLength {
  int L = 0;
  int64_t stride = 0;
  json done;  // set when the length cannot be evaluated (n/a)
  Accumulator acc[2];
  KeyTokenAccumulator key;

  // Scores the targets (c0, c1]; returns their windows-protocol losses (the key tokens' full context).
  std::vector<double> add_chunk(GPT& model, const TextCorpus& corpus, int64_t first, int64_t last, int64_t c0, int64_t c1,
                                const EvalOptions& o, const Runtime& rt) {
    const std::vector<std::vector<TextWindow>> plans = {plan_text_windows_in(first, last, L, L, c0, c1),
                                                        plan_text_windows_in(first, last, L, stride, c0, c1)};
    // Each distinct window start once, with the positions each protocol scores there.
    std::map<int64_t, std::array<std::pair<int64_t, int64_t>, 2>> by_start;
    for (int p = 0; p < 2; ++p)
      for (const auto& w : plans[p]) {
        auto it = by_start.try_emplace(w.start, std::array<std::pair<int64_t, int64_t>, 2>{{{0, 0}, {0, 0}}}).first;
        it->second[p] = {w.lo, w.hi};
      }
    std::vector<std::pair<int64_t, std::array<std::pair<int64_t, int64_t>, 2>>> all(by_start.begin(), by_start.end());
    std::vector<double> full(static_cast<size_t>(c1 - c0), NAN);  // windows protocol, per target
    for (size_t b0 = 0; b0 < all.size(); b0 += o.batch_size) {
      const size_t b1 = std::min(all.size(), b0 + o.batch_size);
      std::vector<int64_t> starts;
      for (size_t i = b0; i < b1; ++i) starts.push_back(all[i].first);
      auto w = corpus.windows(Split::Val, starts, L + 1);  // (b, L+1)
      auto x = w.slice(1, 0, L).contiguous(), y = w.slice(1, 1, L + 1).contiguous();  // (b, L)
      const Scores scores = score_rows(model, x, y, rt, o.memory_budget_bytes);
      for (int p = 0; p < 2; ++p) {
        auto mask = torch::zeros({static_cast<int64_t>(b1 - b0), L}, torch::kBool);  // (b, L)
        for (size_t i = b0; i < b1; ++i) {
          const auto [lo, hi] = all[i].second[p];
          if (hi > lo) mask[static_cast<int64_t>(i - b0)].slice(0, lo, hi).fill_(true);
        }
        acc[p].add(scores, mask);
      }
      auto nll = scores.nll.accessor<double, 2>();
      for (size_t i = b0; i < b1; ++i) {
        const auto [lo, hi] = all[i].second[0];
        for (int64_t t = lo; t < hi; ++t) full[static_cast<size_t>(all[i].first + t - c0)] = nll[static_cast<int64_t>(i - b0)][t];
      }
    }
    return full;
  }

  json result(int64_t first, bool with_key) const {
    json r = acc[0].result(false);
    r["protocol"] = "windows";
    const json sliding = acc[1].result(false);
    r["sliding"] = {{"stride", stride},
                    {"loss", sliding["loss"]},
                    {"ppl", sliding["ppl"]},
                    {"token_acc", sliding["token_acc"]},
                    {"scored_tokens", sliding["scored_tokens"]}};
    r["first_target"] = first + 1;  // the scored targets: tokens first_target .. N-1 of the validation split
    if (with_key) r["key_tokens"] = key.result();
    return r;
  }
};

// Every length at once, a chunk of targets at a time, so that nothing held grows with the split: per chunk,
// the key-token pass's short-context losses, then each length's windows over the same targets.
std::vector<json> eval_text(GPT& model, const TextCorpus& corpus, const EvalOptions& o, const Runtime& rt,
                            const KeyTokenOptions& key) {
  const int64_t N = corpus.split_tokens(Split::Val);
  // Target t is token t, predicted from tokens before it: targets 1 .. N-1; the last `targets` are scored.
  const int64_t targets = o.tokens > 0 ? std::min<int64_t>(o.tokens, N - 1) : N - 1;
  const int64_t first = N - 1 - targets, last = N - 1;  // scored: first < t <= last
  std::vector<TextLength> lengths(o.lengths.size());
  for (size_t i = 0; i < o.lengths.size(); ++i) {
    auto& s = lengths[i];
    s.L = o.lengths[i];
    s.stride = o.stride > 0 ? std::min(o.stride, s.L) : std::max(1, s.L / 2);
    s.key.options = key;
    const int64_t tokens = corpus.tokens_at(s.L);
    if (N < s.L + 1)
      s.done = not_applicable(s.L, s.L, "validation split has " + std::to_string(N) + " tokens, fewer than " + std::to_string(s.L + 1));
    else try {
        model->pos->check_length(tokens);
      } catch (const PositionLimitError& e) {
        s.done = not_applicable(s.L, tokens, e.what());
      }
  }
  const bool with_key = key.short_context > 0 && N > key.short_context;
  const int64_t chunk = std::max<int64_t>(1, o.chunk_targets);
  for (int64_t c0 = first; c0 < last; c0 += chunk) {
    const int64_t c1 = std::min(last, c0 + chunk);
    if (targets > chunk)
      spdlog::info("evaluating targets {} to {} of {}", c0 - first + 1, c1 - first, targets);
    std::vector<double> short_nll;
    if (with_key) {
      Stage stage("key-token loss: the short-context pass");
      short_nll = target_losses(model, corpus, first, last, c0, c1, key.short_context,
                                std::max<int64_t>(1, key.short_context / 2), rt, o.memory_budget_bytes, o.batch_size);
    }
    for (auto& s : lengths) {
      if (!s.done.is_null()) continue;
      Stage stage("evaluation at " + std::to_string(s.L) + " tokens");
      try {
        const auto full = s.add_chunk(model, corpus, first, last, c0, c1, o, rt);
        if (with_key) s.key.add(full, short_nll);
      } catch (const PositionLimitError& e) {
        s.done = not_applicable(s.L, corpus.tokens_at(s.L), e.what());
      }
    }
  }
  std::vector<json> out;
  for (const auto& s : lengths) out.push_back(s.done.is_null() ? s.result(first, with_key) : s.done);
  return out;
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
  // Text: every length together, a chunk of targets at a time, with the key-token loss (after LongPPL):
  // every target's loss with a short context, once for all lengths.
  std::vector<json> text_results;
  if (!corpus.is_task())
    text_results = eval_text(model, static_cast<const TextCorpus&>(corpus), o, rt, key_token_options(c, corpus));
  json results = json::array();
  for (size_t i = 0; i < o.lengths.size(); ++i) {
    const int length = o.lengths[i];
    const int64_t tokens = corpus.tokens_at(length);
    Stage stage("evaluation at " + std::to_string(tokens) + " tokens");
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
      } catch (const PositionLimitError& e) {
        r = not_applicable(length, tokens, e.what());
      }
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
  if (o.tokens <= 0) o.tokens = c.eval.tokens;
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
