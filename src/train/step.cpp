// One training step (forward under autocast, backward whole or in batch shards, clipping, AdamW) and
// the validation estimate: what the training loop and the benchmark both run.
#include "train/step.h"

#include "data/rng.h"
#include "train/fused_adamw.h"
#include "util/runtime.h"

namespace poslab {

static uint64_t val_seed(const Config& c) { return static_cast<uint64_t>(c.seed) ^ 0x5EEDFACEULL; }

std::unique_ptr<torch::optim::AdamW> make_optimizer(GPT& model, const TrainConfig& t) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : model->named_parameters()) (model->decays(p.key(), p.value()) ? decay : no_decay).push_back(p.value());
  auto options = torch::optim::AdamWOptions(t.learning_rate).betas({t.beta1, t.beta2}).weight_decay(t.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(options));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(options).weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), options);
}

// Shard gradients added in shard order into each parameter's .grad() (the unfused path).
static void sum_shard_grads(const std::vector<torch::Tensor>& params,
                            const std::vector<std::vector<torch::Tensor>>& grads) {
  for (size_t k = 0; k < params.size(); ++k) {
    torch::Tensor sum;
    for (const auto& shard : grads)
      if (shard[k].defined()) sum = sum.defined() ? sum + shard[k] : shard[k];
    params[k].mutable_grad() = sum;
  }
}

// Forward and backward on the batch split into shards (CPU), one OpenMP thread each, every kernel
// single-threaded: at this model size one batch's kernels are too small to keep every core busy.
// Each shard scores its summed loss over the whole batch's count of scored tokens, so the shard
// gradients, added in shard order (deterministic), are the whole batch's gradient.
// Returns the loss; grads[s][k] is shard s's gradient of params[k].
static torch::Tensor sharded_backward(GPT& model, const std::vector<torch::Tensor>& params, const Batch& batch,
                                      const torch::Tensor& positions, double scored, const Runtime& rt,
                                      std::vector<std::vector<torch::Tensor>>& grads) {
  set_blas_threads(rt, /*shards_running=*/true);
  const auto xs = batch.x.chunk(rt.batch_shards, /*dim=*/0), ys = batch.y.chunk(rt.batch_shards, /*dim=*/0);
  const auto n = static_cast<int64_t>(xs.size());
  std::vector<torch::Tensor> losses(n);
  grads.assign(n, {});
  // Inside this region LibTorch runs every op inline on the calling thread.
  at::parallel_for(0, n, /*grain_size=*/1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      torch::Tensor loss;
      {
        AutocastGuard autocast(rt);  // thread-local, like grad mode: set on each shard's thread
        loss = GPTImpl::summed_loss(model->forward(xs[i], positions), ys[i]) / scored;
      }
      grads[i] = torch::autograd::grad({loss}, params, /*grad_outputs=*/{}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
      losses[i] = loss.detach();
    }
  });
  return torch::stack(losses).sum();
}

// Forward and backward on the whole batch at once (CUDA, or CPU without shards); grads[0][k] is the gradient of params[k].
static torch::Tensor whole_backward(GPT& model, const std::vector<torch::Tensor>& params, const Batch& batch,
                                    const torch::Tensor& positions, double scored, const Runtime& rt,
                                    std::vector<std::vector<torch::Tensor>>& grads) {
  auto x = batch.x.to(rt.device), y = batch.y.to(rt.device);
  torch::Tensor loss;
  {
    AutocastGuard autocast(rt);  // forward only: backward runs outside autocast, as in PyTorch
    loss = GPTImpl::summed_loss(model->forward(x, positions), y) / scored;
  }
  // Gradients set to none, not zeroed: backward then writes them instead of accumulating into them.
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  loss.backward();
  grads.assign(1, {});
  for (auto& p : params) grads.back().push_back(p.grad());
  return loss;
}

torch::Tensor train_step(GPT& model, torch::optim::AdamW& optimizer, const Batch& batch, double lr, double grad_clip,
                         const Runtime& rt) {
  LocalProcess one;
  return train_step(model, optimizer, batch, static_cast<double>((batch.y != -1).sum().item<int64_t>()), lr, grad_clip,
                    rt, one);
}

torch::Tensor train_step(GPT& model, torch::optim::AdamW& optimizer, const Batch& batch, double scored, double lr,
                         double grad_clip, const Runtime& rt, Distributed& dist) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  const auto params = optimizer_params(optimizer);
  std::vector<std::vector<torch::Tensor>> grads;  // (shard, parameter)
  // One position draw for the whole batch from the stream every rank shares (randomized positions;
  // else 0..T-1); dropout then draws from this rank's own stream.
  const auto positions = model->pos->positions(batch.x.size(1), model->is_training(), rt.device);
  auto rank_rng = dist.rank_rng_scope();
  auto loss = rt.batch_shards > 1 && rt.device.is_cpu()
                  ? sharded_backward(model, params, batch, positions, scored, rt, grads)
                  : whole_backward(model, params, batch, positions, scored, rt, grads);
  rank_rng.reset();
  // After the shard sum, before clipping: every rank clips and steps on the same global gradient.
  dist.all_reduce_gradients(grads);
  // On CPU one fused pass over raw arrays on every core replaces ~10 small ops per parameter on one.
  if (rt.fused_adamw && fused_adamw_applies(optimizer)) {  // rt.fused_adamw is only ever set on the CPU
    fused_adamw_step(optimizer, grads, grad_clip);
    return loss;
  }
  sum_shard_grads(params, grads);  // also with one "shard": .grad() then takes the all-reduced gradient
  if (grad_clip > 0) torch::nn::utils::clip_grad_norm_(params, grad_clip);
  optimizer.step();
  return loss;
}

// Mean validation loss over a fixed set of batches: the same batches at every evaluation, drawn
// from their own RNG so that evaluating never moves the training stream.
// Ranks score every world_size-th batch and sum: each batch is scored once, and every rank gets
// the same value, so all take the same best/stop decisions.
double estimate_val_loss(GPT& model, const Corpus& corpus, const Config& c, const Runtime& rt, Distributed& dist,
                         int batches) {
  const int iters = batches > 0 ? batches : c.train.eval_iters;
  torch::InferenceMode guard;
  set_blas_threads(rt, /*shards_running=*/false);  // whole batches here, not shards
  model->eval();
  Rng rng(val_seed(c));
  double total = 0;
  for (int i = 0; i < iters; ++i) {
    // Every rank draws every batch and its positions (randomized at evaluation when asked), so
    // the data and torch streams stay in step across ranks, as in a single process.
    auto batch = corpus.batch(Split::Val, c.train.batch_size, rng);
    const auto positions = model->pos->positions(batch.x.size(1), /*training=*/false, rt.device);
    if (i % dist.world_size() != dist.rank()) continue;
    AutocastGuard autocast(rt);
    auto logits = model->forward(batch.x.to(rt.device), positions);
    total += GPTImpl::loss(logits, batch.y.to(rt.device)).item<double>();
  }
  model->train();
  return dist.sum(total) / iters;
}

}  // namespace poslab
