// The generation loop: feed the tokens the cache lacks (the whole prompt first, then one token per
// step), pick the next token from the last position's logits, repeat.
#include "model/generate.h"

#include <cmath>

namespace poslab {

static torch::Tensor pick_token(torch::Tensor logits, const GenerateOptions& o) {  // logits (1, V) -> (1, 1)
  if (o.temperature == 0) return logits.argmax(-1, /*keepdim=*/true);
  // In double, from the largest logit down: a small temperature (1e-39, legal) would take float logits past
  // its range to inf, and softmax to nan; this way the largest is 0 and the others at worst -inf.
  logits = logits.to(torch::kDouble);
  logits = (logits - std::get<0>(logits.max(-1, /*keepdim=*/true))) / o.temperature;
  if (o.top_k > 0 && o.top_k < logits.size(-1)) {
    auto kth = std::get<0>(logits.topk(o.top_k)).select(-1, o.top_k - 1).unsqueeze(-1);  // (1, 1)
    logits = logits.masked_fill(logits < kth, -INFINITY);
  }
  return torch::multinomial(torch::softmax(logits, -1), 1);
}

std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, const GenerateOptions& o,
                              const TokenCallback& on_token, GenerateStats* stats) {
  torch::InferenceMode guard;
  model->eval();
  const auto device = model->wte->weight.device();
  auto idx = torch::tensor(prompt, torch::kLong).unsqueeze(0).to(device);  // (1, T)
  const int64_t limit = model->pos->eval_length_limit();
  KVCache cache(static_cast<int64_t>(model->h->size()));
  bool caching = o.use_cache;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < o.tokens; ++i) {
    const int64_t T = idx.size(1);
    // Once the encoding refuses a cache at this length it refuses every longer one: drop it for good.
    if (caching && !model->pos->kv_cacheable(T)) caching = false, cache.clear();
    torch::Tensor logits;  // (1, V)
    if (caching) {
      logits = model->forward_cached(idx.slice(1, cache.length), cache, /*last=*/1).select(1, -1);
      if (stats) stats->cached_steps++;
    } else {
      // Encodings with a bounded table (or a randomized draw at evaluation) see only the last `limit` tokens.
      auto context = limit > 0 && T > limit ? idx.slice(1, T - limit) : idx;  // (1, T_ctx)
      logits = model->forward(context, {}, /*last=*/1).select(1, -1);
      if (stats) stats->recompute_steps++;
    }
    auto next = pick_token(logits, o);  // (1, 1)
    idx = torch::cat({idx, next}, 1);
    out.push_back(next.item<int64_t>());
    if (on_token) on_token(out.back(), logits.squeeze(0));
  }
  return out;
}

}  // namespace poslab
