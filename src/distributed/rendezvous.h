// The rendezvous of a data-parallel run, before its process group exists: the TCP store, the ranks'
// agreement on one config, and a rank's report that it stopped before it got there. Internal to
// src/distributed, and compiled only with a c10d backend (POSLAB_WITH_GLOO or POSLAB_WITH_NCCL).
#pragma once
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

#include "distributed/launch.h"

namespace poslab {

// The store every rank meets at: rank 0 serves MASTER_PORT (a client under torchrun's agent, which
// serves it already), the others connect, retrying for up to `timeout`.
c10::intrusive_ptr<c10d::Store> make_store(const Launch& l, std::chrono::milliseconds timeout);

// Rank 0's config compared on every rank. Returns the verdict: {} when every rank agrees, else {rank,
// key, value, rank0, others}. Throws DistributedError naming the rank and its error where a rank reported
// that it stopped before the rendezvous (post_failure); other failures of the store propagate as thrown.
nlohmann::json agree_on_config(c10d::Store& store, const Launch& l, const nlohmann::json& same_everywhere,
                               std::chrono::milliseconds timeout);

// The verdict as rank `me`'s one-line refusal.
std::string mismatch_message(const nlohmann::json& verdict, int me);

// Reports through the store that this rank stopped with `error` before the rendezvous, so that the
// others stop at once instead of waiting for it until the timeout. Rank 0, which may serve the store,
// stays until every other rank has read it or `timeout` has passed, and prints the error at once when
// they have not read it within a second.
void post_failure(c10d::Store& store, const Launch& l, const std::string& error, std::chrono::milliseconds timeout);

}  // namespace poslab
