// Text evaluation: the windows each protocol scores (planned a chunk of targets at a time), the key-token
// pass's short-context losses, and every length's sums over the same chunk of targets.
#include "eval/text_eval.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "eval/accumulator.h"
#include "util/progress.h"
#include "util/stage.h"

namespace poslab {
using nlohmann::json;

std::vector<double> target_losses(GPT& model, const TextCorpus& corpus, int64_t first, int64_t last, int64_t c0,
                                  int64_t c1, int64_t window, int64_t step, const Runtime& rt, int64_t budget,
                                  int batch_size) {
  std::vector<double> out(static_cast<size_t>(c1 - c0), NAN);
  const auto plan = plan_text_windows_in(first, last, window, step, c0, c1);
  for (size_t b0 = 0; b0 < plan.size(); b0 += static_cast<size_t>(batch_size)) {
    const size_t b1 = std::min(plan.size(), b0 + static_cast<size_t>(batch_size));
    std::vector<int64_t> starts;
    for (size_t i = b0; i < b1; ++i) starts.push_back(plan[i].start);
    auto w = corpus.windows(Split::Val, starts, window + 1);  // (b, W+1)
    const Scores s = score_rows(model, w.slice(1, 0, window).contiguous(), w.slice(1, 1, window + 1).contiguous(), rt, budget);
    auto nll = s.nll.accessor<double, 2>();
    for (size_t i = b0; i < b1; ++i)
      for (int64_t t = plan[i].lo; t < plan[i].hi; ++t)
        out[static_cast<size_t>(plan[i].start + t - c0)] = nll[static_cast<int64_t>(i - b0)][t];
  }
  return out;
}

std::vector<TextWindow> plan_text_windows(int64_t first, int64_t last, int64_t length, int64_t step) {
  return plan_text_windows_in(first, last, length, step, first, last);
}

std::vector<TextWindow> plan_text_windows_in(int64_t first, int64_t last, int64_t length, int64_t step, int64_t c0,
                                             int64_t c1) {
  // Window k ends on target e = last - k step and scores (max(first, e - step), e]; the one that starts at
  // token 0, or would start before it, starts there, scores every target left and is the last (so no two
  // windows share a start). Only the k that reach (c0, c1]. The plan's last window: the first k whose
  // targets reach `first`, or whose start is at or before token 0.
  const int64_t k_reaches_first = (last - first + step - 1) / step - 1;
  const int64_t k_clamped = last - length > 0 ? (last - length + step - 1) / step : 0;
  const int64_t k_last = std::min(k_reaches_first, k_clamped);
  std::vector<TextWindow> windows;
  for (int64_t k = std::min(k_last, std::max<int64_t>(0, (last - c1) / step - 1)); k <= k_last; ++k) {
    const int64_t end = last - k * step;
    if (end <= c0) break;
    int64_t lo = std::max(first, end - step), start = end - length;
    if (start <= 0) start = 0, lo = first;
    const int64_t a = std::max(lo, c0), b = std::min(end, c1);  // the targets it scores in the chunk
    if (a < b) windows.push_back({start, a - start, b - start});
  }
  std::reverse(windows.begin(), windows.end());
  return windows;
}

namespace {

// One length's text evaluation, a chunk of targets at a time, both protocols on the same targets: the
// last `eval.tokens` of the validation split (all of it by default). "windows" cuts them into windows of
// L that each score every target; "sliding" moves by `stride` and scores only each window's last
// `stride` targets, so every target but those at the split's start sees at least L - stride tokens
// before it. A window both protocols need is run once.
struct TextLength {
  int L = 0;
  int64_t stride = 0;
  json done;  // set when the length cannot be evaluated (n/a)
  Accumulator acc[2];
  KeyTokenAccumulator key;

  // Scores the targets (c0, c1]; returns their windows-protocol losses (the key tokens' full context).
  std::vector<double> add_chunk(GPT& model, const TextCorpus& corpus, int64_t first, int64_t last, int64_t c0, int64_t c1,
                                const EvalOptions& o, const Runtime& rt, Ticker& ticker) {
    const std::vector<std::vector<TextWindow>> plans = {plan_text_windows_in(first, last, L, L, c0, c1),
                                                        plan_text_windows_in(first, last, L, stride, c0, c1)};
    // Each distinct window start once, with the positions each protocol scores there.
    std::map<int64_t, std::array<std::pair<int64_t, int64_t>, 2>> by_start;
    for (int p = 0; p < 2; ++p)
      for (const auto& w : plans[p]) {
        auto it = by_start.try_emplace(w.start, std::array<std::pair<int64_t, int64_t>, 2>{{{0, 0}, {0, 0}}}).first;
        it->second[p] = {w.lo, w.hi};
      }
    std::vector<std::pair<int64_t, std::array<std::pair<int64_t, int64_t>, 2>>> all(by_start.begin(), by_start.end());
    std::vector<double> full(static_cast<size_t>(c1 - c0), NAN);  // windows protocol, per target
    for (size_t b0 = 0; b0 < all.size(); b0 += o.batch_size) {
      const size_t b1 = std::min(all.size(), b0 + o.batch_size);
      std::vector<int64_t> starts;
      for (size_t i = b0; i < b1; ++i) starts.push_back(all[i].first);
      auto w = corpus.windows(Split::Val, starts, L + 1);  // (b, L+1)
      auto x = w.slice(1, 0, L).contiguous(), y = w.slice(1, 1, L + 1).contiguous();  // (b, L)
      const Scores scores = score_rows(model, x, y, rt, o.memory_budget_bytes);
      for (int p = 0; p < 2; ++p) {
        auto mask = torch::zeros({static_cast<int64_t>(b1 - b0), L}, torch::kBool);  // (b, L)
        for (size_t i = b0; i < b1; ++i) {
          const auto [lo, hi] = all[i].second[p];
          if (hi > lo) mask[static_cast<int64_t>(i - b0)].slice(0, lo, hi).fill_(true);
        }
        acc[p].add(scores, mask);
      }
      auto nll = scores.nll.accessor<double, 2>();
      for (size_t i = b0; i < b1; ++i) {
        const auto [lo, hi] = all[i].second[0];
        for (int64_t t = lo; t < hi; ++t) full[static_cast<size_t>(all[i].first + t - c0)] = nll[static_cast<int64_t>(i - b0)][t];
      }
      if (b1 < all.size() && ticker.due())
        spdlog::info("eval length {}: {} of {} windows scored, {} elapsed", L, b1, all.size(), format_duration(ticker.elapsed()));
    }
    return full;
  }

  json result(int64_t first, bool with_key) const {
    json r = acc[0].result(false);
    r["protocol"] = "windows";
    const json sliding = acc[1].result(false);
    r["sliding"] = {{"stride", stride},
                    {"loss", sliding["loss"]},
                    {"ppl", sliding["ppl"]},
                    {"token_acc", sliding["token_acc"]},
                    {"scored_tokens", sliding["scored_tokens"]}};
    r["first_target"] = first + 1;  // the scored targets: tokens first_target .. N-1 of the validation split
    if (with_key) r["key_tokens"] = key.result();
    return r;
  }
};

}  // namespace

// Every length at once, a chunk of targets at a time, so that nothing held grows with the split: per chunk,
// the key-token pass's short-context losses, then each length's windows over the same targets.
std::vector<json> evaluate_text(GPT& model, const TextCorpus& corpus, const EvalOptions& o, const Runtime& rt,
                                const KeyTokenOptions& key) {
  const int64_t N = corpus.split_tokens(Split::Val);
  // Target t is token t, predicted from tokens before it: targets 1 .. N-1; the last `targets` are scored.
  const int64_t targets = o.tokens > 0 ? std::min<int64_t>(o.tokens, N - 1) : N - 1;
  if (o.tokens > N - 1)  // eval.json's first_target says which were scored; say it here too
    spdlog::info("eval.tokens {}: the validation split holds {} targets, all of them scored", o.tokens, N - 1);
  const int64_t first = N - 1 - targets, last = N - 1;  // scored: first < t <= last
  std::vector<TextLength> lengths(o.lengths.size());
  for (size_t i = 0; i < o.lengths.size(); ++i) {
    auto& s = lengths[i];
    s.L = o.lengths[i];
    s.stride = o.stride > 0 ? std::min(o.stride, s.L) : std::max(1, s.L / 2);
    s.key.options = key;
    const int64_t tokens = corpus.tokens_at(s.L);
    if (N < s.L + 1)
      s.done = not_applicable(s.L, s.L, "validation split has " + std::to_string(N) + " tokens, fewer than " + std::to_string(s.L + 1));
    else try {
        model->pos->check_length(tokens);
      } catch (const PositionLimitError& e) {
        s.done = not_applicable(s.L, tokens, e.what());
      }
  }
  const bool with_key = key.short_context > 0 && N > key.short_context;
  const int64_t chunk = std::max<int64_t>(1, o.chunk_targets);
  Ticker ticker(o.progress_seconds);
  for (int64_t c0 = first; c0 < last; c0 += chunk) {
    const int64_t c1 = std::min(last, c0 + chunk);
    if (targets > chunk)
      spdlog::info("evaluating targets {} to {} of {}", c0 - first + 1, c1 - first, targets);
    std::vector<double> short_nll;
    if (with_key) {
      Stage stage("during the key-token loss's short-context pass");
      short_nll = target_losses(model, corpus, first, last, c0, c1, key.short_context,
                                std::max<int64_t>(1, key.short_context / 2), rt, o.memory_budget_bytes, o.batch_size);
    }
    for (auto& s : lengths) {
      if (!s.done.is_null()) continue;
      Stage stage("during evaluation at " + std::to_string(s.L) + " tokens");
      try {
        const auto full = s.add_chunk(model, corpus, first, last, c0, c1, o, rt, ticker);
        if (with_key && s.L > key.short_context) s.key.add(full, short_nll);
      } catch (const PositionLimitError& e) {
        s.done = not_applicable(s.L, corpus.tokens_at(s.L), e.what());
      }
    }
  }
  std::vector<json> out;
  for (const auto& s : lengths) {
    if (s.done.is_null()) {
      json r = s.result(first, with_key);
      // A window no longer than the short context gives no more context than it: no key tokens to find.
      if (with_key && s.L <= key.short_context) r["key_tokens"] = nullptr;
      out.push_back(r);
      continue;
    }
    json r = s.done;  // n/a: the text fields there too, their numbers null
    r["protocol"] = "windows";
    r["first_target"] = nullptr;
    r["sliding"] = nullptr;
    if (with_key) r["key_tokens"] = nullptr;
    out.push_back(r);
  }
  return out;
}

}  // namespace poslab
