// Typed configuration read by every stage, and its loader.
// A config is built-in defaults <- the "extends" chain <- the file <- --set overrides; unknown
// keys, wrong types and impossible values throw ConfigError naming the key path.
#pragma once
#include <nlohmann/json.hpp>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace poslab {

// Bad input from the user (config, data file, checkpoint, CLI value): the CLI exits with status 2.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Randomized positions (Ruoss et al. 2023): training draws n sorted distinct positions from [0, max_position).
struct RandomizeConfig {
  int max_position = 0;  // 0 = off; else >= model.block_size
  bool eval = false;     // also randomize at evaluation (else 0..n-1)
};

// RoPE frequency scaling (model/positional/rope_scaling.h): rotary kinds only. As eval.rope_scaling it
// applies at evaluation only; as model.pos_encoding.rope_scaling the run trains with it (fine-tuning a
// shorter model to a longer context: Position Interpolation) and it stays on at evaluation and sampling.
struct RopeScalingConfig {
  std::string kind = "none";     // none | linear | ntk | dynamic_ntk | yarn
  double factor = 1.0;           // s >= 1
  // Tokens. 0: eval: the run's training length (model.block_size); model: the --init-from run's
  // block_size (filled in at the start), else model.block_size.
  int original_length = 0;
};

// Options of every kind live side by side; each kind reads its own and ignores the rest.
struct PosEncodingConfig {
  std::string kind = "learned";  // a registered kind (model/positional/registry.h)
  double base = 10000.0;         // sinusoidal, rope, xpos, sandwich
  double scale = 0.0;            // additive multiplier; 0 = the kind's default (see positional.h)
  int bits = 16;                 // binary: number of low position bits written into the embedding
  bool signed_bits = true;       // binary: bits as +-1 (true) or 0/1 (false); JSON key "signed"
  double rotary_fraction = 1.0;  // rope: fraction of each head's dims rotated (GPT-NeoX rotary_pct)
  double scale_base = 512.0;     // xpos: gamma in zeta^(n/gamma)
  int num_buckets = 32;          // t5: relative-distance buckets
  int max_distance = 128;        // t5: distances from here on share the last bucket
  int mlp_width = 32;            // fire: hidden units of the MLP
  double init_c = 0.1;           // fire: initial c in psi(x) = log(c x + 1)
  double init_L = 512.0;         // fire: initial threshold L
  int npos = 64;                 // cope: number of position embeddings (positions clamp to npos-1)
  RandomizeConfig randomize;
  RopeScalingConfig rope_scaling;  // rope, xpos: trained with (and evaluated with) this scaling
  // A shared library adding kinds (model/positional/plugin.h): absolute once loaded (a config file's
  // relative path is relative to that file), with the SHA-256 of its content, which a run records and
  // every later load must match.
  std::string plugin;
  std::string plugin_sha256;
  // The plug-in's kinds' own options, beside the built-in keys in model.pos_encoding ({} without a plug-in).
  nlohmann::json options = nlohmann::json::object();
};

struct ModelConfig {
  int n_layer = 2;
  int n_head = 4;
  int n_embd = 64;
  int block_size = 64;
  double dropout = 0.0;
  bool bias = false;
  PosEncodingConfig pos_encoding;
  int vocab_size = 0;  // not a config key: set from the corpus's tokenizer
};

// Passkey documents (probe/passkey.h) mixed into text training, so that a model learns the format it is
// probed with: a failure past the training length is then about distance, not about the format.
struct PasskeyMixConfig {
  double fraction = 0.0;            // of training windows replaced by passkey documents; 0 = off
  int digits = 5;                   // key length (the probe's default too)
  std::string haystack = "noise";   // noise (the reference's filler) | text (the training split)
  std::string template_name = "auto";  // JSON key "template": auto | reference | compact
  std::string loss = "all";         // all | answer: score every token of a passkey document, or the key alone
};

// Multi-query associative recall (Zoology, Arora et al. 2023): the query region after the pairs.
struct MqarConfig {
  int queries = 0;              // keys queried per example (at most its pairs); 0 = every pair
  std::string gaps = "power";   // power (Zoology: slot i drawn with p ~ (i+1)^(a-1)) | uniform
  double power_a = 0.01;        // the power law's a (Zoology's default); 1 is uniform
  int space = 2;                // query-region slots (characters) per pair
};

struct ProbesConfig {
  PasskeyMixConfig passkey;  // "data.probes.passkey": F is short for {"fraction": F}
};

// Text through a SentencePiece model (data/sentencepiece.h): trained on the text (vocab_size > 0) or
// an existing model file; the text is tokenized once and cached beside the run.
struct TextTokenizerConfig {
  int sp_vocab_size = 0;           // sentencepiece.vocab_size: > 0 trains a model of this size
  std::string sp_model_type = "bpe";  // sentencepiece.model_type: bpe|unigram
  std::string model;               // an existing SentencePiece .model file
  bool enabled() const { return sp_vocab_size > 0 || !model.empty(); }
};

struct DataConfig {
  std::string kind = "task";  // task|text|tokens
  std::string task = "copy";  // see data/README.md
  std::string path;           // text: any UTF-8 file
  TextTokenizerConfig tokenizer;  // text: characters (default) or SentencePiece pieces
  // tokens (data/token_file.h): dir holding train.bin and val.bin, or the two paths.
  std::string dir;
  std::string train_path;
  std::string val_path;
  std::string format = "auto";  // auto|nanogpt|llmc (auto: llm.c when its magic is there)
  std::string dtype = "auto";   // auto|uint16|uint32 (auto: the llm.c header, meta.json, else uint16)
  int vocab_size = 0;           // 0: from meta.json or meta.pkl beside the files
  // Not a config key: where text tokenized with SentencePiece is cached (the run's parent
  // directory/.poslab-cache for runs; empty: the system's temp directory).
  std::string cache_dir;
  int min_len = 1;            // task: items per training example, inclusive range
  int max_len = 16;
  int symbols = 16;           // task: size of the item alphabet (copy, reverse, sort, recall keys)
  double val_fraction = 0.1;  // text: tail fraction held out for validation
  MqarConfig mqar;            // task mqar: its query region (data/README.md)
  ProbesConfig probes;
};

// The most threads train.threads (and OMP_NUM_THREADS) may ask for.
constexpr int kMaxThreads = 1024;

struct TrainConfig {
  int max_iters = 2000;
  int batch_size = 32;
  double learning_rate = 1e-3;
  double min_lr = 1e-4;
  int warmup_iters = 100;
  int lr_decay_iters = 0;  // 0: decay over the whole run (max_iters)
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double grad_clip = 1.0;  // 0 turns clipping off
  int eval_interval = 250;
  // Steps between checkpoints besides those at every evaluation (0: only at evaluations); bounds the
  // steps a restarted run recomputes.
  int checkpoint_interval = 0;
  int eval_iters = 20;
  int log_interval = 50;
  std::string precision = "auto";  // auto|fp32|bf16 (auto: bf16 where the hardware has it)
  int threads = 0;                 // intra-op threads; 0 picks the measured default
  // CPU only: each batch is split into this many shards, run at once on their own threads with
  // single-threaded kernels, gradients summed in a fixed order. 0 = auto (2+ threads, no dropout and
  // at least one example per thread), 1 = off. Dropout draws from one shared RNG, so shards need dropout 0.
  int batch_shards = 0;
  // CPU only: clipping and AdamW in one pass over raw arrays on every core (train/fused_adamw.h),
  // the same update as LibTorch's to float rounding. false: clip_grad_norm_ + torch::optim::AdamW.
  bool fused_adamw = true;
  // CPU only: GELU, LayerNorm, RoPE's rotation and attention's softmax (with its scale, mask and causal limit) as
  // poslab's own single-pass loops with their backward (model/fused_ops.h, model/fused_attention.h), the
  // same functions to float rounding: training 7-11% and evaluation 15-20% faster on the CPUs measured
  // for GELU and LayerNorm, the main job 10% more for the softmax (docs/benchmarks.md#fused-gelu-and-layernorm).
  // false: LibTorch's gelu, layer_norm and softmax, the setting docs/reproductions.md was measured with.
  bool fused_ops = true;
  // Data-parallel runs (src/distributed): gradients are all-reduced in flat buckets of at most this
  // many MiB (DDP's default 25), in the same order on every rank. Ignored in a single process.
  double dist_bucket_mb = 25;
};

struct EvalConfig {
  std::vector<int> lengths;  // run at the end of training; tasks: items, text: tokens
  RopeScalingConfig rope_scaling;
  int batches = 4;     // tasks: batches of examples per length
  int batch_size = 32;  // tasks: examples per batch; text: windows per forward pass
  int stride = 0;  // text sliding-window protocol; 0 = half the eval length
  // Text: how many validation targets are scored, the same ones at every length and in both
  // protocols (the last `tokens` of the split); 0 = every target of the split.
  int tokens = 0;
  // Text: key-token loss (eval/key_tokens.h): targets whose loss falls by more than key_margin nats
  // with the whole window instead of its last key_short tokens. key_short 0 = a quarter of the training
  // length; -1 turns it off.
  int key_short = 0;
  double key_margin = 1.0;
};

struct Config {
  int seed = 1337;
  std::string device = "auto";  // auto|cpu|cuda
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  EvalConfig eval;
};

// Dims of a head that rope rotates at this fraction: floor(head * fraction), rounded down to even.
inline int rotary_dims(int head_dim, double fraction) {
  return static_cast<int>(head_dim * fraction) / 2 * 2;
}

// The built-in defaults as JSON: the schema every file and override is checked against.
const nlohmann::json& default_config_json();

// Reads a JSON file, resolving "extends" (paths relative to the file), merged over the defaults.
nlohmann::json load_config_json(const std::string& path);
// Where `key` of the config at `path` with `overrides` came from: "--set KEY" for the last override that gave
// it, else the nearest file of the "extends" chain that holds it; empty when only the defaults do.
std::string origin_of(const std::string& key, const std::string& path, const std::vector<std::string>& overrides);
// The data kind that reads a data key ("data.dir": "tokens", "data.min_len": "task", ...); the other kinds
// ignore it. Empty for data.kind itself and the keys checked elsewhere (data.tokenizer, data.probes).
std::string data_key_kind(const std::string& key);
// Each option of model.pos_encoding (without the prefix) that only some kinds read, and those kinds, in
// listing order: the built-ins' typed options, scale (the kinds with a scale knob) and the options kinds declare
// (EncodingSpec::options, a loaded plug-in's included). Not kind, plugin, randomize or rope_scaling.
std::map<std::string, std::vector<std::string>> encoding_option_readers();
// The keys that name data files (data.dir, data.train_path, data.val_path, data.path), in that order.
const std::vector<std::string>& data_file_keys();
// The error for a data file named where data.kind was never set (`unset_where` says where it was looked
// for): the default kind, task, reads no file, so the run would train on the task without a word.
std::string data_file_without_kind(const std::string& key, const std::string& unset_where = "");
// Applies "a.b.c=value" overrides in order; the value is parsed as JSON, else taken as a string. A file's
// path (resolve_paths) is taken relative to `relative_to` (a file: its directory; empty: the working directory).
void apply_overrides(nlohmann::json& config, const std::vector<std::string>& overrides,
                     const std::string& relative_to = "");
// The keys that name files (data.path, data.dir, data.train_path, data.val_path, data.tokenizer.model,
// model.pos_encoding.plugin) in a config or a part of one made absolute: relative paths are taken from
// `relative_to`'s directory (empty: the working directory). A run's saved config then names the same files
// wherever it is read from.
void resolve_paths(nlohmann::json& tree, const std::string& relative_to);
// Strict merge of `patch` into `base` (unknown keys and wrong types throw); `where` names the source.
void merge_config(nlohmann::json& base, const nlohmann::json& patch, const std::string& where);
// Typed view + value validation. Throws ConfigError naming the key path.
Config config_from_json(const nlohmann::json& config);
nlohmann::json config_to_json(const Config& config);

// Convenience: file + overrides -> validated config.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Parses a JSON text, turning a syntax error into a ConfigError with line and column.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);
nlohmann::json read_json_file(const std::string& path);
// The first key where two configs (as config_to_json writes them) differ, as a config names it, with both
// values: "train.max_iters is 20 THERE, 30 HERE" ("" where they do not). A list is named whole (a difference
// inside it, "/eval/lengths/-", points at an element, which says nothing to a reader).
std::string first_config_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& there,
                                    const std::string& here);
// Is `v` an integer that fits an int? (get<int> on anything else converts out of range.)
bool json_fits_int(const nlohmann::json& v);
// A number as messages write it: JSON's form ("0.0", "1e-05"), and "nan", "inf" or "-inf" where JSON writes null.
std::string number_text(double x);

}  // namespace poslab
