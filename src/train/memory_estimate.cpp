// Memory estimates: training (weights x4 for weights, gradients and two AdamW moments, plus the
// activations backward keeps) and evaluation (weights, one layer's activations, one attention block).
// Deliberately simple and a little generous; they only have to catch runs that cannot possibly fit,
// with numbers a user can act on.
#include "train/memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "model/gpt.h"

namespace poslab {

// Per block: qkv (3C^2) + projection (C^2) + MLP (8C^2) + norms; token table V*C; a learned table T*C.
// Counted generously for every encoding (the learned table is the largest positional parameter).
static int64_t count_parameters(const ModelConfig& m) {
  const int64_t C = m.n_embd, L = m.n_layer, V = std::max(1, m.vocab_size);
  // Randomized positions reach max_position - 1: a learned table has that many rows.
  const int64_t rows = m.pos_encoding.kind == "learned" ? std::max<int64_t>(m.block_size, m.pos_encoding.randomize.max_position)
                                                        : m.block_size;
  return L * (12 * C * C + 4 * C) + V * C + rows * C + 2 * C;
}

MemoryEstimate estimate_training_memory(const Config& c) {
  const auto& m = c.model;
  const int64_t C = m.n_embd, L = m.n_layer, H = m.n_head, T = m.block_size, V = std::max(1, m.vocab_size);
  const int64_t B = c.train.batch_size;
  MemoryEstimate e;
  e.params = count_parameters(m);
  e.weights_bytes = e.params * 4 * 4;
  // Per block and token, backward keeps ~34 values of width C (nanoGPT-style accounting), plus the
  // (H, T, T) attention probabilities and scores; logits (B, T, V) twice (softmax and its gradient).
  const int64_t per_block = B * T * C * 34 + B * H * T * T * 2;
  e.activations_bytes = (L * per_block + 2 * B * T * V) * 4;
  return e;
}

MemoryEstimate estimate_evaluation_memory(const Config& c, int64_t tokens, int64_t attention_budget_bytes) {
  const auto& m = c.model;
  const int64_t C = m.n_embd, T = tokens, V = std::max(1, m.vocab_size);
  MemoryEstimate e;
  e.params = count_parameters(m);
  e.weights_bytes = e.params * 4;  // no gradients or optimizer state at evaluation
  // Without autograd only the layer being computed is alive: the residual stream, q/k/v, the MLP's
  // 4C and a few temporaries (~16 C per token); the logits and their log-softmax (3 V); one block
  // of attention scores, at most the model's budget, or the whole (H, T, T) three times when smaller.
  const double whole_scores = static_cast<double>(m.n_head) * T * T * 4 * 3;  // double: T^2 overflows int64 past ~1e9
  e.activations_bytes = T * (16 * C + 3 * V) * 4 +
                        static_cast<int64_t>(std::min(whole_scores, static_cast<double>(attention_budget_bytes)));
  return e;
}

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:") return value * 1024;
  return -1;
}

std::string format_bytes(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= (1LL << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1LL << 30));
  else std::snprintf(buf, sizeof buf, "%.0f MiB", b / (1LL << 20));
  return buf;
}

void check_training_fits(const Config& c) {
  if (c.device == "cuda") return;  // the GPU's memory is not /proc/meminfo's
  const auto e = estimate_training_memory(c);
  const int64_t available = available_memory_bytes();
  if (available <= 0 || e.total() <= available) return;
  std::ostringstream msg;
  // Millions to 2 decimals below 10M: a small model refused for its batch said "0M".
  msg << "model too large for this machine: training needs ~" << format_bytes(e.total()) << " (" << std::fixed
      << std::setprecision(e.params < 10000000 ? 2 : 0) << e.params / 1e6 << std::defaultfloat
      << "M parameters: " << format_bytes(e.weights_bytes) << " for weights, gradients and AdamW; "
      << format_bytes(e.activations_bytes) << " of activations at batch " << c.train.batch_size << " x "
      << c.model.block_size << " tokens), " << format_bytes(available) << " available; reduce ";
  // Where the token embedding is most of the model, the vocabulary is what to look at (a data.vocab_size typo).
  const int64_t embedding = c.model.vocab_size * static_cast<int64_t>(c.model.n_embd);
  const int64_t table = c.model.pos_encoding.kind == "learned"
                            ? static_cast<int64_t>(c.model.pos_encoding.randomize.max_position) * c.model.n_embd
                            : 0;
  if (table * 2 > e.params)  // a position table of randomize.max_position rows is most of the model
    msg << "model.pos_encoding.randomize.max_position (" << c.model.pos_encoding.randomize.max_position
        << " rows of the position table)";
  else if (embedding * 2 > e.params)
    msg << "the vocabulary (" << c.model.vocab_size << " tokens" << (c.data.vocab_size > 0 ? ", data.vocab_size" : "")
        << "), model.n_embd, train.batch_size or model.block_size";
  else
    msg << "model.n_embd, model.n_layer, train.batch_size or model.block_size";
  throw ConfigError(msg.str());
}

// Throws ConfigError "WHAT at N tokens needs ~X (...), Y available; ..." when `e` exceeds what is free.
static void refuse_if_too_big(const MemoryEstimate& e, const std::string& what, int64_t tokens,
                              const std::string& fix = "use shorter --lengths") {
  const int64_t available = available_memory_bytes();
  if (available <= 0 || e.total() <= available) return;
  std::ostringstream msg;
  msg << what << " at " << tokens << " tokens needs ~" << format_bytes(e.total()) << " (" << format_bytes(e.weights_bytes)
      << " of weights, " << format_bytes(e.activations_bytes) << " of activations for one sequence), "
      << format_bytes(available) << " available; " << fix;
  throw ConfigError(msg.str());
}

void check_evaluation_fits(const Config& c, int64_t tokens, const std::string& key) {
  refuse_if_too_big(estimate_evaluation_memory(c, tokens, GPTImpl::kDefaultAttentionBudget),
                    key.empty() ? "evaluation" : key + ": evaluation", tokens,
                    "use shorter " + (key.empty() ? std::string("--lengths") : key));
}

void check_attention_fits(const Config& c, int64_t tokens, int64_t bias_scratch_per_pair) {
  // Recording attends whole: the scores in flight (3 copies) plus every layer's kept probabilities, and
  // the bias's own scratch over the whole (T, T) (FIRE's hidden layer).
  const double kept = (static_cast<double>(c.model.n_layer + 3) * c.model.n_head * 4 + bias_scratch_per_pair) *
                      static_cast<double>(tokens) * tokens;
  auto e = estimate_evaluation_memory(c, tokens, 0);
  e.activations_bytes += static_cast<int64_t>(std::min(kept, 9.0e18));
  refuse_if_too_big(e, "attention statistics", tokens);
}

}  // namespace poslab
