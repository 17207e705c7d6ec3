// Attention statistics: record each layer's softmax probabilities on a few validation sequences
// per length, reduce them to per-head numbers, and keep one example's maps (pooled) for plotting.
#include "eval/attention_stats.h"

#include <spdlog/spdlog.h>

#include <cmath>

#include "eval/evaluator.h"
#include "train/memory_estimate.h"
#include "train/run_dir.h"
#include "util/files.h"
#include "util/stage.h"
#include "util/tensor_json.h"

namespace poslab {
using nlohmann::json;

HeadStats attention_head_stats(const torch::Tensor& probs) {
  auto p = probs.to(torch::kDouble);  // (B, H, T, T)
  const int64_t T = p.size(-1);
  auto pos = torch::arange(T, torch::kDouble);
  auto dist = (pos.view({-1, 1}) - pos.view({1, -1})).abs();  // (T, T): |i - j|
  auto entropy = -torch::xlogy(p, p).sum(-1);                 // (B, H, T); 0 log 0 = 0
  HeadStats s;
  s.distance = (p * dist).sum(-1).mean(std::vector<int64_t>{0, 2});
  s.entropy = entropy.mean(std::vector<int64_t>{0, 2});
  if (T > 1) {
    auto log_keys = torch::log(pos.slice(0, 1) + 1);  // (T-1,): log(i + 1) for queries i >= 1
    s.entropy_norm = (entropy.slice(-1, 1) / log_keys).mean(std::vector<int64_t>{0, 2});
    s.first_share = p.select(-1, 0).slice(-1, 1).mean(std::vector<int64_t>{0, 2});  // p_i0 for i >= 1
  } else {  // one token: no query i >= 1, over which both are defined (null in attention.json)
    s.entropy_norm = torch::full({p.size(1)}, NAN, torch::kDouble);
    s.first_share = torch::full({p.size(1)}, NAN, torch::kDouble);
  }
  return s;
}

torch::Tensor pool_attention_map(const torch::Tensor& probs, int64_t size) {
  const int64_t H = probs.size(0), T = probs.size(-1);
  const int64_t b = (T + size - 1) / size, n = (T + b - 1) / b;
  if (b == 1) return probs.to(torch::kDouble);
  auto padded = torch::zeros({H, n * b, n * b}, torch::kDouble);
  padded.slice(1, 0, T).slice(2, 0, T).copy_(probs);
  auto keys_summed = padded.view({H, n * b, n, b}).sum(-1);  // (H, n*b, n)
  auto rows = keys_summed.view({H, n, b, n}).sum(2);          // (H, n, n)
  auto count = torch::clamp_max(T - torch::arange(n, torch::kDouble) * b, static_cast<double>(b));  // queries per block
  return rows / count.view({1, -1, 1});
}

AttentionRecorder::AttentionRecorder(GPT& model) : model_(model), probs_(model->h->size()) {
  for (size_t l = 0; l < model_->h->size(); ++l) model_->h[l]->as<Block>()->attn->record_probs = &probs_[l];
}

AttentionRecorder::~AttentionRecorder() {
  for (size_t l = 0; l < model_->h->size(); ++l) model_->h[l]->as<Block>()->attn->record_probs = nullptr;
}

namespace {

// Up to `count` validation inputs of `length` (items or tokens), (count, T): the task's eval batch
// (same seed as `poslab eval`) or consecutive text windows of the validation split.
torch::Tensor validation_inputs(const Corpus& corpus, const Config& c, int length, int count) {
  if (corpus.is_task()) {
    Rng rng(static_cast<uint64_t>(c.seed) * 1000003ULL + static_cast<uint64_t>(length));
    return static_cast<const TaskCorpus&>(corpus).batch_at_length(length, count, rng).x;
  }
  const auto& text = static_cast<const TextCorpus&>(corpus);
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + length + 1 <= text.split_tokens(Split::Val) && static_cast<int>(starts.size()) < count; s += length)
    starts.push_back(s);
  return starts.empty() ? torch::Tensor() : text.windows(Split::Val, starts, length);
}

json stats_at_length(GPT& model, const Corpus& corpus, const Config& c, int length, const AttentionOptions& o,
                     const Runtime& rt) {
  const int64_t tokens = corpus.tokens_at(length);
  json r = {{"length", length}, {"tokens", tokens}};
  std::string na;  // why this length cannot be measured, "" when it can
  try {
    model->pos->check_length(tokens);
  } catch (const PositionLimitError& e) {
    na = e.what();
  }
  torch::Tensor inputs;
  if (na.empty()) {
    inputs = validation_inputs(corpus, c, length, std::max(o.sequences, o.example + 1));
    if (!inputs.defined()) na = "validation split has fewer than " + std::to_string(length + 1) + " tokens";
  }
  if (!na.empty()) {  // said, as eval says its n/a lengths, not only written to attention.json
    r["status"] = "n/a: " + na;
    if (!o.quiet) spdlog::info("attention length {:>5} ({} tokens): n/a: {}", length, tokens, na);
    return r;
  }
  const int64_t n_stats = std::min<int64_t>(o.sequences, inputs.size(0));
  const int64_t example = o.example;  // checked against every length in attention_stats, before any work
  const int64_t L = static_cast<int64_t>(model->h->size());
  std::vector<torch::Tensor> sums(4);  // distance, entropy, entropy_norm, first_share: (L, H) each
  json maps = json::array();
  AttentionRecorder recorder(model);
  // One sequence at a time: the (H, T, T) probabilities of every layer stay small at long lengths.
  for (int64_t s = 0; s < std::max(n_stats, example + 1); ++s) {
    model->forward(inputs.slice(0, s, s + 1).to(rt.device));
    if (s < n_stats) {
      std::vector<torch::Tensor> per_layer[4];
      for (const auto& probs : recorder.probs()) {
        auto hs = attention_head_stats(probs.cpu());
        per_layer[0].push_back(hs.distance), per_layer[1].push_back(hs.entropy);
        per_layer[2].push_back(hs.entropy_norm), per_layer[3].push_back(hs.first_share);
      }
      for (int k = 0; k < 4; ++k) {
        auto stacked = torch::stack(per_layer[k]);  // (L, H)
        sums[k] = sums[k].defined() ? sums[k] + stacked : stacked;
      }
    }
    if (s == example)
      for (const auto& probs : recorder.probs()) maps.push_back(tensor_to_json(pool_attention_map(probs[0].cpu(), o.map_size), 5));
  }
  const char* names[4] = {"distance", "entropy", "entropy_norm", "first_share"};
  for (int k = 0; k < 4; ++k) r[names[k]] = tensor_to_json(sums[k] / static_cast<double>(n_stats));
  const int64_t T = inputs.size(1);
  r["status"] = "ok";
  r["sequences"] = n_stats;
  r["example"] = example;
  r["map_block"] = (T + o.map_size - 1) / o.map_size;
  r["maps"] = maps;  // (L, H, n, n)
  if (!o.quiet)
    spdlog::info("attention length {:>5} ({} tokens): {} layers, mean distance {:.2f}{}", length, tokens, L,
                 (sums[0] / static_cast<double>(n_stats)).mean().item<double>(),
                 n_stats < o.sequences ? " over the " + std::to_string(n_stats) + " sequence(s) the split holds" : "");
  return r;
}

}  // namespace

json attention_stats(GPT& model, const Corpus& corpus, const Config& c, const AttentionOptions& o, const Runtime& rt) {
  if (o.sequences <= 0) throw ConfigError("--sequences must be a positive integer");
  if (o.example < 0) throw ConfigError("--example must be a non-negative integer");
  if (o.map_size <= 0) throw ConfigError("--map-size must be a positive integer");
  torch::InferenceMode guard;
  set_blas_threads(rt, /*shards_running=*/false);
  model->eval();
  if (o.example >= o.sequences)
    throw ConfigError("--example " + std::to_string(o.example) + ": must be below --sequences (" +
                      std::to_string(o.sequences) + "), 0 being the first validation sequence");
  for (int length : o.lengths) {
    if (length <= 0) throw ConfigError("--lengths: each length must be a positive integer, got " + std::to_string(length));
    if (rt.device.is_cpu())  // every length, before any work
      check_attention_fits(c, corpus.tokens_at(length), model->pos->bias_scratch_bytes_per_pair());
    if (!corpus.is_task()) {  // text: consecutive windows of the validation split, as many as it holds
      const int64_t windows = (static_cast<const TextCorpus&>(corpus).split_tokens(Split::Val) - 1) / length;
      if (windows > 0 && o.example >= windows)
        throw ConfigError("--example " + std::to_string(o.example) + ": the validation split holds " +
                          std::to_string(windows) + " window(s) of " + std::to_string(length) +
                          " tokens; choose 0 to " + std::to_string(windows - 1));
    }
  }
  json lengths = json::array();
  for (int length : o.lengths) {
    Stage stage("while computing attention statistics at " + std::to_string(corpus.tokens_at(length)) + " tokens");
    lengths.push_back(stats_at_length(model, corpus, c, length, o, rt));
  }
  return {{"encoding", c.model.pos_encoding.kind},
          {"family", model->pos->family()},
          {"data", corpus.is_task() ? c.data.task : c.data.kind},  // text or tokens
          {"length_unit", corpus.is_task() ? "items" : "tokens"},
          {"train_length", corpus.train_length()},
          {"train_tokens", corpus.tokens_at(corpus.train_length())},
          {"n_layer", c.model.n_layer},
          {"n_head", c.model.n_head},
          {"map_size", o.map_size},
          {"lengths", lengths}};
}

json attention_run(const std::string& dir, AttentionOptions o) {
  auto run = load_run(dir);
  const Config& c = run.config;
  if (o.lengths.empty()) o.lengths = default_eval_lengths(c);
  Config rc = c;
  if (o.threads > 0) rc.train.threads = o.threads;
  Runtime rt = make_runtime(in_run_precision(rc, RunPaths{dir}, run.state.precision, "reading attention"));
  run.model->to(rt.device);
  // The validation split is checked against the lengths read here, not the run's own eval.lengths.
  Config cc = c;
  cc.eval.lengths = o.lengths;
  auto corpus = make_corpus(cc, run.tokenizer);
  check_validation_files(dir);
  // With the run's eval.rope_scaling, as eval and probe read it: the pictures are of the model they score.
  const EvalRopeScaling scaling(run.model, c, std::nullopt, corpus->tokens_at(corpus->train_length()));
  json out = attention_stats(run.model, *corpus, c, o, rt);
  out["rope_scaling"] = scaling.to_json();
  out["run"] = dir;
  out["step"] = run.state.step;
  write_file_atomic(dir + "/attention.json", out.dump() + "\n");
  return out;
}

}  // namespace poslab
