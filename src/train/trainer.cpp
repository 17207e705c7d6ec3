// Training loop. State that decides the losses (weights, optimizer moments, step, data RNG and
// torch RNG) lives in the checkpoint, so a resumed run logs the same losses as an unbroken one.
#include "train/trainer.h"
#include "train/memory_estimate.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "data/corpus.h"
#include "distributed/distributed.h"
#include "model/gpt.h"
#include "train/fused_adamw.h"
#include "train/init_from.h"
#include "train/run_dir.h"
#include "train/schedule.h"
#include "util/affinity.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/runtime.h"
#include "util/sha256.h"
#include "util/signals.h"
#include "util/stage.h"

namespace poslab {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// This rank's rows of the global batch: a contiguous slice, the same rows for the same rank every step.
static Batch rank_rows(const Batch& batch, const Distributed& dist) {
  const int64_t rows = batch.x.size(0) / dist.world_size(), first = rows * dist.rank();
  return {batch.x.narrow(0, first, rows), batch.y.narrow(0, first, rows)};
}

// Keeps metrics.jsonl consistent with a checkpoint: lines past the resumed step are dropped.
static void truncate_metrics(const std::string& path, int64_t step) {
  if (!file_exists(path)) return;
  std::ifstream in(path);
  std::string kept, line;
  while (std::getline(in, line)) {
    try {
      if (json::parse(line).value("step", int64_t{0}) < step) kept += line + "\n";
    } catch (const json::exception&) {
      // a line cut by a kill -9 is dropped
    }
  }
  write_file_atomic(path, kept);
}

// Appends rows to metrics.jsonl; with an empty path (ranks other than 0) it writes nothing.
// A row that cannot be written (a full disk) fails the run: it would otherwise go on to "done" with rows
// missing and a line cut in two (the next rows appended to its half); the resume drops the cut line.
class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& path) : path_(path) {
    if (path.empty()) return;
    out_.open(path, std::ios::app);
    if (!out_) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  }
  void write(const json& row) {
    if (!out_.is_open()) return;
    out_ << row.dump() << "\n";
    out_.flush();
    if (!out_) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  }

 private:
  std::string path_;
  std::ofstream out_;
};

// Every rank runs this loop in lockstep; rank 0 alone writes the run directory. Each decision
// (evaluate, stop, fail) rests on values every rank holds alike, so all ranks take it together.
static TrainResult run_loop(const Config& c, const Corpus& corpus, const std::string& dir, GPT& model,
                            torch::optim::AdamW& optimizer, TrainState state, const Runtime& rt, Distributed& dist,
                            int64_t stop_at) {
  RunPaths paths{dir};
  const json config_json = config_to_json(c);
  const bool writes = dist.is_main();
  if (writes) truncate_metrics(paths.metrics(), state.step);
  MetricsWriter metrics(writes ? paths.metrics() : "");
  Rng data_rng(0);
  data_rng.state = state.data_rng;
  const auto t = c.train;
  const int64_t params = model->num_params();
  double last_val = NAN;
  std::string status = "done", error;

  // Which machine trained it: results differ by CPU (bf16 or fp32, kernels) and GPU.
  const json cpu = cpu_info(), gpu = run_gpu_info(rt);
  auto write_summary = [&](double seconds) {
    json s = {{"status", status},
              {"step", state.step},
              {"max_iters", t.max_iters},
              {"params", params},
              {"final_val_loss", std::isnan(last_val) ? json(nullptr) : json(last_val)},
              {"best_val_loss", state.has_best ? json(state.best_val_loss) : json(nullptr)},
              {"tokens_per_s", seconds > 0 ? state.tokens / seconds : 0.0},
              {"wall_s", seconds},
              {"device", rt.device.is_cuda() ? "cuda" : "cpu"},
              {"precision", rt.bf16 ? "bf16" : "fp32"},
              {"threads", rt.threads},
              {"cpu", cpu},
              {"gpu", gpu}};
    if (!error.empty()) s["error"] = error;
    dist.add_stats(s, /*window=*/false);
    if (writes) write_file_atomic(paths.summary(), s.dump(2) + "\n");
    return s;
  };

  spdlog::info("run {}: {} params, {} encoding, {}", dir, params, c.model.pos_encoding.kind, rt.describe());
  if (state.step > 0) spdlog::info("resuming at step {}/{}", state.step, t.max_iters);
  const auto start = Clock::now();
  const double prior_seconds = state.train_seconds;
  auto elapsed = [&] { return prior_seconds + std::chrono::duration<double>(Clock::now() - start).count(); };
  auto window_start = Clock::now();
  int64_t window_tokens = 0;
  const int64_t first_step = state.step;
  // A checkpoint between evaluations (checkpoint_interval) holds weights that no loss has seen yet: it waits
  // beside the last one until this step's training loss is found finite, so that an update that diverged (its
  // loss shows it a step later) never replaces the last good checkpoint.
  const std::string pending_path = paths.checkpoint() + ".next";
  bool pending = false;
  if (writes && fs::exists(pending_path)) {  // left by a run killed before a loss had checked it
    spdlog::warn("removing {}: its weights were never checked by a loss; resuming from {}", pending_path,
                 paths.checkpoint());
    fs::remove(pending_path);
  }
  // Where a failed run can be resumed from: its last checkpoint, if one was written (a run that fails at its
  // first validation has none).
  auto kept_checkpoint = [&](const std::string& which) {
    return fs::exists(paths.checkpoint()) ? "; the " + which + " checkpoint is kept in " + paths.checkpoint()
                                          : std::string("; no checkpoint was written before it");
  };
  // The summary of a failed run, where it can be written: a failure to write it (the disk that failed the
  // checkpoint is full) is said beside the first error, never in its place.
  auto write_failed_summary = [&] {
    try {
      write_summary(elapsed());
    } catch (const std::exception& e) {
      spdlog::warn("the failed run's summary.json could not be written either: {}", e.what());
    }
  };
  auto check_finite = [&](const char* what, double value, int64_t step) {
    if (std::isfinite(value)) return;
    status = "failed";
    error = std::string(what) + " loss is " + (std::isnan(value) ? std::string("nan") : std::to_string(value)) + " at step " +
            std::to_string(step);
    if (pending && writes) fs::remove(pending_path);
    pending = false;
    write_failed_summary();
    throw DivergenceError(error + kept_checkpoint("last good"));
  };
  auto checkpoint = [&](bool checked) {
    state.data_rng = data_rng.state;
    state.train_seconds = elapsed();
    state.world_size = dist.world_size();
    state.rank_rng = dist.gather_rank_rng();  // a collective: every rank takes part
    if (writes) {
      Stage stage("while writing the checkpoint at step " + std::to_string(state.step));
      save_checkpoint(checked ? paths.checkpoint() : pending_path, model, optimizer, state, config_json);
    }
    if (checked && pending && writes) fs::remove(pending_path);
    pending = !checked;
  };
  model->train();

  try {
    while (true) {
      const int64_t step = state.step;
      const bool last = step >= t.max_iters;
      if (step % t.eval_interval == 0 || last) {
        Stage stage("during validation at step " + std::to_string(step));
        last_val = estimate_val_loss(model, corpus, c, rt, dist);
        check_finite("validation", last_val, step);
        if (!state.has_best || last_val < state.best_val_loss) state.best_val_loss = last_val, state.has_best = true;
        metrics.write({{"step", step}, {"val_loss", last_val}});
        spdlog::info("step {:>6}/{} | val {:.4f} | best {:.4f}", step, t.max_iters, last_val, state.best_val_loss);
        checkpoint(/*checked=*/true);
      } else if (t.checkpoint_interval > 0 && step % t.checkpoint_interval == 0) {
        checkpoint(/*checked=*/false);
      }
      if (last) break;
      // A signal may reach one rank a step before another: the ranks agree on it every step, and all
      // report it (a launcher reading any rank's status must see the run was interrupted).
      const bool signalled = dist.any(stop_requested());
      if (signalled || (stop_at > 0 && step >= stop_at)) {
        // Unless validation has just scored them, the weights of the last update have met no loss yet: they
        // wait beside the last good checkpoint until a loss on one validation batch is found finite (a forward
        // after the save, so the checkpoint's RNG states are those of a run that went on).
        if (step % t.eval_interval == 0) {
          checkpoint(/*checked=*/true);
        } else {
          if (!pending) checkpoint(/*checked=*/false);  // pending: this step's state is already beside it
          Stage stage("while checking the last update's weights at the stop");
          check_finite("validation (one batch, at the stop)", estimate_val_loss(model, corpus, c, rt, dist, 1), step);
          if (writes) fs::rename(pending_path, paths.checkpoint());
          pending = false;
        }
        status = "interrupted";
        json s = write_summary(elapsed());
        if (writes)  // rank 0 wrote the checkpoint; every rank resumes, each under the same launcher
          spdlog::warn("interrupted at step {}; checkpoint written. Resume with: poslab train --resume {}{}", step, dir,
                       dist.world_size() > 1 ? " (on every rank, launched as before)" : "");
        return {status, s, c, signalled};
      }

      const double lr = learning_rate_at(t, step);
      // Every rank draws the same global batch from the same stream and trains on its own rows, the
      // loss scored over the global batch's count of scored tokens (targets -1 are not scored).
      auto batch = corpus.batch(Split::Train, t.batch_size, data_rng);
      const auto scored = static_cast<double>((batch.y != -1).sum().item<int64_t>());
      Stage stage("while training step " + std::to_string(step) + " (batch " + std::to_string(batch.x.size(0)) + " x " +
                  std::to_string(batch.x.size(1)) + " tokens)");
      auto loss = train_step(model, optimizer, rank_rows(batch, dist), scored, lr, t.grad_clip, rt, dist);
      dist.verify_replicas(optimizer_params(optimizer), step);
      state.step += 1;
      state.tokens += batch.x.numel();
      window_tokens += batch.x.numel();

      // On CUDA, reading the loss syncs the device: only at log steps (and to confirm a pending
      // checkpoint). On CPU it is free.
      if (step % t.log_interval == 0 || rt.device.is_cpu() || pending) {
        const double value = dist.sum(loss.item<double>());  // each rank holds its rows' share of the mean
        check_finite("training", value, step);
        if (pending && writes) fs::rename(pending_path, paths.checkpoint());
        pending = false;
        if (step % t.log_interval == 0) {
          const double window_s = std::chrono::duration<double>(Clock::now() - window_start).count();
          const double tok_s = window_s > 0 ? window_tokens / window_s : 0;
          const double per_step = std::chrono::duration<double>(Clock::now() - start).count() /
                                  std::max<int64_t>(1, state.step - first_step);
          json row = {{"step", step}, {"train_loss", value}, {"lr", lr}, {"tokens_per_s", tok_s}};
          dist.add_stats(row, /*window=*/true);
          metrics.write(row);
          spdlog::info("step {:>6}/{} | train {:.4f} | lr {:.2e} | {} tok/s | ETA {}", step, t.max_iters, value, lr,
                       format_rate(tok_s), format_duration(per_step * (t.max_iters - state.step)));
          window_start = Clock::now();
          window_tokens = 0;
        }
      }
    }
  } catch (const ConfigError& e) {
    // Input found bad once work has begun (a token file changed under the run): a failed run, not a refused
    // config. The summary says so; the checkpoint is intact.
    status = "failed";
    error = e.what();
    write_failed_summary();
    throw std::runtime_error("training step " + std::to_string(state.step) + ": " + error + kept_checkpoint("last"));
  } catch (const std::exception& e) {  // a peer gone, memory, LibTorch: say so in the summary; the checkpoint is intact
    status = "failed";
    if (error.empty()) {  // LibTorch's messages carry a stack trace: the first line
      const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
      error = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
      error = error.substr(0, error.find('\n'));
    }
    write_failed_summary();
    throw;
  }
  if (writes) save_weights(paths.weights(), model);
  json s = write_summary(elapsed());
  spdlog::info("done: val {:.4f}, best {:.4f}, {} tok/s, {}", last_val, state.best_val_loss,
               format_rate(s["tokens_per_s"].get<double>()), format_duration(elapsed()));
  return {status, s, c};
}

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
static Session make_session(Config c, std::unique_ptr<Corpus> corpus, const Launch& launch, const json& how) {
  Session s;
  c.model.vocab_size = static_cast<int>(corpus->tokenizer().size());
  if (c.train.batch_size % launch.world_size != 0)
    throw ConfigError("train.batch_size: " + std::to_string(c.train.batch_size) + " is not divisible by the world size " +
                      std::to_string(launch.world_size) + " (it is the global batch; each rank trains on an equal share)");
  check_training_fits(c);  // before any allocation: refuse with the numbers rather than die in the allocator
  Config local = c;  // ranks sharing a machine share its cores (the config keeps 0 = default)
  // (a launcher's OMP_NUM_THREADS, torchrun's 1 say, is each rank's already)
  if (launch.distributed() && c.train.threads == 0 && launch.local_world_size > 0 && omp_num_threads_env() == 0)
    local.train.threads = std::max(1, cpu_count() / launch.local_world_size);
  s.runtime = make_runtime(local);
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
  if (!is_run_dir(dir)) throw ConfigError("--resume " + dir + ": no run here (config.json is missing)");
  // Rank 0 writes the run: it must be able to, and no other poslab may be training it (a second compare
  // or shard reaching the same cell, a second --resume): refused before any work, as a new run's --out is.
  std::optional<FileLock> lock;
  if (launch.rank == 0) {
    check_run_writable(dir, "its checkpoint", "--resume");
    lock.emplace(dir + "/.train.lock", "--resume " + dir);
  }
  Config c = config_from_json(read_json_file(paths.config()));
  c.data.cache_dir = paths.cache();
  auto tokenizer = paths.read_vocab();
  Session s = make_session(c, make_corpus(c, tokenizer), launch, {{"start", "resuming a run"}, {"stop_at", stop_at}});
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
  if (stop_at > 0 && stop_at <= s.state.step)
    throw ConfigError("--stop-at " + std::to_string(stop_at) + ": the run in " + dir + " is at step " +
                      std::to_string(s.state.step) + " already (give a later step, or none to finish it)");
  return run_session(s, dir, stop_at);
}

}  // namespace poslab
