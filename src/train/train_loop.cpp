// The training loop. State that decides the losses (weights, optimizer moments, step, data RNG and
// torch RNG) lives in the checkpoint, so a resumed run logs the same losses as an unbroken one; metrics,
// validation, checkpoints and the summary are written by rank 0 alone.
#include "train/train_loop.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "train/fused_adamw.h"
#include "train/run_dir.h"
#include "train/schedule.h"
#include "train/step.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/runtime.h"
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
TrainResult run_loop(const Config& c, const Corpus& corpus, const std::string& dir, GPT& model,
                            torch::optim::AdamW& optimizer, TrainState state, const Runtime& rt, Distributed& dist,
                            int64_t stop_at) {
  RunPaths paths{dir};
  const json config_json = config_to_json(c);
  state.precision = rt.bf16 ? "bf16" : "fp32";  // kept in every checkpoint: a resume and an evaluation go on in it
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
  const std::string blas_core = blas_core_name();
  // The share of its cores this session had: of the time its threads were ready to run, the time they ran
  // (Linux's per-thread schedstat: time on a CPU, time waiting for one; waits on disk or sleeping workers
  // count as neither). Below 1 where other work ran beside it (compare's last cells, one beyond --jobs; a busy
  // machine): its tokens/s is then not the encoding's speed. Null where the kernel does not say, and on CUDA.
  auto run_and_wait_ns = [] {
    std::pair<double, double> sum{0, 0};
    try {
      for (const auto& task : fs::directory_iterator("/proc/self/task")) {
        std::ifstream in(task.path() / "schedstat");
        double run = 0, wait = 0;
        if (in >> run >> wait) sum.first += run, sum.second += wait;
      }
    } catch (const fs::filesystem_error&) {  // no /proc: no figure (core_share null)
      return std::pair<double, double>{0, 0};
    }
    return sum;
  };
  std::pair<double, double> sched_at_start{0, 0};  // set with `start` below
  auto core_share = [&]() -> json {
    const auto [run, wait] = run_and_wait_ns();
    const double ran = run - sched_at_start.first, ready = ran + wait - sched_at_start.second;
    if (rt.device.is_cuda() || ran <= 0 || ready <= 0) return nullptr;
    return std::round(1000.0 * ran / ready) / 1000.0;
  };
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
              {"core_share", core_share()},
              {"cpu", cpu},
              // The kernels of its fp32 products, as bench records them ("" for another BLAS; null on CUDA).
              {"blas_core", rt.device.is_cuda() ? json(nullptr) : json(blas_core)},
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
  sched_at_start = run_and_wait_ns();
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

}  // namespace poslab
