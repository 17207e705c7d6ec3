// Starting a run, new or resumed: the config checked and recorded, the model, optimizer and data built
// identically either way (a resumed run's initial weights and RNG stream match the original's before the
// checkpoint loads), the process group joined; then the loop (train_loop.cpp).
#include "train/trainer.h"
#include "train/memory_estimate.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <optional>

#include "data/corpus.h"
#include "distributed/distributed.h"
#include "model/gpt.h"
#include "train/init_from.h"
#include "train/run_dir.h"
#include "train/train_loop.h"
#include "util/affinity.h"
#include "util/files.h"
#include "util/runtime.h"
#include "util/sha256.h"

namespace poslab {
namespace fs = std::filesystem;
using nlohmann::json;

// What a run needs besides its directory: built identically for new and resumed runs, so that
// the initial weights and RNG stream of a resumed run match the original before loading.
struct Session {
  Config config;
  std::unique_ptr<Corpus> corpus;
  Runtime runtime;
  GPT model{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  TrainState state;
  std::unique_ptr<Distributed> dist;  // the other ranks (LocalProcess when there are none)
};

// What every rank of a data-parallel run must share with rank 0 (connect() compares it at the
// rendezvous): the resolved config, less what may differ between machines, plus what the config
// resolved to here. Left out: the paths of files (data.path, data.dir, data.train_path, data.val_path,
// data.tokenizer.model, model.pos_encoding.plugin), which another machine may mount elsewhere, and
// train.threads, which suits each machine's cores. The files stand in by what stays cheap to compare:
// the plug-in by its SHA-256 (already a key), the tokenizer by the SHA-256 of its vocabulary (and of its
// SentencePiece model), the data by its tokens per split (hashing a corpus of gigabytes at every
// start would not be cheap). Added: the device and precision that "auto" resolved to on this machine.
static json same_everywhere(const Config& c, const Corpus& corpus, const Runtime& rt, const Launch& launch,
                            const json& how) {
  json j = config_to_json(c);
  for (const char* key : {"path", "dir", "train_path", "val_path"}) j["data"].erase(key);
  j["data"]["tokenizer"].erase("model");
  j["model"]["pos_encoding"].erase("plugin");
  j["train"].erase("threads");
  json& resolved = j["resolved"];
  resolved["device"] = rt.device.is_cuda() ? "cuda" : "cpu";
  resolved["precision"] = rt.bf16 ? "bf16" : "fp32";
  resolved["world_size"] = launch.world_size;  // a rank told another size would wait for ranks that never come
  // How each rank starts (a new run or a resumed one; where --stop-at stops it): ranks that differ would call
  // different collectives and wait for each other until the timeout.
  resolved.update(how);
  const auto& tokenizer = corpus.tokenizer();
  resolved["vocabulary_sha256"] = sha256_hex(tokenizer.to_json().dump());
  if (tokenizer.is_sentencepiece())
    resolved["sentencepiece_sha256"] = sha256_file(tokenizer.sentencepiece_model(), "the SentencePiece model");
  if (const auto* text = dynamic_cast<const TextCorpus*>(&corpus)) {
    resolved["train_tokens"] = text->split_tokens(Split::Train);
    resolved["val_tokens"] = text->split_tokens(Split::Val);
  }
  return j;
}

// Joins the launch's process group (after every local check, so a refusal comes before waiting
// on peers), on the runtime's device: CUDA ranks take the device of their local rank.
// `precision`, where given, stands for the config's train.precision in the runtime alone (a resumed run's "auto").
static Session make_session(Config c, std::unique_ptr<Corpus> corpus, const Launch& launch, const json& how,
                            const std::string& precision = "") {
  Session s;
  c.model.vocab_size = static_cast<int>(corpus->tokenizer().size());
  if (c.train.batch_size % launch.world_size != 0)
    throw ConfigError("train.batch_size: " + std::to_string(c.train.batch_size) + " is not divisible by the world size " +
                      std::to_string(launch.world_size) + " (it is the global batch; each rank trains on an equal share)");
  check_training_fits(c);  // before any allocation: refuse with the numbers rather than die in the allocator
  Config local = c;  // ranks sharing a machine share its cores (the config keeps 0 = default)
  if (!precision.empty()) local.train.precision = precision;
  // (a launcher's OMP_NUM_THREADS, torchrun's 1 say, is each rank's already)
  if (launch.distributed() && c.train.threads == 0 && launch.local_world_size > 0 && omp_num_threads_env() == 0)
    local.train.threads = std::max(1, cpu_count() / launch.local_world_size);
  s.runtime = make_runtime(local);
  s.runtime.precision_kept = !precision.empty() && c.train.precision == "auto";
  // The evaluation that ends training, each length checked before the training rather than after it.
  if (s.runtime.device.is_cpu())
    for (int length : c.eval.lengths)
      if (corpus->holds_eval_length(length)) check_evaluation_fits(c, corpus->tokens_at(length), "eval.lengths");
  // Under OpenMP binding each process pins its first thread to the first CPU it may use: ranks on one machine
  // given the same CPUs all pin to the same ones, and their threads queue for them.
  if (launch.distributed() && launch.local_world_size != 1 && s.runtime.device.is_cpu() && openmp_binds()) {
    if (cpu_count() > s.runtime.threads)
      spdlog::warn("rank {}: OpenMP binds threads (OMP_PROC_BIND, OMP_PLACES) and this rank may use {} CPUs for its {} "
                   "thread(s): ranks on this machine that share them all pin to the same first CPUs. Give each rank "
                   "its own (taskset -c, numactl, srun --cpu-bind) or unset OMP_PROC_BIND and OMP_PLACES",
                   launch.rank, cpu_count(), s.runtime.threads);
  }
  if (launch.distributed() && s.runtime.device.is_cuda()) s.runtime.device = torch::Device(torch::kCUDA, launch.local_rank);
  s.dist = connect(launch, s.runtime.device, static_cast<uint64_t>(c.seed),
                   static_cast<int64_t>(c.train.dist_bucket_mb * 1024 * 1024),
                   launch.distributed() ? same_everywhere(c, *corpus, s.runtime, launch, how) : json::object());
  torch::manual_seed(c.seed);
  s.model = GPT(c.model);
  s.model->to(s.runtime.device);
  s.optimizer = make_optimizer(s.model, c.train);
  s.state.data_rng = Rng(static_cast<uint64_t>(c.seed)).state;
  s.config = c;
  s.corpus = std::move(corpus);
  return s;
}

// Rank 0's weights everywhere (a new run: the same seed built the same model, and init_from read
// the same file, but nothing checks that), then the loop.
static TrainResult run_session(Session& s, const std::string& dir, int64_t stop_at) {
  s.dist->broadcast_parameters(s.model->parameters());
  return run_loop(s.config, *s.corpus, dir, s.model, *s.optimizer, s.state, s.runtime, *s.dist, stop_at);
}

TrainResult train_new(Config c, const std::string& dir, int64_t stop_at, const std::string& init_from,
                      const Launch& launch) {
  check_output_dir(dir, "--out");
  if (is_run_dir(dir))
    throw ConfigError("--out " + dir + ": already holds a run; continue it with `poslab train --resume " + dir +
                      "` or pick another --out");
  if (is_compare_dir(dir))
    throw ConfigError("--out " + dir + ": holds a poslab compare output (experiment.json; its runs are " + dir +
                      "/cells/NAME): a run written there would mix with it; pick another --out");
  if (const std::string in = inside_another_output(dir, /*in_runs=*/false); !in.empty())
    throw ConfigError("--out " + dir + ": is " + in + ": a run written there would mix with its files; pick another --out");
  if (const std::string file = file_not_of_a_run(dir); !file.empty())
    throw ConfigError("--out " + dir + ": is not empty and holds no run (" + file +
                      " is there): a run written there would mix with its files; pick an empty or new directory");
  std::optional<InitSource> source;
  if (!init_from.empty()) source = read_init_source(init_from, c);
  c.data.cache_dir = RunPaths{dir}.cache();
  // Every command that reads the run (the final evaluation, eval, --resume, sample) reads config.json back:
  // a config that would not read back is refused now, on every rank, not once the run has trained.
  try {
    config_from_json(config_to_json(c));
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("the run's config.json would not read back: ") + e.what());
  }
  Session s = make_session(c, make_corpus(c), launch, {{"start", "a new run"}, {"stop_at", stop_at}});
  if (source) init_weights_from(*source, s.model, s.corpus->tokenizer(), s.config.model.pos_encoding);
  // Everything is valid: only now does the run directory appear, written by rank 0 alone, which holds its
  // lock while it trains (another `train --out` of the same directory started at the same moment stops here).
  std::optional<FileLock> lock;
  if (s.dist->is_main()) {
    fs::create_directories(dir);
    lock.emplace(RunPaths{dir}.dir + "/.train.lock", "--out " + dir);
    RunPaths paths{dir};
    // The run keeps its tokenizer: a SentencePiece model is copied in beside vocab.json.
    if (s.corpus->tokenizer().is_sentencepiece())
      write_file_atomic(paths.tokenizer_model(), read_text_file(s.corpus->tokenizer().sentencepiece_model(), "tokenizer"));
    write_file_atomic(paths.vocab(), s.corpus->tokenizer().to_json().dump() + "\n");
    write_file_atomic(paths.config(), config_to_json(s.config).dump(2) + "\n");
    record_data_files(paths, s.config);
    if (source) {
      // The source by its absolute path: a resume before the first checkpoint reads it again, from anywhere.
      const json record = init_source_record(*source, s.config);
      write_file_atomic(paths.init_from(), record.dump(2) + "\n");
      spdlog::info("initialised from {}", describe_init_source(record));
      // A source that stopped early (interrupted, failed) gave the weights of its last checkpoint: say so.
      if (record["status"] != "done")
        spdlog::warn("--init-from {}: that run did not finish (status {}{}): its weights are those of its last "
                     "checkpoint", init_from, record["status"].get<std::string>(),
                     record["step"].is_number() ? ", step " + record["step"].dump() + " of " + record["max_iters"].dump() : "");
    }
  }
  return run_session(s, dir, stop_at);
}

TrainResult train_resume(const std::string& dir, int64_t stop_at, const Launch& launch) {
  RunPaths paths{dir};
  if (!is_run_dir(dir)) throw ConfigError("--resume " + dir + ": " + no_run_here(dir));
  // Rank 0 writes the run: it must be able to, and no other poslab may be training it (a second compare
  // or shard reaching the same cell, a second --resume): refused before any work, as a new run's --out is.
  std::optional<FileLock> lock;
  if (launch.rank == 0) {
    check_run_writable(dir, "its checkpoint", "--resume");
    lock.emplace(dir + "/.train.lock", "--resume " + dir);
  }
  Config c = paths.read_config();
  c.data.cache_dir = paths.cache();
  auto tokenizer = paths.read_vocab();
  // "auto" goes on in the precision it chose when the run started (on the CPU a timing, model/precision_choice.h),
  // kept in its checkpoint and summary, so that one run does not change precision halfway.
  std::string precision;
  if (c.train.precision == "auto") {
    std::string from_checkpoint;
    try {
      if (file_exists(paths.checkpoint())) from_checkpoint = checkpoint_precision(paths.checkpoint());
    } catch (const ConfigError&) {
      // A damaged checkpoint is refused below, where it is loaded, with its own message.
    }
    precision = in_run_precision(c, paths, from_checkpoint, "resuming").train.precision;
    if (precision == "auto") precision.clear();
  }
  Session s = make_session(c, make_corpus(c, tokenizer), launch, {{"start", "resuming a run"}, {"stop_at", stop_at}},
                           precision);
  // A run that stopped (interrupted) or finished wrote its checkpoint then: without it, resuming would start the
  // run over from step 0 under its name, its metrics written anew (one that failed before its first checkpoint
  // has none to lose, and starts over).
  if (!file_exists(paths.checkpoint()) && file_exists(paths.summary())) {
    const json summary = read_json_file(paths.summary());
    const std::string status = summary.value("status", "");
    const json step = summary.value("step", json());
    if ((status == "interrupted" || status == "done") && step.is_number_integer() && step.get<int64_t>() > 0)
      throw ConfigError("--resume " + dir + ": checkpoint.pt is missing, but " + paths.summary() + " says the run reached step " +
                        step.dump() + " (" + status + "): resuming would start it over from step 0; put checkpoint.pt "
                        "back, or train a new run");
  }
  if (file_exists(paths.checkpoint())) {
    s.state = load_checkpoint(paths.checkpoint(), s.model, s.optimizer.get());
  } else if (file_exists(paths.init_from())) {
    // A fine-tune stopped before its first checkpoint: it starts again from its source's weights, as it
    // first did (without them it would train from random weights under the fine-tune's name).
    const std::string from = read_json_file(paths.init_from()).value("run", "");
    Config wanted = c;
    try {
      init_weights_from(read_init_source(from, wanted), s.model, s.corpus->tokenizer(), c.model.pos_encoding);
    } catch (const ConfigError& e) {
      throw ConfigError("--resume " + dir + ": no checkpoint yet, and the run it starts from cannot be read again (" +
                        e.what() + "); start the fine-tune anew with --init-from");
    }
    spdlog::info("no checkpoint yet: initialised again from {}", from);
  }
  // Each rank's batch rows and dropout stream depend on the world size: only the same one resumes exactly.
  if (s.state.step > 0 && s.state.world_size != s.dist->world_size())
    throw ConfigError("--resume " + dir + ": the checkpoint was written by " + std::to_string(s.state.world_size) +
                      " rank(s), this launch has " + std::to_string(s.dist->world_size()) +
                      "; resume with the same world size");
  // Every rank reads the checkpoint itself: one that found another file (or none) must not go on.
  if (s.dist->sum(static_cast<double>(s.state.step)) != static_cast<double>(s.state.step) * s.dist->world_size())
    throw DistributedError("--resume " + dir + ": the ranks found checkpoints at different steps; the run directory "
                           "must be on a filesystem every rank reads");
  s.dist->restore_rank_rng(s.state.rank_rng);
  // A finished run has nothing left to train: resuming it again would validate, checkpoint and write its
  // summary anew (its tokens/s diluted by a step that trained nothing), and rewrite what was measured since.
  if (s.state.step >= c.train.max_iters && file_exists(paths.summary())) {
    const json summary = read_json_file(paths.summary());
    if (summary.value("status", "") == "done") {
      spdlog::info("the run in {} is finished (step {} of {}): nothing to train", dir, s.state.step, c.train.max_iters);
      TrainResult done{"done", summary, c};
      done.was_finished = true;
      return done;
    }
  }
  // Training on: the files must be those it trained on (a finished run resumed only evaluates, and its
  // evaluation checks the validation file alone).
  check_data_files(paths, {"train", "val", "text"}, "--resume " + dir,
                   "resuming would go on with other tokens; put the file back, or start a new run from this one's "
                   "weights (--init-from " + dir + ")");
  if (stop_at > 0 && stop_at <= s.state.step)
    throw ConfigError("--stop-at " + std::to_string(stop_at) + ": the run in " + dir + " is at step " +
                      std::to_string(s.state.step) + " already (give a later step, or none to finish it)");
  return run_session(s, dir, stop_at);
}

}  // namespace poslab
