// The training loop that train_new and train_resume (trainer.h) end in, on a built model, optimizer
// and data; internal to the library.
#pragma once

#include "util/torch_api.h"

#include "config/config.h"
#include "data/corpus.h"
#include "distributed/distributed.h"
#include "model/gpt.h"
#include "train/run_dir.h"
#include "train/trainer.h"
#include "util/runtime.h"

namespace poslab {

// Every rank runs this loop in lockstep from `state` (step 0, or a checkpoint's) until train.max_iters or
// `stop_at`; rank 0 alone writes the run directory `dir`.
TrainResult run_loop(const Config& c, const Corpus& corpus, const std::string& dir, GPT& model,
                     torch::optim::AdamW& optimizer, TrainState state, const Runtime& rt, Distributed& dist,
                     int64_t stop_at);

}  // namespace poslab
