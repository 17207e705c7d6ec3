// Fixed-size flat buckets for collectives: consecutive tensors packed into one 1-D buffer of at
// most `cap_bytes` (a larger tensor gets a bucket of its own). The plan depends on the shapes
// alone, so every rank builds the same buckets in the same order, as c10d requires.
#pragma once
#include "util/torch_api.h"

#include <vector>

namespace poslab {

struct Bucket {
  size_t first = 0, last = 0;    // tensors [first, last) of the list
  int64_t numel = 0;             // elements in the flat buffer
  std::vector<int64_t> offsets;  // offsets[i - first]: where tensor i starts
};

std::vector<Bucket> plan_buckets(const std::vector<torch::Tensor>& tensors, int64_t cap_bytes);
// The bucket's tensors copied into one flat buffer (on their device, of their dtype); and back.
torch::Tensor flatten(const std::vector<torch::Tensor>& tensors, const Bucket& bucket);
void unflatten_into(const torch::Tensor& flat, const std::vector<torch::Tensor>& tensors, const Bucket& bucket);

}  // namespace poslab
