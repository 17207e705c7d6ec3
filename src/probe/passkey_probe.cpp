// The passkey probe: documents per (length, depth) cell, deterministic from the seed, scored in batches
// by greedy decoding with the KV cache; exact match with Wilson intervals, digit accuracy and the key's
// teacher-forced log-probability per cell, controls beside them.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "data/corpus.h"
#include "model/fused_attention.h"
#include "probe/probe.h"
#include "probe/stats.h"
#include "util/log_once.h"
#include "util/progress.h"
#include "util/stage.h"

namespace poslab {
using nlohmann::json;

// Decoding with the KV cache while a document's cache fits this many bytes: its prefill runs in query
// blocks past the attention budget (GPT::forward_cached), so only the cache itself grows with the
// length. Beyond it (a wide, deep model at a long length) the probe recomputes every digit through forward().
static constexpr int64_t kCacheBudget = int64_t{1} << 30;
// Documents per chunk: as many as keep a chunk's scores within this many bytes, so that its passes
// over them stay near the cache. The main job's probe (2-layer model, 64-512 tokens) ran in 2.7-2.9 s
// at 32 MiB against 3.4 s when chunks filled the whole 256 MiB, with the same results (16 MiB alike;
// 8 MiB slower, one document a chunk at 512 tokens): docs/benchmarks.md.
static constexpr int64_t kChunkBudget = int64_t{32} << 20;

static torch::Tensor last_logits(GPT& model, const torch::Tensor& x, const Runtime& rt) {  // x (B, T) -> (B, V)
  AutocastGuard autocast(rt);
  return model->forward(x, {}, /*last=*/1).select(1, -1).to(torch::kFloat);
}

KeyScores score_keys(GPT& model, const torch::Tensor& docs, int64_t digits, const Runtime& rt, bool allow_cache,
                     const std::function<void(int64_t done, int64_t total)>& on_chunk) {
  torch::InferenceMode guard;
  model->eval();
  KeyScores s;
  const int64_t N = docs.size(0), L = docs.size(1) - 1, P = L + 1 - digits;  // P: prompt tokens
  const auto& m = model->config;
  // A document's scores and probabilities, a block of queries at a time (model/fused_attention.h), and its
  // activations and logits.
  const int64_t q_rows = std::min<int64_t>(L, kInferenceQueryBlock);
  const int64_t row_bytes = int64_t{m.n_head} * q_rows * L * 4 * 2 + L * (m.n_embd * 16 + int64_t{m.vocab_size} * 3) * 4;
  // Keys and values of every layer in fp32, for a document's greedy and teacher-forced rows.
  const int64_t cache_bytes = int64_t{16} * m.n_layer * m.n_embd * L;
  const bool cache = allow_cache && model->pos->kv_cacheable(L) && cache_bytes <= kCacheBudget;
  const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(64, kChunkBudget / std::max<int64_t>(1, row_bytes)));
  for (int64_t b0 = 0; b0 < N; b0 += rows) {
    auto chunk = docs.slice(0, b0, std::min(N, b0 + rows)).to(rt.device);  // (B, L+1)
    const int64_t B = chunk.size(0);
    auto key = chunk.slice(1, P);                         // (B, digits)
    auto greedy = torch::empty({B, digits}, chunk.options());  // (B, digits)
    auto logprob = torch::zeros({B}, torch::kDouble);
    auto take = [&](const torch::Tensor& logits, int64_t i) {  // logits (B, V) at digit i, teacher-forced
      logprob += torch::log_softmax(logits, -1).gather(-1, key.slice(1, i, i + 1)).squeeze(-1).to(torch::kDouble).cpu();
    };
    if (cache) {
      KVCache kv(static_cast<int64_t>(model->h->size()));
      torch::Tensor logits;
      {
        AutocastGuard autocast(rt);
        logits = model->forward_cached(chunk.slice(1, 0, P), kv, /*last=*/1).select(1, -1).to(torch::kFloat);  // (B, V)
      }
      take(logits, 0);
      greedy.select(1, 0).copy_(logits.argmax(-1));
      // Greedy and teacher-forced continuations share the prompt's cache: rows [greedy; teacher].
      for (auto& layer : kv.layers) layer.k = torch::cat({layer.k, layer.k}), layer.v = torch::cat({layer.v, layer.v});
      for (int64_t i = 1; i < digits; ++i) {
        auto next = torch::cat({greedy.slice(1, i - 1, i), key.slice(1, i - 1, i)});  // (2B, 1)
        {
          AutocastGuard autocast(rt);
          logits = model->forward_cached(next, kv).select(1, -1).to(torch::kFloat);  // (2B, V)
        }
        greedy.select(1, i).copy_(logits.slice(0, 0, B).argmax(-1));
        take(logits.slice(0, B), i);
      }
    } else {
      // Teacher forcing in one pass over prompt and key; greedy decoding by a forward per digit.
      torch::Tensor all;
      {
        AutocastGuard autocast(rt);
        all = model->forward(chunk.slice(1, 0, L), {}, /*last=*/digits).to(torch::kFloat);  // (B, digits, V)
      }
      for (int64_t i = 0; i < digits; ++i) take(all.select(1, i), i);
      auto seq = chunk.slice(1, 0, P);
      for (int64_t i = 0; i < digits; ++i) {
        greedy.select(1, i).copy_(last_logits(model, seq, rt).argmax(-1));
        seq = torch::cat({seq, greedy.slice(1, i, i + 1)}, 1);
      }
    }
    auto hits = greedy.eq(key).cpu();  // (B, digits)
    s.trials += B;
    s.exact += hits.all(1).sum().item<int64_t>();
    s.digit_hits += hits.to(torch::kDouble).mean(1).sum().item<double>();
    s.logprob_sum += logprob.sum().item<double>();
    if (on_chunk) on_chunk(s.trials, N);
  }
  return s;
}

static json cell_json(int length, const json& depth, const KeyScores& s, const std::string& control) {
  const auto [lo, hi] = wilson_interval(s.exact, s.trials);
  const double n = static_cast<double>(s.trials);
  return {{"length", length}, {"depth", depth}, {"control", control.empty() ? json(nullptr) : json(control)},
          {"status", "ok"}, {"trials", s.trials}, {"exact", s.exact / n}, {"exact_low", lo}, {"exact_high", hi},
          {"digit_accuracy", s.digit_hits / n}, {"key_logprob", s.logprob_sum / n}};
}

static json not_applicable_cell(int length, const json& depth, const std::string& control, const std::string& why) {
  return {{"length", length}, {"depth", depth}, {"control", control.empty() ? json(nullptr) : json(control)},
          {"status", "n/a: " + why}, {"trials", 0}, {"exact", nullptr}, {"exact_low", nullptr}, {"exact_high", nullptr},
          {"digit_accuracy", nullptr}, {"key_logprob", nullptr}};
}

// One seed per cell, so that a cell's documents do not depend on which other cells run.
static uint64_t cell_seed(int seed, int length, double depth, int control) {
  return static_cast<uint64_t>(seed) * 0x100000001B3ULL ^ static_cast<uint64_t>(length) * 1000003ULL ^
         static_cast<uint64_t>(std::llround(depth * 1e6) + 7) * 7919ULL ^ static_cast<uint64_t>(control) * 104729ULL;
}


std::string text_haystack_refusal(const Config& c) {
  if (c.data.kind != "text")
    return "the run trains on data.kind " + c.data.kind +
           ", and the text haystack cuts held-out text of a text run (data.kind text) at sentence boundaries; take the "
           "noise haystack";
  if (c.data.tokenizer.enabled())
    return "a SentencePiece run takes the noise haystack (the text haystack cuts held-out text at sentence "
           "boundaries, which are characters)";
  return "";
}

void check_passkey_vocabulary(const CharTokenizer& tok, const Config& c, const ProbeOptions& o) {
  const ResolvedPasskey passkey = resolved_passkey(o, c);
  const int digits = passkey.digits;
  const PasskeyTemplate& tmpl = passkey.tmpl;
  if (tok.is_sentencepiece()) {
    // Pieces: each part of the document is encoded on its own and the key one piece per digit.
    try {
      encode_key(tok, "0123456789");
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("--task passkey: ") + e.what());
    }
  } else {
    for (char ch = '0'; ch <= '9'; ++ch)
      if (!tok.contains(std::string(1, ch)))
        throw ConfigError("--task passkey: the run's vocabulary has no digit '" + std::string(1, ch) +
                          "', so it cannot write a pass key (train on text that holds all ten digits; a token-file run "
                          "needs a tokenizer: meta.json's tokenizer, or nanoGPT's meta.pkl)");
  }
  try {
    passkey_fixed_tokens(tok, tmpl, digits);
    noise_haystack(tok, 1);
  } catch (const ConfigError& e) {
    // A text run trained with passkey documents has the template's characters; one trained without may not.
    const bool mixed = c.data.probes.passkey.fraction > 0;
    throw ConfigError("--task passkey: the run's vocabulary cannot write the " + tmpl.name + " template: " + e.what() +
                      (mixed || tok.is_sentencepiece() || c.data.kind != "text"
                           ? std::string()
                           : std::string(" (the run trained without passkey documents, which add the template's "
                                         "characters to a vocabulary: train with data.probes.passkey, as the main job does)")));
  }
}

json passkey_probe(GPT& model, const CharTokenizer& tok, const Config& c, const ProbeOptions& o, const Runtime& rt) {
  if (o.haystack == "text")  // first: the vocabulary is checked for the haystack that will be used
    if (const std::string why = text_haystack_refusal(c); !why.empty())
      throw ConfigError("--haystack text: " + why + " (--haystack noise)");
  check_passkey_vocabulary(tok, c, o);
  const ResolvedPasskey passkey = resolved_passkey(o, c);
  const int digits = passkey.digits;
  const PasskeyTemplate& tmpl = passkey.tmpl;
  Haystack text;
  if (o.haystack == "text") {
    auto corpus = make_corpus(c, tok);
    const auto& val_corpus = static_cast<const TextCorpus&>(*corpus);
    const int64_t n = val_corpus.split_tokens(Split::Val);
    auto val = val_corpus.windows(Split::Val, {0}, n).reshape({-1}).contiguous();  // (n,)
    text = text_haystack(tok, std::vector<int64_t>(val.data_ptr<int64_t>(), val.data_ptr<int64_t>() + n));
  }
  const int64_t fixed = passkey_fixed_tokens(tok, tmpl, digits);
  struct Row { double depth; std::string control; };
  std::vector<Row> rows;
  const std::vector<double> depths = o.depths.empty() ? kDefaultDepths : o.depths;
  for (double d : depths) rows.push_back({d, o.no_needle ? "no_needle" : ""});
  if (o.controls && !o.no_needle) {
    if (std::find(depths.begin(), depths.end(), 1.0) == depths.end()) rows.push_back({1.0, "adjacent"});
    rows.push_back({NAN, "no_needle"});
  }
  // Why a length cannot be probed ("" when it can): an n/a row. A length too short for the template is a
  // choice of the probe's settings, not a property of the model: refused before any work when strict.
  const auto too_short = [&](int L) -> std::string {
    if (L + 1 - fixed >= 1) return "";
    return "the " + tmpl.name + " template with " + std::to_string(digits) + "-digit keys needs more than " +
           std::to_string(fixed - 1) + " tokens";
  };
  auto why_not = [&](int L) -> std::string {
    if (const std::string why = too_short(L); !why.empty()) return why;
    if (const std::string limit = encoding_length_limit(model, L); !limit.empty()) return limit;
    if (o.haystack == "text" && static_cast<int64_t>(text.ids.size()) < L + 1)
      return "the held-out text has " + std::to_string(text.ids.size()) + " tokens";
    return "";
  };
  if (o.strict_lengths)
    for (int L : o.lengths)
      if (const std::string why = too_short(L); !why.empty())
        throw ConfigError("--lengths: " + std::to_string(L) + " tokens cannot be probed: " + why);
  json results = json::array();
  Ticker ticker(10);
  for (size_t li = 0; li < o.lengths.size(); ++li) {
    const int L = o.lengths[li];
    Stage stage("during the passkey probe at " + std::to_string(L) + " tokens");
    const std::string why = why_not(L);
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      const auto& row = rows[ri];
      const json depth = std::isnan(row.depth) ? json(nullptr) : json(row.depth);
      if (!why.empty()) {
        results.push_back(not_applicable_cell(L, depth, row.control, why));
        continue;
      }
      const bool needle = row.control != "no_needle";
      Rng rng(cell_seed(o.seed, L, std::isnan(row.depth) ? -1 : row.depth, needle ? 0 : 1));
      const Haystack noise = o.haystack == "noise" ? noise_haystack(tok, L + 1) : Haystack{};
      const Haystack& hay = o.haystack == "noise" ? noise : text;
      auto docs = torch::empty({o.trials, L + 1}, torch::kLong);
      double depth_sum = 0;
      for (int t = 0; t < o.trials; ++t) {
        const std::string key = random_key(digits, rng);
        const int64_t offset = o.haystack == "noise" ? 0 : draw_sentence_start(hay, L + 1, rng, "--haystack text");
        auto doc = make_passkey_doc(tok, tmpl, key, L, std::isnan(row.depth) ? 0.0 : row.depth, hay, offset, needle);
        depth_sum += needle ? doc.depth : 0;
        docs[t].copy_(torch::tensor(doc.ids, torch::kLong));
      }
      // A long length takes minutes a cell: a line every 10 s at most, so that the probe is seen to move.
      const auto progress = [&](int64_t done, int64_t total) {
        if (o.quiet || done == total || !ticker.due()) return;
        spdlog::info("passkey probe: length {}: cell {} of {}, {} of {} documents scored, {} elapsed", L, ri + 1,
                     rows.size(), done, total, format_duration(ticker.elapsed()));
      };
      json cell = cell_json(L, depth, score_keys(model, docs, digits, rt, /*allow_cache=*/true, progress), row.control);
      if (needle) cell["depth_actual"] = depth_sum / o.trials;
      results.push_back(cell);
    }
    // A filler shorter than any of its sentences has boundaries only at its ends: the depths asked collapse
    // onto 0 and 1 (the adjacent control's layout), and the rows pooled as depths are not what their labels say.
    if (why.empty() && !o.no_needle) {
      std::string asked, placed;
      std::set<long long> distinct;
      auto fmt_g = [](double x) {
        std::ostringstream out;
        out << std::setprecision(2) << x;
        return out.str();
      };
      for (const auto& r : results)
        if (r["length"] == L && r["control"].is_null() && r.contains("depth_actual")) {
          const double actual = r["depth_actual"].get<double>();
          distinct.insert(std::llround(actual * 1e6));
          asked += (asked.empty() ? "" : ", ") + fmt_g(r["depth"].get<double>());
          placed += (placed.empty() ? "" : ", ") + fmt_g(actual);
        }
      if (distinct.size() < depths.size())
        // Once per process: in a compare grid every cell's documents are the same, and so is this finding.
        warn_once(fmt::format("passkey probe at {} tokens: its {} tokens of filler hold too few sentence boundaries for "
                              "the depths asked ({}): the needle was placed at {} (depth_actual in the results; 1 is "
                              "the adjacent control's layout)", L, L + 1 - fixed, asked, placed));
    }
    if (!o.quiet) {
      const double secs = ticker.elapsed();
      spdlog::info("passkey probe: length {} ({}/{}) done, {} elapsed", L, li + 1, o.lengths.size(), format_duration(secs));
    }
  }
  return {{"template", tmpl.name}, {"template_strings", {{"task", tmpl.task}, {"needle", tmpl.needle},
                                                         {"question", tmpl.question}, {"separator", tmpl.sep}}},
          {"digits", digits}, {"haystack", o.haystack}, {"results", results}};
}

}  // namespace poslab
