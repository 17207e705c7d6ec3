// Length-extrapolation evaluation: loss, perplexity, token accuracy, exact match (tasks) and the
// loss at every position, for each requested length. Lengths past what an encoding represents
// are reported as "n/a: ..." and the other lengths still run.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "model/gpt.h"
#include "util/runtime.h"

namespace poslab {

// For evaluate_run, empty/zero fields take the run's eval config (and 1x,2x,4x,8x the training
// length when that lists no lengths).
struct EvalOptions {
  std::vector<int> lengths;  // tasks: items per example; text: tokens per window
  int batches = 0;
  int batch_size = 0;
  int stride = 0;            // text sliding window; 0 = half the length
  int tokens = 0;            // text: validation targets scored at every length (the last ones); 0 = all
  // RoPE scaling for this evaluation; unset: the run's eval.rope_scaling. original_length 0 = the
  // training length in tokens.
  std::optional<RopeScalingConfig> rope_scaling;
  // `--set eval.KEY=VALUE` overrides of the run's eval section (an evaluation variant), applied first.
  std::vector<std::string> overrides;
  // Non-empty: write DIR/eval-TAG.json instead of DIR/eval.json.
  std::string tag;
  int64_t memory_budget_bytes = int64_t{512} << 20;  // activations per sub-batch, split to fit
  // Text: targets evaluated at a time, every length and the key-token pass together, so that memory is
  // set by this and not by the validation split's size. Chunks change no target's window.
  int64_t chunk_targets = int64_t{1} << 20;
  // A progress line after a batch (tasks) or a batch of windows (text) once this many seconds have passed
  // since the last (a 100,000-token length takes minutes); the lengths' own lines come regardless.
  double progress_seconds = 10;
};

// The RoPE scaling of one evaluation (eval, probe), set on the model while this lives, then the model's own
// (trained-with) one again: the one asked for (a command's option), else an active eval.rope_scaling of
// `c`, else the model's own (model.pos_encoding.rope_scaling, "none" for most runs). `train_tokens` is the
// original_length a config's 0 stands for.
struct EvalRopeScaling {
  EvalRopeScaling(GPT& model, const Config& c, const std::optional<RopeScalingConfig>& asked, int64_t train_tokens);
  ~EvalRopeScaling();
  EvalRopeScaling(const EvalRopeScaling&) = delete;
  EvalRopeScaling& operator=(const EvalRopeScaling&) = delete;
  nlohmann::json to_json() const;  // "none", or {kind, factor, original_length} as eval.json records it
  GPT& model;
  RopeScaling previous, scaling;
};

// A window of the text protocols: tokens start .. start+L-1 in, scoring its targets at positions [lo, hi).
struct TextWindow {
  int64_t start, lo, hi;
  bool operator==(const TextWindow& o) const { return start == o.start && lo == o.lo && hi == o.hi; }
};
// Windows of `length` tokens that score the targets first < t <= last of a split once each: from the
// end backwards, each scores the `step` targets it ends on (windows protocol: step = length; sliding:
// the stride); a window that would start before token 0 starts there and scores every target left.
std::vector<TextWindow> plan_text_windows(int64_t first, int64_t last, int64_t length, int64_t step);
// The windows of plan_text_windows(first, last, length, step) that score targets in (c0, c1], each scoring
// only those: the same windows a chunk of targets at a time, without the whole plan in memory.
std::vector<TextWindow> plan_text_windows_in(int64_t first, int64_t last, int64_t length, int64_t step, int64_t c0,
                                             int64_t c1);

// Per-token scores of rows of windows: the loss of each target and whether it is the argmax, on the
// CPU. Targets < 0 score 0 and miss. Rows go through the model in sub-batches that fit `budget`.
struct Scores {
  torch::Tensor nll;  // (B, T) double
  torch::Tensor hit;  // (B, T) bool
};
Scores score_rows(GPT& model, const torch::Tensor& x, const torch::Tensor& y, const Runtime& runtime, int64_t budget);
// The loss of the targets c0 < t <= c1 of the validation split as the windows of `window` tokens moving by `step`
// over first < t <= last score them (plan_text_windows_in); out[t - c0 - 1], size c1 - c0.
std::vector<double> target_losses(GPT& model, const TextCorpus& corpus, int64_t first, int64_t last, int64_t c0,
                                  int64_t c1, int64_t window, int64_t step, const Runtime& runtime, int64_t budget,
                                  int batch_size);

// The lengths a run is evaluated at by default: its eval.lengths, else 1x, 2x, 4x and 8x its training length.
std::vector<int> default_eval_lengths(const Config& config);
// What an evaluation was run with, as eval.json's "settings" records it: the run's eval section as used
// (lengths, batches, stride, tokens, key tokens, RoPE scaling; not batch_size, which changes no number) and
// a --rope-scaling given on the command line (null without). compare checks a cell's files against it.
nlohmann::json evaluation_settings(const Config& config, const EvalOptions& options);
// Evaluates a model on a corpus; returns {"results": [...]} (see docs/eval.md for the fields).
nlohmann::json evaluate(GPT& model, const Corpus& corpus, const Config& config, const EvalOptions& options,
                        const Runtime& runtime);
// Loads a run directory, evaluates, writes DIR/eval.json atomically and returns it.
nlohmann::json evaluate_run(const std::string& dir, EvalOptions options);
// A fixed-width table of an eval.json for the console.
std::string format_eval_table(const nlohmann::json& eval);

}  // namespace poslab
