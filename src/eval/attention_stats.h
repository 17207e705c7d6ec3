// What attention does in and past the training length: per layer and head, how far it reaches
// (mean distance), how spread it is (entropy, and entropy over the log of the number of keys), how
// much lands on the first token, and one example's maps. `poslab attention` and compare use it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "model/gpt.h"
#include "util/runtime.h"

namespace poslab {

// Per-head statistics of causal attention probabilities (B, H, T, T), row i a distribution over keys
// 0..i, averaged over the batch and the queries. Distance and entropy average every query; normalised
// entropy and first-token share average queries i >= 1 (query 0 has a single key: log 1 = 0, and all
// of its attention is on the first token by necessity). All (H,), double.
struct HeadStats {
  torch::Tensor distance;      // sum_j p_ij |i - j|
  torch::Tensor entropy;       // -sum_j p_ij log p_ij, nats
  torch::Tensor entropy_norm;  // entropy / log(i + 1): 1 = uniform over the causal keys, 0 = one key
  torch::Tensor first_share;   // p_i0
};
HeadStats attention_head_stats(const torch::Tensor& probs);

// probs (H, T, T) pooled to at most size x size: blocks of ceil(T / size) positions, summed over the
// keys of a block and averaged over its queries, so every row still sums to 1.
torch::Tensor pool_attention_map(const torch::Tensor& probs, int64_t size);

// Sets every layer's attention to record its probabilities while alive; probs()[l] is layer l's
// (B, H, T, T) from the last forward pass. Eval only: recording takes the explicit-scores path.
class AttentionRecorder {
 public:
  explicit AttentionRecorder(GPT& model);
  ~AttentionRecorder();
  AttentionRecorder(const AttentionRecorder&) = delete;
  AttentionRecorder& operator=(const AttentionRecorder&) = delete;
  const std::vector<torch::Tensor>& probs() const { return probs_; }

 private:
  GPT model_;
  std::vector<torch::Tensor> probs_;
};

struct AttentionOptions {
  std::vector<int> lengths;  // empty: the run's eval lengths (as `poslab eval`)
  int sequences = 8;         // validation sequences averaged at each length
  int example = 0;           // which validation sequence gives the maps
  int map_size = 64;         // maps pooled to at most this many positions a side
  bool quiet = false;        // no line per length (compare's reports)
  int threads = 0;           // intra-op threads; 0: the run's train.threads
};

// {"lengths": [{length, tokens, status, distance (L, H), entropy, entropy_norm, first_share, maps (L, H, n, n)}]}
// Lengths an encoding cannot represent are "n/a: ..." as in `poslab eval`.
nlohmann::json attention_stats(GPT& model, const Corpus& corpus, const Config& config, const AttentionOptions& options,
                               const Runtime& runtime);
// Loads a run directory, computes the statistics, writes DIR/attention.json atomically and returns it.
nlohmann::json attention_run(const std::string& dir, AttentionOptions options);

}  // namespace poslab
