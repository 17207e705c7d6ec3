// What the trainer asks of the other ranks of a data-parallel run: who writes, the same starting
// weights, summed gradients, agreed scalars. A single process gets the no-op LocalProcess, so the
// training loop reads the same either way; connect() builds the c10d one (process_group.cpp).
#pragma once
#include "util/torch_api.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/launch.h"

namespace poslab {

// A peer died, timed out or could not be reached. One line; every rank exits non-zero.
struct DistributedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Distributed {
 public:
  virtual ~Distributed() = default;
  virtual int rank() const { return 0; }
  virtual int world_size() const { return 1; }
  bool is_main() const { return rank() == 0; }  // the rank that writes the run directory

  // Rank 0's values into every rank's parameters (in place).
  virtual void broadcast_parameters(const std::vector<torch::Tensor>& params) {}
  // grads[s][k]: batch shard s's gradient of parameter k. Distributed: the shards are summed in
  // order, then SUMMED over ranks in fixed-size buckets, and grads becomes that one "shard". Each
  // rank's loss is already divided by the global count of scored tokens, so the sum is the global
  // gradient. No-op here: the optimizer sums the shards itself.
  virtual void all_reduce_gradients(std::vector<std::vector<torch::Tensor>>& grads) {}
  // Sum over ranks (the same value on every rank afterwards).
  virtual double sum(double value) { return value; }
  // True on every rank when true on any: decisions (stop, fail) that every rank must take together.
  virtual bool any(bool value) { return value; }

  // Dropout must differ between ranks, randomized positions must not: positions are drawn from the
  // CPU generator, whose stream every rank shares, and a forward pass run inside rank_rng_scope()
  // draws its dropout from this rank's own stream (on the device's generator). Empty here: one
  // process has one stream.
  struct RngScope {
    virtual ~RngScope() = default;
  };
  virtual std::unique_ptr<RngScope> rank_rng_scope() { return nullptr; }
  // (world_size, bytes): every rank's own stream (a collective); undefined in a single process.
  virtual torch::Tensor gather_rank_rng() { return {}; }
  virtual void restore_rank_rng(const torch::Tensor& states) {}

  // POSLAB_DIST_CHECK_WEIGHTS=1 (a debugging aid, used by the tests): after every step, each rank
  // compares a hash of its weights with rank 0's and fails naming the step where they differ.
  virtual void verify_replicas(const std::vector<torch::Tensor>& params, int64_t step) {}

  // Adds what this group measured (world size, all-reduce time) to a metrics row or summary.
  virtual void add_stats(nlohmann::json& row, bool reset_window) {}
};

// The no-op group of a single process.
class LocalProcess : public Distributed {};

// Joins the process group the launch describes, on the runtime's device (Gloo on CPU, NCCL on
// CUDA), every wait bounded by dist_timeout_s(). Throws ConfigError where this build lacks the
// backend, DistributedError when the peers cannot be reached in time. `seed` seeds the rank's own
// stream; gradients travel in buckets of at most `bucket_bytes`. A world of 1: LocalProcess.
// `same_everywhere` (the trainer's resolved config, less what may differ between machines) is
// compared with rank 0's at the rendezvous, before the process group exists: where any rank's
// differs, every rank throws ConfigError naming the rank, the first key that differs and both values.
std::unique_ptr<Distributed> connect(const Launch& launch, const torch::Device& device, uint64_t seed,
                                     int64_t bucket_bytes, const nlohmann::json& same_everywhere);

// Tells the other ranks that this one stopped with `error` before it reached the rendezvous (a config or
// data file refused, say), so that they stop at once naming it instead of waiting for it until the timeout.
// Best effort, for at most 30 s (or POSLAB_DIST_TIMEOUT_S where shorter); a no-op in one process, once
// connect() has begun, and without a c10d backend.
void tell_peers_of_failure(const Launch& launch, const std::string& error);

// Where two configs first differ: objects key by key (in sorted order, a top-level "resolved" object
// last), arrays and values whole. The key as a dotted path ("train.learning_rate"), each side's value
// as text ("(none)" where it lacks the key).
struct ConfigDifference {
  std::string key, here, there;
};
std::optional<ConfigDifference> first_difference(const nlohmann::json& here, const nlohmann::json& there);

// POSLAB_DIST_TIMEOUT_S (default 300): seconds to connect, and for each collective.
int dist_timeout_s();

}  // namespace poslab
