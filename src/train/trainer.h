// The training loop: AdamW (decay on matrices only), warmup + cosine LR, gradient clipping,
// periodic validation and atomic checkpoints, metrics.jsonl and summary.json in the run directory.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "data/corpus.h"
#include "distributed/distributed.h"
#include "distributed/launch.h"
#include "model/gpt.h"
#include "util/runtime.h"

namespace poslab {

struct TrainResult {
  std::string status;  // done | interrupted | failed
  nlohmann::json summary;
  Config config;  // the run's resolved config
  // Interrupted by SIGINT/SIGTERM, on this rank or on any other (not by --stop-at): every rank exits 130.
  bool signalled = false;
};

// Raised when the loss turns NaN or Inf: the run is marked failed, its last checkpoint kept.
struct DivergenceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// AdamW with two groups: weight decay on the model's decaying matrices, none on the rest.
std::unique_ptr<torch::optim::AdamW> make_optimizer(GPT& model, const TrainConfig& train);
// One optimizer step at learning rate `lr` on `batch` (moved to the runtime's device): forward
// under autocast, backward, clipping, update. Returns the loss, still on the device.
torch::Tensor train_step(GPT& model, torch::optim::AdamW& optimizer, const Batch& batch, double lr,
                         double grad_clip, const Runtime& runtime);
// The same on this rank's rows of a global batch: the loss is summed over `batch` and divided by
// `scored`, the global batch's count of scored targets, so that the gradients summed over ranks
// (dist.all_reduce_gradients, before clipping) equal a single process's. Returns this rank's share
// of the mean loss (dist.sum of it is the global loss).
torch::Tensor train_step(GPT& model, torch::optim::AdamW& optimizer, const Batch& batch, double scored, double lr,
                         double grad_clip, const Runtime& runtime, Distributed& dist);
// Mean loss over train.eval_iters validation batches, the same batches at every call (their own
// RNG, seeded from config.seed), so runs and benchmarks compare on one fixed set.
double estimate_val_loss(GPT& model, const Corpus& corpus, const Config& config, const Runtime& runtime,
                         Distributed& dist);

// Starts a new run in `run_dir` (which must not hold a run). Everything is validated — config,
// data, model — before the directory is created, so a bad input leaves nothing behind.
// `stop_at` > 0 stops (checkpointed, resumable, status "interrupted") before that step.
// `init_from` non-empty: start from that run's weights (train/init_from.h) with a new optimizer and
// schedule at step 0; config may raise model.block_size and set model.pos_encoding.rope_scaling.
// `launch` with a world above 1: one rank of a data-parallel run (src/distributed); every rank calls
// this with the same arguments, and rank 0 alone writes the run directory.
TrainResult train_new(Config config, const std::string& run_dir, int64_t stop_at = 0, const std::string& init_from = "",
                      const Launch& launch = {});
// Continues the run in `run_dir` from its checkpoint (or from scratch if none was written yet),
// with the world size that wrote it.
TrainResult train_resume(const std::string& run_dir, int64_t stop_at = 0, const Launch& launch = {});

}  // namespace poslab
