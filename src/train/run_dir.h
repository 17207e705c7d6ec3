// A run directory and what it holds: config.json (resolved), vocab.json (+ tokenizer.model for
// SentencePiece runs), checkpoint.pt
// (model + optimizer + step + RNG + config, written atomically), model.pt (name -> tensor dict
// for Python's torch.load), metrics.jsonl, summary.json, eval.json, train.log; init_from.json when
// the run started from another run's weights.
#pragma once
#include "util/torch_api.h"

#include <map>
#include <memory>
#include <string>

#include "config/config.h"
#include "data/tokenizer.h"
#include "model/gpt.h"

namespace poslab {

struct RunPaths {
  std::string dir;
  std::string config() const { return dir + "/config.json"; }
  // The run's config, read from config.json; an error in it names the file (it is the run's, not a --config).
  Config read_config() const;
  std::string vocab() const { return dir + "/vocab.json"; }
  // The run's vocabulary, read from vocab.json; a missing one is named as the run's, not as a config.
  Tokenizer read_vocab() const;
  std::string tokenizer_model() const { return dir + "/tokenizer.model"; }  // SentencePiece runs
  // Where text tokenized with SentencePiece is cached: shared by the runs beside this one.
  std::string cache() const;
  std::string checkpoint() const { return dir + "/checkpoint.pt"; }
  std::string weights() const { return dir + "/model.pt"; }
  std::string metrics() const { return dir + "/metrics.jsonl"; }
  std::string summary() const { return dir + "/summary.json"; }
  std::string init_from() const { return dir + "/init_from.json"; }  // the run whose weights it started from
  std::string data_files() const { return dir + "/data_files.json"; }  // the identity of the files it trains on
  // eval.json, or eval-TAG.json for a tagged evaluation variant (e.g. a rope scaling).
  std::string eval(const std::string& tag = "") const { return dir + (tag.empty() ? "/eval.json" : "/eval-" + tag + ".json"); }
};

// Training state restored on resume, besides the model and optimizer.
struct TrainState {
  int64_t step = 0;          // the next step to run
  uint64_t data_rng = 0;     // Rng::state of the training batch stream
  double best_val_loss = 0;  // NaN-free only after the first evaluation
  bool has_best = false;
  double train_seconds = 0;  // wall time spent training before this process
  int64_t tokens = 0;        // tokens trained on before this process
  int64_t world_size = 1;    // ranks of the run that wrote it (a resume needs the same)
  std::string precision;     // "bf16" or "fp32", what the run trains in; "" in checkpoints written before it was kept
  torch::Tensor rank_rng;    // (world_size, bytes): each rank's own torch RNG (dropout); undefined in one process
};

// The precision a run trained in, for the commands that read or resume it where its config says "auto" (on a CPU
// a timing, model/precision_choice.h, that must not choose anew halfway through a run or between the run and its
// evaluation): `from_checkpoint` where it is "bf16" or "fp32", else the run's summary.json's; "" where neither says
// (a warning names the summary.json that could not say), and auto chooses anew.
std::string recorded_precision(const RunPaths& run, const std::string& from_checkpoint);
// The "precision" a checkpoint keeps ("" before it kept one); the file is read whole (ConfigError where it cannot be).
std::string checkpoint_precision(const std::string& path);
// c with train.precision "auto" replaced by `recorded` where that precision can run here (bf16 on a CPU without
// AVX512_BF16 or AMX cannot: auto chooses anew there).
Config with_precision(Config c, const std::string& recorded);
// with_precision(c, recorded_precision(run, from_checkpoint)), said in one line where it replaced "auto"
// ("train.precision auto: evaluating in fp32, as the run trained"; once a process); `doing` names the command's work.
Config in_run_precision(const Config& c, const RunPaths& run, const std::string& from_checkpoint, const std::string& doing);

void save_checkpoint(const std::string& path, GPT& model, torch::optim::Optimizer& optimizer, const TrainState& state,
                     const nlohmann::json& config);
// Loads weights (and optimizer state when given) into an already-built model; returns the state.
// Throws ConfigError naming the file for truncated/corrupt files and for mismatched models.
TrainState load_checkpoint(const std::string& path, GPT& model, torch::optim::Optimizer* optimizer);
// The model weights alone (no optimizer, step or RNG state): starting a new run from another's.
void load_checkpoint_weights(const std::string& path, GPT& model);
// model.pt: a plain name -> tensor dict (torch::pickle_save), readable by Python's torch.load.
void save_weights(const std::string& path, GPT& model);

// A finished or interrupted run, loaded for evaluation or sampling.
struct LoadedRun {
  Config config;
  CharTokenizer tokenizer;
  GPT model{nullptr};
  TrainState state;
};
LoadedRun load_run(const std::string& dir);
bool is_run_dir(const std::string& dir);
// data_files.json: each file the run's corpus reads (data/file_identity.h), with its identity, as the run starts.
void record_data_files(const RunPaths& run, const Config& c);
// Refuses (ConfigError: `context`, the file, what changed, then `consequence`) a file of one of `roles` whose
// identity differs from the run's record. A run without a record (written before runs kept one) passes.
// `identities` (path -> identity), if given, keeps each file's identity for the next call: a grid's cells share files.
void check_data_files(const RunPaths& run, const std::vector<std::string>& roles, const std::string& context,
                      const std::string& consequence, std::map<std::string, nlohmann::json>* identities = nullptr);
// The same for a command that reads the run's validation split (eval, attention, a probe's text haystack).
void check_validation_files(const std::string& dir);

// A `poslab compare` output directory (experiment.json): its runs are its cells/NAME, and a run of its
// own there, or a grid written into a run, would mix two outputs in one directory.
bool is_compare_dir(const std::string& dir);
// Where `dir` (not yet a run or compare output itself) lies in another output's own files: one of a compare
// output's folders (OUT/cells, OUT/logs, OUT/configs; a cell's run goes in OUT/cells/NAME, which is allowed to
// `train`), or, with `in_runs`, inside a train run. "" where nowhere, else what it is in, for an error.
std::string inside_another_output(const std::string& dir, bool in_runs);
// For `train --out`: the first file (by name) in `dir` that is neither a run's nor hidden, "" where there is none
// (or no directory). What a run's start writes before config.json (vocab.json, tokenizer.model) and hidden files
// (its lock, an atomic write's temporary) do not count, so that a start stopped midway may be started again; nor
// do *.log files, which a batch scheduler may write into the run's directory before poslab starts (Slurm's --output).
std::string file_not_of_a_run(const std::string& dir);
// "no run here (...)" for `dir`: config.json is missing, and where the directory is a compare output, where its runs are.
std::string no_run_here(const std::string& dir);

}  // namespace poslab
