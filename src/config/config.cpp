// The config's typed view: the defaults, each value checked and read into Config, and Config written back
// as JSON. The JSON layers and the strict merge are in config_json.cpp, options that kinds declare in
// encoding_options.cpp, loading a file with its --set overrides in load_config.cpp. Every error message
// starts with the key path (or file) so a user can find it at once.
#include "config/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "config/config_parts.h"
#include "model/positional/registry.h"

namespace poslab {
using nlohmann::json;
using config_parts::comma_list;
using config_parts::find_key;
using config_parts::declared_options_from_json;

static const std::vector<std::string> kTasks = {"copy",   "reverse",  "sort", "addition",
                                                "associative_recall", "parity", "counting", "dyck", "mqar"};

const json& default_config_json() {
  static const json defaults = [] {
    Config c;
    return config_to_json(c);
  }();
  return defaults;
}

// A key of the merged config, which holds every default: absent only by a mistake here.
template <typename T>
static T get(const json& j, const std::string& path) {
  const json* node = find_key(j, path);
  if (!node) throw std::logic_error("config: no default for " + path);
  return node->get<T>();
}

static void require(bool ok, const std::string& key, const std::string& expected, const json& got) {
  if (!ok) throw ConfigError(key + " must be " + expected + ", got " + got.dump());
}

static void one_of(const std::string& key, const std::string& value, const std::vector<std::string>& allowed,
                   const std::string& what) {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end())
    throw ConfigError(key + ": unknown " + what + " '" + value + "' (allowed: " + comma_list(allowed) + ")");
}

// A rope_scaling section under `at` (ending in '.'); `zero_length` says what original_length 0 means.
static RopeScalingConfig rope_scaling_from_json(const json& full, const std::string& at, const std::string& zero_length) {
  RopeScalingConfig r;
  r.kind = get<std::string>(full, at + "kind");
  r.factor = get<double>(full, at + "factor");
  r.original_length = get<int>(full, at + "original_length");
  one_of(at + "kind", r.kind, {"none", "linear", "ntk", "dynamic_ntk", "yarn"}, "rope scaling");
  require(r.factor >= 1.0, at + "factor", ">= 1 (times the training length)", r.factor);
  require(r.original_length >= 0, at + "original_length", ">= 0 tokens (0 = " + zero_length + ")", r.original_length);
  return r;
}

// A scaling (at `at`, ending in '.') applies to the encoding `kind`: only rotary ones have frequencies to
// stretch. Linear, NTK and YaRN by a factor of 1 are no scaling at all: a variant so written would be labelled
// with a kind and change nothing (dynamic NTK at 1 still grows the base with the length).
static void check_rope_scaling(const RopeScalingConfig& r, const std::string& kind, const std::string& at) {
  if (r.kind != "none" && find_encoding(kind)->family != "rotary")
    throw ConfigError(at + "kind: '" + r.kind + "' applies to rotary encodings (" + comma_list(encoding_kinds_of("rotary")) +
                      "), not to '" + kind + "', which has no rotary frequencies to stretch");
  if ((r.kind == "linear" || r.kind == "ntk" || r.kind == "yarn") && r.factor == 1.0)
    throw ConfigError(at + "factor: rope scaling '" + r.kind + "' needs a factor above 1 (1 scales nothing), e.g. " +
                      "the evaluated length over the training length");
}

static json rope_scaling_to_json(const RopeScalingConfig& r) {
  return {{"kind", r.kind}, {"factor", r.factor}, {"original_length", r.original_length}};
}


// The pos_encoding section; `m` has the validated model sizes. Options of other kinds are ignored.
static PosEncodingConfig pos_encoding_from_json(const json& full, const ModelConfig& m) {
  const std::string at = "model.pos_encoding.";
  PosEncodingConfig pe;
  pe.kind = get<std::string>(full, at + "kind");
  pe.base = get<double>(full, at + "base");
  pe.scale = get<double>(full, at + "scale");
  pe.bits = get<int>(full, at + "bits");
  pe.signed_bits = get<bool>(full, at + "signed");
  pe.rotary_fraction = get<double>(full, at + "rotary_fraction");
  pe.scale_base = get<double>(full, at + "scale_base");
  pe.num_buckets = get<int>(full, at + "num_buckets");
  pe.max_distance = get<int>(full, at + "max_distance");
  pe.mlp_width = get<int>(full, at + "mlp_width");
  pe.init_c = get<double>(full, at + "init_c");
  pe.init_L = get<double>(full, at + "init_L");
  pe.npos = get<int>(full, at + "npos");
  pe.randomize.max_position = get<int>(full, at + "randomize.max_position");
  pe.randomize.eval = get<bool>(full, at + "randomize.eval");
  pe.rope_scaling = rope_scaling_from_json(full, at + "rope_scaling.", "the --init-from run's block_size, else model.block_size");
  pe.plugin = get<std::string>(full, at + "plugin");
  pe.plugin_sha256 = get<std::string>(full, at + "plugin_sha256");
  declared_options_from_json(full, pe);
  one_of(at + "kind", pe.kind, encoding_kinds(), "encoding");
  require(pe.base > 1 && std::isfinite(pe.base), at + "base", "a finite number > 1", pe.base);
  require(pe.scale >= 0 && std::isfinite(pe.scale), at + "scale", "a finite number >= 0 (0 = the kind's default)", pe.scale);
  // The kind's own checks (its file registered them) and, for a plug-in's kind, one trial construction.
  check_positional({pe, m.n_embd, m.n_head, m.block_size});
  check_rope_scaling(pe.rope_scaling, pe.kind, at + "rope_scaling.");
  require(pe.randomize.max_position == 0 || pe.randomize.max_position >= m.block_size, at + "randomize.max_position",
          "0 (off) or >= model.block_size (" + std::to_string(m.block_size) + ")", pe.randomize.max_position);
  return pe;
}

// data.tokenizer (text) and the token-file keys (tokens); each kind ignores the other's.
static void token_data_from_json(const json& full, DataConfig& d) {
  auto& t = d.tokenizer;
  t.sp_vocab_size = get<int>(full, "data.tokenizer.sentencepiece.vocab_size");
  t.sp_model_type = get<std::string>(full, "data.tokenizer.sentencepiece.model_type");
  t.model = get<std::string>(full, "data.tokenizer.model");
  one_of("data.tokenizer.sentencepiece.model_type", t.sp_model_type, {"bpe", "unigram"}, "SentencePiece model type");
  require(t.sp_vocab_size == 0 || (t.sp_vocab_size >= 260 && t.sp_vocab_size <= 1000000),
          "data.tokenizer.sentencepiece.vocab_size", "0 (off) or from 260 (256 bytes + 4 specials) to 1000000",
          t.sp_vocab_size);
  if (t.sp_vocab_size > 0 && !t.model.empty())
    throw ConfigError("data.tokenizer: give sentencepiece.vocab_size (train a model) or model (use one), not both");
  if (t.enabled() && d.kind != "text")
    throw ConfigError("data.tokenizer applies to data.kind text (token files are tokenized already)");
  d.dir = get<std::string>(full, "data.dir");
  d.train_path = get<std::string>(full, "data.train_path");
  d.val_path = get<std::string>(full, "data.val_path");
  d.format = get<std::string>(full, "data.format");
  d.dtype = get<std::string>(full, "data.dtype");
  d.vocab_size = get<int>(full, "data.vocab_size");
  one_of("data.format", d.format, {"auto", "nanogpt", "llmc"}, "token file format");
  one_of("data.dtype", d.dtype, {"auto", "uint16", "uint32"}, "token dtype");
  require(d.vocab_size >= 0, "data.vocab_size", ">= 0 (0 = from meta.json or meta.pkl)", d.vocab_size);
  if (d.kind != "tokens") return;
  if (!d.dir.empty() && (!d.train_path.empty() || !d.val_path.empty()))
    throw ConfigError("data.dir: give data.dir (holding train.bin and val.bin) or data.train_path and data.val_path, not both");
  if (d.dir.empty() && (d.train_path.empty() || d.val_path.empty()))
    throw ConfigError("data.kind tokens needs data.dir (holding train.bin and val.bin) or both data.train_path and data.val_path");
}

Config config_from_json(const json& j) {
  json full = default_config_json();
  merge_config(full, j, "config");  // a run's config.json passes through the same checks
  Config c;
  c.seed = get<int>(full, "seed");
  c.device = get<std::string>(full, "device");
  one_of("device", c.device, {"auto", "cpu", "cuda"}, "device");

  auto& d = c.data;
  d.kind = get<std::string>(full, "data.kind");
  d.task = get<std::string>(full, "data.task");
  d.path = get<std::string>(full, "data.path");
  d.min_len = get<int>(full, "data.min_len");
  d.max_len = get<int>(full, "data.max_len");
  d.symbols = get<int>(full, "data.symbols");
  d.val_fraction = get<double>(full, "data.val_fraction");
  one_of("data.kind", d.kind, {"task", "text", "tokens"}, "data kind");
  one_of("data.task", d.task, kTasks, "task");
  if (d.kind == "text" && d.path.empty()) throw ConfigError("data.path must name a text file when data.kind is text");
  token_data_from_json(full, d);
  require(d.min_len >= 1, "data.min_len", "at least 1", d.min_len);
  require(d.max_len >= d.min_len, "data.max_len", ">= data.min_len (" + std::to_string(d.min_len) + ")", d.max_len);
  require(d.symbols >= 2 && d.symbols <= 26, "data.symbols", "between 2 and 26", d.symbols);
  require(d.val_fraction > 0 && d.val_fraction < 1, "data.val_fraction", "in (0, 1)", d.val_fraction);
  auto& mq = d.mqar;
  mq.queries = get<int>(full, "data.mqar.queries");
  mq.gaps = get<std::string>(full, "data.mqar.gaps");
  mq.power_a = get<double>(full, "data.mqar.power_a");
  mq.space = get<int>(full, "data.mqar.space");
  require(mq.queries >= 0, "data.mqar.queries", ">= 0 (0 = every pair)", mq.queries);
  one_of("data.mqar.gaps", mq.gaps, {"power", "uniform"}, "gap distribution");
  require(mq.power_a > 0 && mq.power_a <= 1, "data.mqar.power_a", "in (0, 1] (1 = uniform)", mq.power_a);
  require(mq.space >= 1 && mq.space <= 64, "data.mqar.space", "between 1 and 64 (query slots per pair)", mq.space);
  if (d.kind == "task" && d.task == "mqar") {
    // Keys are distinct letters, so an example cannot hold more pairs than the key alphabet.
    require(d.max_len <= d.symbols, "data.max_len",
            "<= data.symbols (" + std::to_string(d.symbols) + ") for mqar: each pair needs its own key letter", d.max_len);
  }
  auto& pk = d.probes.passkey;
  pk.fraction = get<double>(full, "data.probes.passkey.fraction");
  pk.digits = get<int>(full, "data.probes.passkey.digits");
  pk.haystack = get<std::string>(full, "data.probes.passkey.haystack");
  pk.template_name = get<std::string>(full, "data.probes.passkey.template");
  pk.loss = get<std::string>(full, "data.probes.passkey.loss");
  require(pk.fraction >= 0 && pk.fraction <= 1, "data.probes.passkey.fraction", "in [0, 1] (of training windows)", pk.fraction);
  require(pk.digits >= 1 && pk.digits <= 18, "data.probes.passkey.digits", "between 1 and 18", pk.digits);
  one_of("data.probes.passkey.haystack", pk.haystack, {"noise", "text"}, "haystack");
  one_of("data.probes.passkey.template", pk.template_name, {"auto", "reference", "compact"}, "template");
  one_of("data.probes.passkey.loss", pk.loss, {"all", "answer"}, "loss");
  if (pk.fraction > 0 && d.kind != "text")
    throw ConfigError("data.probes.passkey.fraction: passkey documents mix into text corpora; data.kind is " + d.kind);
  if (pk.fraction > 0 && d.tokenizer.enabled())
    throw ConfigError("data.probes.passkey.fraction: passkey documents mix into character-level text only, not with "
                      "data.tokenizer (SentencePiece)");

  auto& m = c.model;
  m.n_layer = get<int>(full, "model.n_layer");
  m.n_head = get<int>(full, "model.n_head");
  m.n_embd = get<int>(full, "model.n_embd");
  m.block_size = get<int>(full, "model.block_size");
  m.dropout = get<double>(full, "model.dropout");
  m.bias = get<bool>(full, "model.bias");
  require(m.n_layer > 0, "model.n_layer", "positive", m.n_layer);
  require(m.n_head > 0, "model.n_head", "positive", m.n_head);
  require(m.n_embd > 0, "model.n_embd", "positive", m.n_embd);
  require(m.block_size > 0, "model.block_size", "positive", m.block_size);
  require(m.n_embd % m.n_head == 0, "model.n_embd",
          "divisible by model.n_head (" + std::to_string(m.n_head) + ")", m.n_embd);
  require(m.dropout >= 0 && m.dropout < 1, "model.dropout", "in [0, 1)", m.dropout);
  m.pos_encoding = pos_encoding_from_json(full, m);

  auto& t = c.train;
  t.max_iters = get<int>(full, "train.max_iters");
  t.batch_size = get<int>(full, "train.batch_size");
  t.learning_rate = get<double>(full, "train.learning_rate");
  t.min_lr = get<double>(full, "train.min_lr");
  t.warmup_iters = get<int>(full, "train.warmup_iters");
  t.lr_decay_iters = get<int>(full, "train.lr_decay_iters");
  t.weight_decay = get<double>(full, "train.weight_decay");
  t.beta1 = get<double>(full, "train.beta1");
  t.beta2 = get<double>(full, "train.beta2");
  t.grad_clip = get<double>(full, "train.grad_clip");
  t.eval_interval = get<int>(full, "train.eval_interval");
  t.checkpoint_interval = get<int>(full, "train.checkpoint_interval");
  t.eval_iters = get<int>(full, "train.eval_iters");
  t.log_interval = get<int>(full, "train.log_interval");
  t.precision = get<std::string>(full, "train.precision");
  t.threads = get<int>(full, "train.threads");
  t.batch_shards = get<int>(full, "train.batch_shards");
  t.fused_adamw = get<bool>(full, "train.fused_adamw");
  t.fused_ops = get<bool>(full, "train.fused_ops");
  t.dist_bucket_mb = get<double>(full, "train.dist_bucket_mb");
  require(t.max_iters > 0, "train.max_iters", "positive", t.max_iters);
  require(t.batch_size > 0, "train.batch_size", "positive", t.batch_size);
  require(t.learning_rate > 0, "train.learning_rate", "positive", t.learning_rate);
  require(t.min_lr >= 0 && t.min_lr <= t.learning_rate, "train.min_lr", "in [0, learning_rate]", t.min_lr);
  require(t.warmup_iters >= 0, "train.warmup_iters", ">= 0", t.warmup_iters);
  require(t.lr_decay_iters == 0 || t.lr_decay_iters >= t.warmup_iters, "train.lr_decay_iters",
          "0 (= max_iters) or >= train.warmup_iters", t.lr_decay_iters);
  require(t.weight_decay >= 0, "train.weight_decay", ">= 0", t.weight_decay);
  require(t.beta1 >= 0 && t.beta1 < 1, "train.beta1", "in [0, 1)", t.beta1);
  require(t.beta2 >= 0 && t.beta2 < 1, "train.beta2", "in [0, 1)", t.beta2);
  require(t.grad_clip >= 0, "train.grad_clip", ">= 0 (0 turns clipping off)", t.grad_clip);
  require(t.eval_interval > 0, "train.eval_interval", "positive", t.eval_interval);
  require(t.checkpoint_interval >= 0, "train.checkpoint_interval", ">= 0 (0 = at every evaluation only)",
          t.checkpoint_interval);
  require(t.eval_iters > 0, "train.eval_iters", "positive", t.eval_iters);
  require(t.log_interval > 0, "train.log_interval", "positive", t.log_interval);
  require(t.dist_bucket_mb > 0 && t.dist_bucket_mb <= 4096, "train.dist_bucket_mb", "in (0, 4096] MiB",
          t.dist_bucket_mb);
  one_of("train.precision", t.precision, {"auto", "fp32", "bf16"}, "precision");
  // 1024 as OMP_NUM_THREADS is read: beyond, a typo (100000 started as many OpenMP workers, each with its
  // stack, and the run hung the machine instead of training).
  require(t.threads >= 0 && t.threads <= kMaxThreads, "train.threads", "0 (default) to " + std::to_string(kMaxThreads),
          t.threads);
  require(t.batch_shards >= 0 && t.batch_shards <= t.batch_size, "train.batch_shards",
          "0 (auto), 1 (off) or up to train.batch_size", t.batch_shards);
  require(t.batch_shards <= 1 || c.model.dropout == 0, "train.batch_shards",
          "0 or 1 when model.dropout > 0 (shards would share one dropout RNG and the run would not be reproducible)",
          t.batch_shards);

  auto& e = c.eval;
  e.lengths = get<std::vector<int>>(full, "eval.lengths");
  e.batches = get<int>(full, "eval.batches");
  e.batch_size = get<int>(full, "eval.batch_size");
  e.stride = get<int>(full, "eval.stride");
  e.tokens = get<int>(full, "eval.tokens");
  e.key_short = get<int>(full, "eval.key_short");
  e.key_margin = get<double>(full, "eval.key_margin");
  require(e.key_short >= -1, "eval.key_short", "-1 (off), 0 (a quarter of the training length) or a positive number of tokens", e.key_short);
  // Above 0: a target that sees no more in the whole window than in the short context scores the same both
  // ways up to rounding, and a margin of 0 counted that noise (a key-token count that moved with batch_size).
  require(e.key_margin > 0, "eval.key_margin", "> 0 nats", e.key_margin);
  e.rope_scaling = rope_scaling_from_json(full, "eval.rope_scaling.", "the run's training length: model.block_size, a task's longest example");
  check_rope_scaling(e.rope_scaling, c.model.pos_encoding.kind, "eval.rope_scaling.");
  for (size_t i = 0; i < e.lengths.size(); ++i) {
    require(e.lengths[i] > 0, "eval.lengths", "a list of positive lengths", full["eval"]["lengths"]);
    // A length twice would be one evaluation counted twice (compare's seeds and intervals, the tables).
    require(std::find(e.lengths.begin(), e.lengths.begin() + i, e.lengths[i]) == e.lengths.begin() + i, "eval.lengths",
            "a list of distinct lengths (" + std::to_string(e.lengths[i]) + " is listed twice)", full["eval"]["lengths"]);
  }
  if (c.data.kind != "task" && e.key_short > 0) {
    // Checked before training: otherwise the final evaluation would refuse it after all the steps.
    const int longest = e.lengths.empty() ? 8 * c.model.block_size : *std::max_element(e.lengths.begin(), e.lengths.end());
    require(e.key_short < longest, "eval.key_short",
            "fewer tokens than the longest length evaluated (" + std::to_string(longest) + "), or -1 (off)", e.key_short);
    // The short-context pass runs windows of key_short tokens: a learned table has no rows past its block.
    require(c.model.pos_encoding.kind != "learned" || e.key_short <= c.model.block_size, "eval.key_short",
            "at most model.block_size (" + std::to_string(c.model.block_size) +
                ") with a learned table: the short-context pass reads windows of that many tokens",
            e.key_short);
  }
  require(e.batches > 0, "eval.batches", "positive", e.batches);
  require(e.batch_size > 0, "eval.batch_size", "positive", e.batch_size);
  require(e.stride >= 0, "eval.stride", ">= 0 (0 = half the eval length)", e.stride);
  require(e.tokens >= 0, "eval.tokens", ">= 0 (0 = the whole validation split)", e.tokens);
  return c;
}

json config_to_json(const Config& c) {
  const auto& pe = c.model.pos_encoding;
  json out{
      {"seed", c.seed},
      {"device", c.device},
      {"data",
       {{"kind", c.data.kind}, {"task", c.data.task}, {"path", c.data.path}, {"min_len", c.data.min_len},
        {"max_len", c.data.max_len}, {"symbols", c.data.symbols}, {"val_fraction", c.data.val_fraction},
        {"mqar", {{"queries", c.data.mqar.queries}, {"gaps", c.data.mqar.gaps}, {"power_a", c.data.mqar.power_a},
                  {"space", c.data.mqar.space}}},
        {"probes", {{"passkey", {{"fraction", c.data.probes.passkey.fraction}, {"digits", c.data.probes.passkey.digits},
                                 {"haystack", c.data.probes.passkey.haystack},
                                 {"template", c.data.probes.passkey.template_name}, {"loss", c.data.probes.passkey.loss}}}}},
        {"tokenizer",
         {{"sentencepiece", {{"vocab_size", c.data.tokenizer.sp_vocab_size}, {"model_type", c.data.tokenizer.sp_model_type}}},
          {"model", c.data.tokenizer.model}}},
        {"dir", c.data.dir}, {"train_path", c.data.train_path}, {"val_path", c.data.val_path},
        {"format", c.data.format}, {"dtype", c.data.dtype}, {"vocab_size", c.data.vocab_size}}},
      {"model",
       {{"n_layer", c.model.n_layer}, {"n_head", c.model.n_head}, {"n_embd", c.model.n_embd},
        {"block_size", c.model.block_size}, {"dropout", c.model.dropout}, {"bias", c.model.bias},
        {"pos_encoding",
         {{"kind", pe.kind}, {"base", pe.base}, {"scale", pe.scale}, {"bits", pe.bits}, {"signed", pe.signed_bits},
          {"rotary_fraction", pe.rotary_fraction}, {"scale_base", pe.scale_base}, {"num_buckets", pe.num_buckets},
          {"max_distance", pe.max_distance}, {"mlp_width", pe.mlp_width}, {"init_c", pe.init_c},
          {"init_L", pe.init_L}, {"npos", pe.npos},
          {"randomize", {{"max_position", pe.randomize.max_position}, {"eval", pe.randomize.eval}}},
          {"rope_scaling", rope_scaling_to_json(pe.rope_scaling)}, {"plugin", pe.plugin},
          {"plugin_sha256", pe.plugin_sha256}}}}},
      {"train",
       {{"max_iters", c.train.max_iters}, {"batch_size", c.train.batch_size},
        {"learning_rate", c.train.learning_rate}, {"min_lr", c.train.min_lr},
        {"warmup_iters", c.train.warmup_iters}, {"lr_decay_iters", c.train.lr_decay_iters},
        {"weight_decay", c.train.weight_decay}, {"beta1", c.train.beta1}, {"beta2", c.train.beta2},
        {"grad_clip", c.train.grad_clip}, {"eval_interval", c.train.eval_interval},
        {"checkpoint_interval", c.train.checkpoint_interval},
        {"eval_iters", c.train.eval_iters}, {"log_interval", c.train.log_interval},
        {"precision", c.train.precision}, {"threads", c.train.threads},
        {"batch_shards", c.train.batch_shards}, {"fused_adamw", c.train.fused_adamw},
        {"fused_ops", c.train.fused_ops},
        {"dist_bucket_mb", c.train.dist_bucket_mb}}},
      {"eval",
       {{"lengths", c.eval.lengths}, {"batches", c.eval.batches}, {"batch_size", c.eval.batch_size},
        {"stride", c.eval.stride}, {"tokens", c.eval.tokens}, {"key_short", c.eval.key_short}, {"key_margin", c.eval.key_margin},
        {"rope_scaling", rope_scaling_to_json(c.eval.rope_scaling)}}},
  };
  out["model"]["pos_encoding"].update(pe.options);  // a plug-in's options, beside the built-in keys
  return out;
}

}  // namespace poslab
