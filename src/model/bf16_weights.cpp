// The kept bfloat16 copies of weights: one entry per weight, checked against the weight's identity,
// storage and version on every read.
#include "model/bf16_weights.h"

#include <mutex>
#include <unordered_map>

namespace poslab {
namespace {

struct KeptCopy {
  c10::weak_intrusive_ptr<c10::TensorImpl> impl;  // the weight itself: an address alone may be reused
  const void* data;
  int64_t version;
  torch::Tensor copy;  // (w's sizes) bfloat16
};

struct KeptCopies {
  std::mutex mutex;
  std::unordered_map<const c10::TensorImpl*, KeptCopy> entries;
};

KeptCopies& kept_copies() {
  static KeptCopies s;
  return s;
}

bool copy_valid(const KeptCopy& e, const torch::Tensor& w) {
  return e.impl.lock().get() == w.unsafeGetTensorImpl() && e.data == w.data_ptr() && e.version == w._version();
}

// Kept copies of weights freed since: dropped when a new one arrives, so the map holds live weights only.
void prune_copies(KeptCopies& s) {
  for (auto it = s.entries.begin(); it != s.entries.end();)
    it = it->second.impl.expired() ? s.entries.erase(it) : std::next(it);
}

void keep_copy(KeptCopies& s, const torch::Tensor& w, torch::Tensor copy) {
  KeptCopy kept{c10::weak_intrusive_ptr<c10::TensorImpl>(w.getIntrusivePtr()), w.data_ptr(), w._version(), std::move(copy)};
  s.entries.insert_or_assign(w.unsafeGetTensorImpl(), std::move(kept));
}

}  // namespace

torch::Tensor bf16_weight(const torch::Tensor& w) {
  // Parameters only (leaves that take a gradient): a temporary would leave its copy behind.
  if (w.is_inference() || !w.is_leaf() || !w.requires_grad()) return w.to(torch::kBFloat16);
  auto& s = kept_copies();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto found = s.entries.find(w.unsafeGetTensorImpl());
  if (found != s.entries.end() && copy_valid(found->second, w)) return found->second.copy;
  // A normal tensor even under inference mode (an evaluation before training): a later training step
  // saves the copy for its backward, which autograd refuses for an inference tensor.
  c10::InferenceMode normal(/*enabled=*/false);
  torch::NoGradGuard no_grad;
  auto copy = w.detach().to(torch::kBFloat16);
  if (found == s.entries.end()) prune_copies(s);
  keep_copy(s, w, copy);
  return copy;
}

bool has_bf16_weight(const torch::Tensor& w) {
  auto& s = kept_copies();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.entries.count(w.unsafeGetTensorImpl()) > 0;
}

void set_bf16_weight(const torch::Tensor& w, torch::Tensor copy) {
  TORCH_CHECK(copy.scalar_type() == torch::kBFloat16 && copy.sizes() == w.sizes(),
              "set_bf16_weight: a bfloat16 copy of w's sizes expected");
  auto& s = kept_copies();
  std::lock_guard<std::mutex> lock(s.mutex);
  keep_copy(s, w, std::move(copy));
}

void clear_bf16_weights() {
  auto& s = kept_copies();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.entries.clear();
}

}  // namespace poslab
