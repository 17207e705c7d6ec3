// The mqar probe: examples of the run's own task at each tested length, on the distance axis (pairs
// fixed, the query region stretched) and the load axis (pairs scaled with the length), scored by the
// argmax at each query position; Wilson intervals per cell.
#include "probe/mqar.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "data/tasks.h"
#include "probe/probe.h"
#include "probe/stats.h"
#include "util/progress.h"
#include "util/stage.h"

namespace poslab {
using nlohmann::json;

int mqar_train_tokens(const Config& c) { return task_tokens("mqar", c.data.max_len, c.data.mqar) - 1; }

// Load axis: the most pairs whose training-shaped example ((2 + space) tokens a pair, plus '|') fits L.
static int load_pairs(const Config& c, int L) { return (L - 1) / (2 + c.data.mqar.space); }

void check_mqar_probe(const Config& c, const ProbeOptions& o) {
  if (c.data.kind != "task" || c.data.task != "mqar")
    throw ConfigError("--task mqar: the run trained on " + (c.data.kind == "task" ? "data.task " + c.data.task : "data.kind " + c.data.kind) +
                      "; the mqar probe scores a run trained on data.task mqar");
  const int K = c.data.max_len, Q = mqar_queries(K, c.data.mqar);
  const int need = std::max(2 * K + 1 + Q, 3 + c.data.mqar.space);
  for (int L : o.lengths)
    if (L < need)
      throw ConfigError("--lengths: " + std::to_string(L) + " tokens is too short for mqar: the run's " + std::to_string(K) +
                        " pairs and " + std::to_string(Q) + " queries need at least " + std::to_string(need) + " tokens");
}

AnswerScores score_answers(GPT& model, const Batch& batch, const Runtime& rt) {
  torch::InferenceMode guard;
  model->eval();
  AnswerScores s;
  const int64_t N = batch.x.size(0), T = batch.x.size(1);
  const auto& m = model->config;
  // Activations per row (residual stream, q/k/v, MLP, logits): the model runs attention in blocks.
  const int64_t row_bytes = T * (m.n_embd * 16 + int64_t{m.vocab_size} * 3) * 4;
  const int64_t rows = std::max<int64_t>(1, (int64_t{256} << 20) / std::max<int64_t>(1, row_bytes));
  for (int64_t b0 = 0; b0 < N; b0 += rows) {
    auto x = batch.x.slice(0, b0, std::min(N, b0 + rows)).to(rt.device);  // (B, T)
    auto y = batch.y.slice(0, b0, std::min(N, b0 + rows)).to(rt.device);  // (B, T), -1 off the answers
    torch::Tensor logits;
    {
      AutocastGuard autocast(rt);
      logits = model->forward(x).to(torch::kFloat);  // (B, T, V)
    }
    auto mask = y.ge(0);                                                                          // (B, T)
    auto safe_y = y.clamp_min(0);
    auto logp = torch::log_softmax(logits, -1).gather(-1, safe_y.unsqueeze(-1)).squeeze(-1) * mask;  // (B, T)
    auto hits = logits.argmax(-1).eq(safe_y).logical_and(mask);                                    // (B, T)
    auto answers = mask.sum(1).to(torch::kDouble).clamp_min(1);                                    // (B,)
    auto right = hits.sum(1).to(torch::kDouble);                                                   // (B,)
    s.trials += x.size(0);
    s.exact += right.eq(mask.sum(1).to(torch::kDouble)).sum().item<int64_t>();
    s.accuracy_sum += (right / answers).sum().item<double>();
    s.logprob_sum += (logp.to(torch::kDouble).sum(1) / answers).sum().item<double>();
  }
  return s;
}

static json cell(int length, const std::string& axis, int pairs, int queries) {
  return {{"length", length}, {"depth", nullptr}, {"control", nullptr}, {"axis", axis}, {"pairs", pairs}, {"queries", queries}};
}

// One seed per cell, so that a cell's examples do not depend on which other cells run.
static uint64_t cell_seed(int seed, int length, int axis) {
  return static_cast<uint64_t>(seed) * 0x100000001B3ULL ^ static_cast<uint64_t>(length) * 1000003ULL ^
         static_cast<uint64_t>(axis + 1) * 0x9E3779B1ULL;
}

json mqar_probe(GPT& model, const Config& c, const ProbeOptions& o, const Runtime& rt) {
  check_mqar_probe(c, o);
  TaskCorpus corpus(c.data);
  const auto& m = c.data.mqar;
  json results = json::array();
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t li = 0; li < o.lengths.size(); ++li) {
    const int L = o.lengths[li];
    Stage stage("during the mqar probe at " + std::to_string(L) + " tokens");
    for (const std::string axis : {"distance", "load"}) {
      const int K = axis == "distance" ? c.data.max_len : load_pairs(c, L);
      const int Q = mqar_queries(K, m);
      json r = cell(L, axis, K, Q);
      std::string why = encoding_length_limit(model, L);
      if (why.empty() && K > c.data.symbols)
        why = std::to_string(K) + " pairs need more distinct key letters than data.symbols = " + std::to_string(c.data.symbols);
      if (!why.empty()) {
        r.update({{"status", "n/a: " + why}, {"trials", 0}, {"exact", nullptr}, {"exact_low", nullptr},
                  {"exact_high", nullptr}, {"digit_accuracy", nullptr}, {"key_logprob", nullptr}});
        results.push_back(r);
        continue;
      }
      Rng rng(cell_seed(o.seed, L, axis == "distance" ? 0 : 1));
      std::vector<Example> examples;
      for (int t = 0; t < o.trials; ++t) examples.push_back(make_mqar_example(K, L - 2 * K - 1, c.data.symbols, m, rng));
      const AnswerScores s = score_answers(model, corpus.collate(examples), rt);
      const auto [lo, hi] = wilson_interval(s.exact, s.trials);
      const double n = static_cast<double>(s.trials);
      r.update({{"status", "ok"}, {"trials", s.trials}, {"exact", s.exact / n}, {"exact_low", lo}, {"exact_high", hi},
                {"digit_accuracy", s.accuracy_sum / n}, {"key_logprob", s.logprob_sum / n}});
      results.push_back(r);
    }
    if (!o.quiet) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      spdlog::info("mqar probe: length {} ({}/{}) done, {} elapsed", L, li + 1, o.lengths.size(), format_duration(secs));
    }
  }
  return {{"pairs", c.data.max_len}, {"queries", mqar_queries(c.data.max_len, m)}, {"gaps", m.gaps},
          {"power_a", m.power_a}, {"space", m.space}, {"symbols", c.data.symbols}, {"results", results}};
}

}  // namespace poslab
