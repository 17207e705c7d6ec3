// Batching for synthetic tasks (right-padded, answer-only targets) and for text windows.
#include "data/corpus.h"

#include "data/tasks.h"
#include "data/token_corpus.h"
#include "util/files.h"

namespace poslab {

static std::vector<std::string> task_symbols() {
  std::vector<std::string> out;
  for (char c : kTaskAlphabet) out.emplace_back(1, c);
  return out;
}

TaskCorpus::TaskCorpus(const DataConfig& config) : config_(config) { tokenizer_ = CharTokenizer(task_symbols()); }

Batch TaskCorpus::collate(const std::vector<Example>& examples) const {
  int64_t T = 0;
  for (const auto& e : examples) T = std::max<int64_t>(T, static_cast<int64_t>(e.text.size()) - 1);
  const auto B = static_cast<int64_t>(examples.size());
  const int64_t pad = tokenizer_.id("_");
  auto x = torch::full({B, T}, pad, torch::kLong);
  auto y = torch::full({B, T}, -1, torch::kLong);
  auto xa = x.accessor<int64_t, 2>();
  auto ya = y.accessor<int64_t, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const auto& e = examples[b];
    // Right padding: with a causal mask, pads after the example cannot influence it.
    for (int64_t t = 0; t + 1 < static_cast<int64_t>(e.text.size()); ++t) {
      xa[b][t] = tokenizer_.id(std::string(1, e.text[t]));
      if (e.targets.empty() && t + 1 >= e.score_from) ya[b][t] = tokenizer_.id(std::string(1, e.text[t + 1]));
    }
    for (const auto& target : e.targets) ya[b][target.pos] = tokenizer_.id(std::string(1, target.value));
  }
  return {x, y};
}

Batch TaskCorpus::batch(Split split, int batch_size, Rng& rng) const {
  std::vector<Example> examples;
  for (int b = 0; b < batch_size; ++b) {
    int n = static_cast<int>(rng.between(config_.min_len, config_.max_len));
    examples.push_back(make_example(config_.task, n, config_.symbols, rng, config_.mqar));
  }
  return collate(examples);
}

Batch TaskCorpus::batch_at_length(int n, int batch_size, Rng& rng) const {
  std::vector<Example> examples;
  for (int b = 0; b < batch_size; ++b) examples.push_back(make_example(config_.task, n, config_.symbols, rng, config_.mqar));
  return collate(examples);
}

TextCorpus::TextCorpus(const DataConfig& config, int block_size) : block_size_(block_size) {
  std::string text = read_text_file(config.path, "data.path");
  // Passkey documents need the template's characters and the ten digits, whether the text has them or not.
  std::string symbols = text;
  if (config.probes.passkey.fraction > 0)
    for (const auto* t : {&kReferenceTemplate, &kCompactTemplate}) symbols += t->task + t->needle + t->question + t->sep;
  if (config.probes.passkey.fraction > 0) symbols += kNoiseFiller + "0123456789";
  tokenizer_ = CharTokenizer::from_text(symbols, "data.path " + config.path);
  load(config, text);
}

TextCorpus::TextCorpus(const DataConfig& config, int block_size, const Tokenizer& run_tokenizer)
    : block_size_(block_size) {
  tokenizer_ = run_tokenizer;
  load(config, read_text_file(config.path, "data.path"));
}

void TextCorpus::load(const DataConfig& config, const std::string& text) {
  const std::string source = "data.path " + config.path;
  if (text.empty()) throw ConfigError(source + ": the file is empty");
  auto ids = tokenizer_.encode(text, source);
  const auto n = static_cast<int64_t>(ids.size());
  const auto n_val = static_cast<int64_t>(n * config.val_fraction);
  const int64_t need = block_size_ + 1;
  if (n - n_val < need || n_val < need)
    throw ConfigError(source + ": " + std::to_string(n) + " characters is too short: each split needs at least " +
                      "block_size+1 = " + std::to_string(need) + " (validation gets " + std::to_string(n_val) + ")");
  auto all = torch::tensor(ids, torch::kLong);
  train_ = all.slice(0, 0, n - n_val);
  val_ = all.slice(0, n - n_val, n);
  passkey_ = config.probes.passkey;
  if (passkey_.fraction > 0) {
    const std::string key = "data.probes.passkey";
    passkey_template_ = &passkey_template(passkey_.template_name, block_size_, passkey_.digits);
    try {
      for (char c = '0'; c <= '9'; ++c) tokenizer_.id(std::string(1, c));
      const int64_t fixed = passkey_fixed_tokens(tokenizer_, *passkey_template_, passkey_.digits);
      if (block_size_ + 1 - fixed < 1)
        throw ConfigError("the " + passkey_template_->name + " template with " + std::to_string(passkey_.digits) +
                          "-digit keys takes " + std::to_string(fixed) + " tokens before any filler, more than a window of " +
                          "model.block_size+1 = " + std::to_string(block_size_ + 1) +
                          " holds: model.block_size must be at least " + std::to_string(fixed));
      if (passkey_.haystack == "noise") {
        passkey_haystack_ = noise_haystack(tokenizer_, block_size_ + 1);
      } else {
        auto head = ids.begin() + (n - n_val);  // the training split only: validation text stays held out
        passkey_haystack_ = text_haystack(tokenizer_, std::vector<int64_t>(ids.begin(), head));
      }
    } catch (const ConfigError& e) {
      throw ConfigError(key + ": " + e.what());
    }
  }
}

void TextCorpus::passkey_row(int64_t* x, int64_t* y, Rng& rng) const {
  const std::string key = random_key(passkey_.digits, rng);
  const double depth = static_cast<double>(rng.below(1 << 20)) / ((1 << 20) - 1);  // uniform in [0, 1]
  const int64_t T = block_size_;
  const int64_t offset =
      passkey_.haystack == "noise" ? 0 : draw_sentence_start(passkey_haystack_, T + 1, rng, "data.probes.passkey.haystack");
  const auto doc = make_passkey_doc(tokenizer_, *passkey_template_, key, T, depth, passkey_haystack_, offset);
  for (int64_t t = 0; t < T; ++t) {
    x[t] = doc.ids[t];
    // "answer": only the key's digits are targets, so the document teaches retrieval and nothing else.
    y[t] = passkey_.loss == "all" || t + 1 >= doc.key_start ? doc.ids[t + 1] : -1;
  }
}

torch::Tensor TextCorpus::windows(Split split, const std::vector<int64_t>& starts, int64_t len) const {
  auto idx = torch::tensor(starts, torch::kLong).unsqueeze(1) + torch::arange(len, torch::kLong);  // (B, len)
  return tokens(split).index({idx});
}

Batch TextCorpus::batch(Split split, int batch_size, Rng& rng) const {
  const int64_t T = block_size_;
  std::vector<int64_t> starts(batch_size);
  for (auto& s : starts) s = rng.below(split_tokens(split) - T);
  auto w = windows(split, starts, T + 1);  // (B, T+1)
  // Copies, not views: at one row a slice of w counts as contiguous already, so .contiguous() would hand back
  // two views of one buffer, and the passkey rows below, written through x, would overwrite y's masks.
  const auto copy = [](const torch::Tensor& t) { return t.clone(torch::MemoryFormat::Contiguous); };
  Batch out{copy(w.slice(1, 0, T)), copy(w.slice(1, 1, T + 1))};
  if (split == Split::Train && passkey_.fraction > 0) {
    // Each window is replaced by a passkey document with probability `fraction` (drawn after the
    // window starts, so a run without passkey documents draws exactly the same windows).
    auto* x = out.x.data_ptr<int64_t>();
    auto* y = out.y.data_ptr<int64_t>();
    for (int b = 0; b < batch_size; ++b)
      if (static_cast<double>(rng.below(1 << 20)) < passkey_.fraction * (1 << 20)) passkey_row(x + b * T, y + b * T, rng);
  }
  return out;
}

static void check_fits(const Config& config, const Corpus& corpus) {
  if (!corpus.is_task()) return;
  const int64_t need = corpus.tokens_at(config.data.max_len);
  if (need > config.model.block_size)
    throw ConfigError("data.max_len: " + config.data.task + " with " + std::to_string(config.data.max_len) +
                      " items needs " + std::to_string(need) + " input tokens, but model.block_size is " +
                      std::to_string(config.model.block_size));
}

std::unique_ptr<Corpus> make_corpus(const Config& config) {
  std::unique_ptr<Corpus> corpus;
  if (config.data.kind == "task") corpus = std::make_unique<TaskCorpus>(config.data);
  else if (config.data.kind == "tokens" || config.data.tokenizer.enabled()) corpus = make_token_corpus(config, nullptr);
  else corpus = std::make_unique<TextCorpus>(config.data, config.model.block_size);
  check_fits(config, *corpus);
  return corpus;
}

std::unique_ptr<Corpus> make_corpus(const Config& config, const Tokenizer& run_tokenizer) {
  if (config.data.kind == "task") return make_corpus(config);
  if (config.data.kind == "tokens" || config.data.tokenizer.enabled()) return make_token_corpus(config, &run_tokenizer);
  return std::make_unique<TextCorpus>(config.data, config.model.block_size, run_tokenizer);
}

}  // namespace poslab
