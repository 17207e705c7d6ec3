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
#include "train/step.h"
#include "util/runtime.h"

namespace poslab {

struct TrainResult {
  std::string status;  // done | interrupted | failed
  nlohmann::json summary;
  Config config;  // the run's resolved config
  // Interrupted by SIGINT/SIGTERM, on this rank or on any other (not by --stop-at): every rank exits 130.
  bool signalled = false;
  // A resume found the run finished already: nothing was trained or written.
  bool was_finished = false;
};

// Raised when the loss turns NaN or Inf: the run is marked failed, its last checkpoint kept.
struct DivergenceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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
