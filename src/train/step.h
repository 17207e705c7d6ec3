// One training step and the validation estimate, shared by the training loop (train/trainer.h) and
// the benchmark: AdamW with decay on matrices only, autocast forward, backward whole or in batch shards.
#pragma once
#include "util/torch_api.h"

#include "config/config.h"
#include "data/corpus.h"
#include "distributed/distributed.h"
#include "model/gpt.h"
#include "util/runtime.h"

namespace poslab {

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
// Mean loss over train.eval_iters validation batches (the first `batches` of them when > 0), the same
// batches at every call (their own RNG, seeded from config.seed), so runs and benchmarks compare on one
// fixed set.
double estimate_val_loss(GPT& model, const Corpus& corpus, const Config& config, const Runtime& runtime,
                         Distributed& dist, int batches = 0);

}  // namespace poslab
