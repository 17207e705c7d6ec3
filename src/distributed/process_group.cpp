// The c10d process group behind Distributed: TCPStore rendezvous, Gloo (CPU) or NCCL (CUDA), flat
// bucketed all-reduce. The backends are compiled in only with POSLAB_WITH_GLOO / POSLAB_WITH_NCCL,
// which CMake defines where their headers exist (LibTorch's own USE_C10D_GLOO cannot decide it:
// Debian's torch target defines it whether or not libgloo-dev is there); without them connect()
// refuses a distributed launch in one line.
#include "distributed/distributed.h"

#include <spdlog/spdlog.h>
#include <torch/version.h>

#include "poslab_c10d.h"  // POSLAB_WITH_GLOO, POSLAB_WITH_NCCL, from the build's configuration (CMakeLists.txt)

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "config/config.h"
#include "distributed/buckets.h"
#include "util/signals.h"

#if defined(POSLAB_WITH_GLOO) && !defined(USE_C10D_GLOO)
#define USE_C10D_GLOO  // ProcessGroupGloo.hpp is empty without it
#endif
#if defined(POSLAB_WITH_NCCL) && !defined(USE_C10D_NCCL)
#define USE_C10D_NCCL
#endif
#if defined(POSLAB_WITH_GLOO) || defined(POSLAB_WITH_NCCL)
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#ifdef POSLAB_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

#include "distributed/rendezvous.h"
#ifdef POSLAB_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#endif

namespace poslab {

int dist_timeout_s() {
  const char* text = std::getenv("POSLAB_DIST_TIMEOUT_S");
  if (!text) return 300;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 1 || v > 86400)
    throw ConfigError(std::string("POSLAB_DIST_TIMEOUT_S='") + text + "' is not a number of seconds in [1, 86400]");
  return static_cast<int>(v);
}

static std::string value_text(const nlohmann::json* v) {
  if (!v) return "(none)";
  return v->is_string() ? v->get<std::string>() : v->dump();
}

static std::optional<ConfigDifference> first_difference_at(const std::string& key, const nlohmann::json* here,
                                                           const nlohmann::json* there) {
  if (here && there && here->is_object() && there->is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : here->items()) keys.insert(k);
    for (const auto& [k, v] : there->items()) keys.insert(k);
    for (const auto& k : keys) {
      const auto a = here->find(k), b = there->find(k);
      if (auto d = first_difference_at(key.empty() ? k : key + "." + k, a == here->end() ? nullptr : &*a,
                                       b == there->end() ? nullptr : &*b))
        return d;
    }
    return std::nullopt;
  }
  if (here && there && *here == *there) return std::nullopt;
  return ConfigDifference{key.empty() ? "(the whole config)" : key, value_text(here), value_text(there)};
}

std::optional<ConfigDifference> first_difference(const nlohmann::json& here, const nlohmann::json& there) {
  // What the config resolved to ("resolved") last: where a key differs, name the key, not what it led to.
  if (here.is_object() && there.is_object() && (here.contains("resolved") || there.contains("resolved"))) {
    auto a = here, b = there;
    a.erase("resolved"), b.erase("resolved");
    if (auto d = first_difference_at("", &a, &b)) return d;
  }
  return first_difference_at("", &here, &there);
}

#if defined(POSLAB_WITH_GLOO) || defined(POSLAB_WITH_NCCL)
namespace {

// LibTorch 1.x backends derive from ProcessGroup; 2.x ones from Backend, with the same collectives.
#if TORCH_VERSION_MAJOR >= 2
using Group = c10d::Backend;
#else
using Group = c10d::ProcessGroup;
#endif

// The local address that routes to `host`: what Gloo must bind to. The host name may resolve to
// 127.0.1.1 (Debian's default), which peers on other machines cannot reach. A UDP connect sends nothing.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    throw DistributedError("distributed: cannot resolve MASTER_ADDR=" + host);
  std::string out;
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    char text[INET_ADDRSTRLEN] = {0};
    if (inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text))) out = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (out.empty()) throw DistributedError("distributed: no local route to MASTER_ADDR=" + host);
  return out;
}

// c10d reports through glog (when LibTorch was built with it) in several lines per failure, which
// poslab already reports in one: only fatal ones stay, unless POSLAB_DEBUG is set. Found at run
// time, so a LibTorch without glog is no different.
void quiet_c10d_logging() {
  const char* debug = std::getenv("POSLAB_DEBUG");
  if (debug && std::string(debug) != "0") return;
  // glog's flag (Debian's 1.13), then c10's own logger's (2.x wheels, built without glog): FATAL only.
  for (const char* flag : {"_ZN3fLI17FLAGS_minloglevelE", "FLAGS_minloglevel", "FLAGS_caffe2_log_level"})
    if (auto* level = static_cast<int*>(dlsym(RTLD_DEFAULT, flag))) *level = 3;
}

// A c10d failure as one line: LibTorch's messages carry a stack trace and several lines.
[[noreturn]] void fail(const Launch& l, const std::string& what, const std::exception& e) {
  std::string msg = e.what();
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) msg = c->what_without_backtrace();
  if (const auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
  throw DistributedError("distributed (rank " + std::to_string(l.rank) + " of " + std::to_string(l.world_size) +
                         "): " + what + " failed: " + msg + " (a peer died, or did not answer within " +
                         std::to_string(dist_timeout_s()) + " s: POSLAB_DIST_TIMEOUT_S)");
}

template <typename F>
auto guarded(const Launch& l, const std::string& what, F body) {
  try {
    return body();
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    fail(l, what, e);
  }
}

class ProcessGroup : public Distributed {
 public:
  ProcessGroup(const Launch& launch, const torch::Device& device, uint64_t seed, int64_t bucket_bytes,
               const nlohmann::json& same_everywhere)
      : l_(launch), device_(device), bucket_bytes_(bucket_bytes) {
    // This rank's own stream starts from a seed of its own; the device generator is left as it was.
    auto g = dropout_generator();
    const auto saved = g.get_state();
    g.set_current_seed(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(launch.rank + 1)));
    rank_rng_ = g.get_state();
    g.set_state(saved);
    const std::chrono::milliseconds timeout(1000LL * dist_timeout_s());
    quiet_c10d_logging();
    const std::string where = "connecting to MASTER_ADDR=" + l_.master_addr + ":" + std::to_string(l_.master_port);
    auto store = guarded(l_, where, [&] { return make_store(l_, timeout); });
    const auto verdict =
        guarded(l_, where + " (comparing configs)", [&] { return agree_on_config(*store, l_, same_everywhere, timeout); });
    if (!verdict.empty()) throw ConfigError(mismatch_message(verdict, l_.rank));
    guarded(l_, where, [&] {
      if (device.is_cuda()) {
#ifdef POSLAB_WITH_NCCL
        auto opts = c10d::ProcessGroupNCCL::Options::create();
        opts->timeout = timeout;
        group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, l_.rank, l_.world_size, opts);
#endif
      } else {
#ifdef POSLAB_WITH_GLOO
        auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
        const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");  // Python's binding reads it; C++ must itself
        opts->devices.push_back(ifname ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                                       : c10d::ProcessGroupGloo::createDeviceForHostname(
                                             local_address_towards(l_.master_addr, l_.master_port)));
        group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, l_.rank, l_.world_size, opts);
#endif
      }
      return 0;
    });
    if (l_.rank == 0)
      spdlog::info("process group: {} ranks over {} ({}), gradients in buckets of up to {:.1f} MiB, timeout {} s",
                   l_.world_size, device.is_cuda() ? "NCCL" : "Gloo", l_.launcher, bucket_bytes_ / 1048576.0,
                   dist_timeout_s());
  }

  at::Generator dropout_generator() const {
    return device_.is_cuda() ? at::globalContext().defaultGenerator(device_) : at::detail::getDefaultCPUGenerator();
  }

  int rank() const override { return l_.rank; }
  int world_size() const override { return l_.world_size; }

  void broadcast_parameters(const std::vector<torch::Tensor>& params) override {
    torch::NoGradGuard no_grad;
    for (const auto& bucket : plan_buckets(params, bucket_bytes_)) {
      std::vector<torch::Tensor> flat{flatten(params, bucket)};
      c10d::BroadcastOptions o;
      o.rootRank = 0;
      guarded(l_, "broadcasting the initial weights", [&] { return group_->broadcast(flat, o)->wait(); });
      unflatten_into(flat[0], params, bucket);
    }
  }

  void all_reduce_gradients(std::vector<std::vector<torch::Tensor>>& grads) override {
    const auto start = std::chrono::steady_clock::now();
    torch::NoGradGuard no_grad;
    const size_t n = grads.front().size();
    // Parameters without a gradient are the same on every rank (the model's structure decides),
    // so skipping them keeps the bucket layout identical everywhere.
    std::vector<size_t> present;
    std::vector<torch::Tensor> shapes;
    for (size_t k = 0; k < n; ++k)
      if (grads.front()[k].defined()) present.push_back(k), shapes.push_back(grads.front()[k]);
    const auto buckets = plan_buckets(shapes, bucket_bytes_);
    std::vector<torch::Tensor> flats;
    std::vector<c10::intrusive_ptr<c10d::Work>> pending;
    for (const auto& bucket : buckets) {
      // The shards summed in shard order straight into the bucket: the same arithmetic as the
      // fused optimizer's own shard sum in a single process.
      auto flat = torch::empty({bucket.numel}, shapes[bucket.first].options());
      for (size_t i = bucket.first; i < bucket.last; ++i) {
        auto view = flat.narrow(0, bucket.offsets[i - bucket.first], shapes[i].numel()).view_as(shapes[i]);
        const size_t k = present[i];
        view.copy_(grads[0][k]);
        for (size_t s = 1; s < grads.size(); ++s) view.add_(grads[s][k]);
      }
      std::vector<torch::Tensor> one{flat};
      pending.push_back(guarded(l_, "all-reducing gradients", [&] { return group_->allreduce(one); }));
      flats.push_back(flat);
    }
    for (auto& work : pending) guarded(l_, "all-reducing gradients", [&] { return work->wait(); });
    std::vector<torch::Tensor> reduced(n);
    for (size_t b = 0; b < buckets.size(); ++b)
      for (size_t i = buckets[b].first; i < buckets[b].last; ++i)
        reduced[present[i]] = flats[b].narrow(0, buckets[b].offsets[i - buckets[b].first], shapes[i].numel())
                                  .view_as(shapes[i]);
    grads.assign(1, std::move(reduced));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    window_.add(seconds), total_.add(seconds);
  }

  double sum(double value) override {
    std::vector<torch::Tensor> t{torch::full({1}, value, torch::TensorOptions().dtype(torch::kDouble).device(device_))};
    guarded(l_, "all-reducing a scalar", [&] { return group_->allreduce(t)->wait(); });
    return t[0].item<double>();
  }

  bool any(bool value) override { return sum(value ? 1.0 : 0.0) > 0; }

  // Swaps this rank's generator state into the device's default generator (dropout draws there:
  // the CPU's, or the CUDA device's) and back. States, not generators: the same code for both.
  struct Swap : RngScope {
    Swap(at::Generator global, torch::Tensor& own) : global_(std::move(global)), own_(own), shared_(global_.get_state()) {
      global_.set_state(own_);
    }
    ~Swap() override {
      own_ = global_.get_state();
      global_.set_state(shared_);
    }
    at::Generator global_;
    torch::Tensor& own_;
    torch::Tensor shared_;
  };
  std::unique_ptr<RngScope> rank_rng_scope() override { return std::make_unique<Swap>(dropout_generator(), rank_rng_); }

  torch::Tensor gather_rank_rng() override {
    auto mine = rank_rng_.to(device_);  // (bytes,) uint8
    std::vector<torch::Tensor> in{mine};
    std::vector<std::vector<torch::Tensor>> out(1);
    for (int r = 0; r < l_.world_size; ++r) out[0].push_back(torch::empty_like(mine));
    guarded(l_, "gathering RNG states", [&] { return group_->allgather(out, in)->wait(); });
    return torch::stack(out[0]).cpu();  // (world, bytes)
  }

  void restore_rank_rng(const torch::Tensor& states) override {
    if (states.defined()) rank_rng_ = states[l_.rank].contiguous().clone();
  }

  void verify_replicas(const std::vector<torch::Tensor>& params, int64_t step) override {
    if (!check_weights_) return;
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over every parameter's bytes, in order
    for (const auto& p : params) {
      const auto t = p.detach().cpu().contiguous();
      const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
      for (size_t i = 0, n = t.nbytes(); i < n; ++i) h = (h ^ bytes[i]) * 0x100000001b3ULL;
    }
    const auto mine = static_cast<int64_t>(h);
    std::vector<torch::Tensor> t{torch::full({1}, mine, torch::TensorOptions().dtype(torch::kLong).device(device_))};
    c10d::BroadcastOptions o;
    o.rootRank = 0;
    guarded(l_, "comparing weights", [&] { return group_->broadcast(t, o)->wait(); });
    if (t[0].item<int64_t>() != mine)
      throw DistributedError("distributed: rank " + std::to_string(l_.rank) + "'s weights differ from rank 0's after step " +
                             std::to_string(step));
    ++verified_steps_;
  }

  void add_stats(nlohmann::json& row, bool window) override {
    auto& t = window ? window_ : total_;
    row["world_size"] = l_.world_size;
    row["allreduce_ms"] = t.calls ? 1000 * t.seconds / t.calls : 0.0;
    if (window) t = {};
    if (!window && check_weights_) row["replicas_verified_steps"] = verified_steps_;
  }

 private:
  struct Timer {
    double seconds = 0;
    int64_t calls = 0;
    void add(double s) { seconds += s, ++calls; }
  };
  Launch l_;
  torch::Device device_;
  int64_t bucket_bytes_;
  torch::Tensor rank_rng_;  // this rank's dropout stream: a generator state
  c10::intrusive_ptr<Group> group_;
  Timer window_, total_;
  const bool check_weights_ = std::getenv("POSLAB_DIST_CHECK_WEIGHTS") && std::string(std::getenv("POSLAB_DIST_CHECK_WEIGHTS")) != "0";
  int64_t verified_steps_ = 0;
};

}  // namespace
#endif

// Set once this process has begun to join its process group: from then on its peers hear of a failure
// through the group's own rendezvous and collectives, not through tell_peers_of_failure.
static std::atomic<bool> rendezvous_begun{false};

void tell_peers_of_failure(const Launch& launch, const std::string& error) {
  if (!launch.distributed() || rendezvous_begun) return;
#if defined(POSLAB_WITH_GLOO) || defined(POSLAB_WITH_NCCL)
  const std::string line = error.substr(0, error.find('\n'));
  // Nothing is left to checkpoint: a signal while the others are told (rank 0 waits for them to read it)
  // ends this rank at once, where it used to promise a checkpoint and go on waiting.
  exit_on_stop("error: " + line + " (stopped by a signal before the other ranks read it)");
  try {
    quiet_c10d_logging();
    const std::chrono::milliseconds bound(1000LL * std::min(dist_timeout_s(), 30));
    auto store = make_store(launch, bound);
    post_failure(*store, launch, line, bound);
  } catch (...) {
    // Best effort: no peer to tell (none started, or rank 0 is gone); this rank's own error is reported anyway.
  }
#else
  (void)error;
#endif
}

std::unique_ptr<Distributed> connect(const Launch& launch, const torch::Device& device, uint64_t seed,
                                     int64_t bucket_bytes, const nlohmann::json& same_everywhere) {
  if (!launch.distributed()) return std::make_unique<LocalProcess>();
  rendezvous_begun = true;
  const std::string what = "distributed launch (" + launch.launcher + ", world size " +
                           std::to_string(launch.world_size) + "): ";
#ifndef POSLAB_WITH_NCCL
  if (device.is_cuda())
    throw ConfigError(what + "this build has no NCCL (c10d) support for CUDA: rebuild poslab against a LibTorch "
                      "with CUDA where CMake finds nccl.h, or train on device=cpu over Gloo");
#endif
#ifndef POSLAB_WITH_GLOO
  if (!device.is_cuda())
    throw ConfigError(what + "this build has no Gloo (c10d) support: install libgloo-dev (apt-get install "
                      "libgloo-dev) and rebuild poslab");
#endif
#if defined(POSLAB_WITH_GLOO) || defined(POSLAB_WITH_NCCL)
  // A rank waits here for the others (up to POSLAB_DIST_TIMEOUT_S) and nothing is written yet: a signal
  // meanwhile ends it at once, where it used to promise a checkpoint and wait on for a rank that never came.
  exit_on_stop("interrupted at the rendezvous, before training began (nothing written)");
  auto group = std::make_unique<ProcessGroup>(launch, device, seed, bucket_bytes, same_everywhere);
  stop_at_steps();
  return group;
#else
  (void)seed, (void)bucket_bytes, (void)same_everywhere;
  return nullptr;  // unreachable: one of the refusals above has thrown
#endif
}

}  // namespace poslab
