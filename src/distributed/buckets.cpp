// Bucket planning and (un)flattening; see buckets.h.
#include "distributed/buckets.h"

namespace poslab {

std::vector<Bucket> plan_buckets(const std::vector<torch::Tensor>& tensors, int64_t cap_bytes) {
  std::vector<Bucket> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = tensors[i].numel(), size = static_cast<int64_t>(tensors[i].element_size());
    const bool fits = !out.empty() && tensors[out.back().first].scalar_type() == tensors[i].scalar_type() &&
                      (out.back().numel + n) * size <= cap_bytes;
    if (!fits) {
      out.emplace_back();
      out.back().first = i;
    }
    auto& b = out.back();
    b.offsets.push_back(b.numel);
    b.numel += n;
    b.last = i + 1;
  }
  return out;
}

torch::Tensor flatten(const std::vector<torch::Tensor>& tensors, const Bucket& bucket) {
  std::vector<torch::Tensor> parts;
  for (size_t i = bucket.first; i < bucket.last; ++i) parts.push_back(tensors[i].detach().reshape(-1));
  return torch::cat(parts);
}

void unflatten_into(const torch::Tensor& flat, const std::vector<torch::Tensor>& tensors, const Bucket& bucket) {
  torch::NoGradGuard no_grad;
  for (size_t i = bucket.first; i < bucket.last; ++i)
    tensors[i].copy_(flat.narrow(0, bucket.offsets[i - bucket.first], tensors[i].numel()).view_as(tensors[i]));
}

}  // namespace poslab
