// Checkpoints: one torch archive per run, written to a temp file, fsynced and renamed into place,
// so a kill at any moment leaves the previous checkpoint intact.
#include <c10/util/Exception.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <sstream>

#include "train/run_dir.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include "util/files.h"
#include "util/runtime.h"

namespace poslab {
namespace fs = std::filesystem;

static const int64_t kCheckpointVersion = 1;

// The torch archive travels inside a small frame: magic, payload length and a FNV-1a hash. A
// truncated or damaged file is refused before LibTorch parses it: fuzzing showed that LibTorch
// 1.13's archive reader can segfault on a damaged file instead of throwing.
static const char kMagic[8] = {'P', 'O', 'S', 'L', 'A', 'B', 'C', 'K'};
static const size_t kHeaderSize = sizeof(kMagic) + 2 * sizeof(uint64_t);

static uint64_t fnv1a(const char* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) h = (h ^ static_cast<unsigned char>(data[i])) * 0x100000001b3ULL;
  return h;
}

static std::string frame_checkpoint(const std::string& payload) {
  std::string out(kMagic, sizeof(kMagic));
  const uint64_t size = payload.size(), hash = fnv1a(payload.data(), payload.size());
  out.append(reinterpret_cast<const char*>(&size), sizeof(size));
  out.append(reinterpret_cast<const char*>(&hash), sizeof(hash));
  return out + payload;
}

// Returns the archive bytes of a framed checkpoint, or throws ConfigError saying what is wrong.
static std::string unframe_checkpoint(const std::string& file, const std::string& path) {
  const std::string bad = "checkpoint " + path + ": truncated or corrupt";
  if (file.size() < kHeaderSize || file.compare(0, sizeof(kMagic), kMagic, sizeof(kMagic)) != 0)
    throw ConfigError(bad + " (no poslab checkpoint header)");
  uint64_t size = 0, hash = 0;
  std::memcpy(&size, file.data() + sizeof(kMagic), sizeof(size));
  std::memcpy(&hash, file.data() + sizeof(kMagic) + sizeof(size), sizeof(hash));
  if (file.size() - kHeaderSize != size)
    throw ConfigError(bad + " (" + std::to_string(file.size() - kHeaderSize) + " bytes of data, the header says " +
                      std::to_string(size) + ")");
  if (fnv1a(file.data() + kHeaderSize, size) != hash) throw ConfigError(bad + " (checksum mismatch)");
  return file.substr(kHeaderSize);
}

void save_checkpoint(const std::string& path, GPT& model, torch::optim::Optimizer& optimizer, const TrainState& s,
                     const nlohmann::json& config) {
  torch::serialize::OutputArchive archive;
  archive.write("version", c10::IValue(kCheckpointVersion));
  archive.write("config", c10::IValue(config.dump()));
  for (const auto& p : model->named_parameters()) archive.write("model." + p.key(), p.value().detach().cpu());
  torch::serialize::OutputArchive opt;
  optimizer.save(opt);
  archive.write("optimizer", opt);
  archive.write("step", c10::IValue(s.step));
  archive.write("data_rng", c10::IValue(static_cast<int64_t>(s.data_rng)));
  archive.write("best_val_loss", c10::IValue(s.has_best ? s.best_val_loss : NAN));
  archive.write("train_seconds", c10::IValue(s.train_seconds));
  archive.write("tokens", c10::IValue(s.tokens));
  archive.write("torch_rng", at::detail::getDefaultCPUGenerator().get_state());
  archive.write("world_size", c10::IValue(s.world_size));
  archive.write("precision", c10::IValue(s.precision));
  if (s.rank_rng.defined()) archive.write("rank_rng", s.rank_rng);
  std::ostringstream payload;
  archive.save_to(payload);
  // Only the run's trainer writes its checkpoint (it holds the run's lock): one temp name, never a pile of them.
  write_file_atomic_via(path, frame_checkpoint(payload.str()), path + ".tmp");
}

template <typename T>
static T read_value(torch::serialize::InputArchive& a, const std::string& key, const std::string& path) {
  c10::IValue v;
  if (!a.try_read(key, v)) throw ConfigError("checkpoint " + path + ": missing '" + key + "' (not a poslab checkpoint?)");
  return v.to<T>();
}

// The verified archive of a framed checkpoint file; ConfigError when missing, truncated or corrupt.
static void open_checkpoint(const std::string& path, torch::serialize::InputArchive& archive) {
  if (!file_exists(path)) throw ConfigError("checkpoint " + path + ": no such file");
  const std::string payload = unframe_checkpoint(read_text_file(path, "checkpoint"), path);
  try {
    archive.load_from(payload.data(), payload.size());
  } catch (const std::exception& e) {  // c10::Error, and whatever else the zip reader throws
    throw ConfigError("checkpoint " + path + ": truncated or corrupt (cannot be read as a torch archive)");
  }
}

// Copies the archive's model.* tensors into the model, after checking the encoding and every shape.
static void read_model(torch::serialize::InputArchive& archive, GPT& model, const std::string& path) {
  if (read_value<int64_t>(archive, "version", path) != kCheckpointVersion)
    throw ConfigError("checkpoint " + path + ": unsupported version");
  auto saved = nlohmann::json::parse(read_value<std::string>(archive, "config", path));
  const auto& want = model->config;
  const std::string saved_kind = saved["model"]["pos_encoding"]["kind"];
  if (saved_kind != want.pos_encoding.kind)
    throw ConfigError("checkpoint " + path + ": trained with encoding '" + saved_kind + "', but the config asks for '" +
                      want.pos_encoding.kind + "'");
  // The head count splits the same weights another way: no shape shows it.
  if (saved["model"].value("n_head", want.n_head) != want.n_head)
    throw ConfigError("checkpoint " + path + ": trained with model.n_head " + saved["model"]["n_head"].dump() +
                      ", but the config asks for " + std::to_string(want.n_head));
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) {
    torch::Tensor t;
    if (!archive.try_read("model." + p.key(), t))
      throw ConfigError("checkpoint " + path + ": has no parameter '" + p.key() + "' (another model shape?)");
    if (t.sizes() != p.value().sizes())
      throw ConfigError("checkpoint " + path + ": parameter '" + p.key() + "' has shape " + c10::str(t.sizes()) +
                        " but the model expects " + c10::str(p.value().sizes()) + " (another model shape?)");
    p.value().copy_(t);
  }
}

// Runs `body`, turning what a damaged or foreign archive throws into a ConfigError naming the file.
template <typename F>
static void guard_checkpoint(const std::string& path, F body) {
  try {
    body();
  } catch (const c10::Error& e) {
    throw ConfigError("checkpoint " + path + ": corrupt or incompatible (" +
                      std::string(e.what_without_backtrace()).substr(0, 200) + ")");
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("checkpoint " + path + ": its stored config is corrupt");
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError("checkpoint " + path + ": corrupt or incompatible (" + std::string(e.what()).substr(0, 200) + ")");
  }
}

void load_checkpoint_weights(const std::string& path, GPT& model) {
  torch::serialize::InputArchive archive;
  open_checkpoint(path, archive);
  guard_checkpoint(path, [&] { read_model(archive, model, path); });
}

// An AdamW state this LibTorch cannot read (one written by another major version keys it differently).
static std::string optimizer_state_unreadable(const std::string& path) {
  return "checkpoint " + path + ": its AdamW state cannot be read by this LibTorch (" + std::to_string(TORCH_VERSION_MAJOR) +
         "." + std::to_string(TORCH_VERSION_MINOR) +
         "; written by another version?); its weights still load: evaluate it, or continue from them with "
         "`poslab train --init-from RUN` (a new optimizer)";
}

TrainState load_checkpoint(const std::string& path, GPT& model, torch::optim::Optimizer* optimizer) {
  torch::serialize::InputArchive archive;
  open_checkpoint(path, archive);
  TrainState s;
  guard_checkpoint(path, [&] {
    read_model(archive, model, path);
    if (optimizer) {
      torch::serialize::InputArchive opt;
      archive.read("optimizer", opt);
      optimizer->load(opt);
      // Optimizer state loads on the CPU; keep it beside the parameters.
      const auto device = model->parameters().front().device();
      for (auto& item : optimizer->state()) {
        if (!item.second) throw ConfigError(optimizer_state_unreadable(path));
        auto& st = static_cast<torch::optim::AdamWParamState&>(*item.second);
        if (!st.exp_avg().defined() || !st.exp_avg_sq().defined()) throw ConfigError(optimizer_state_unreadable(path));
        st.exp_avg(st.exp_avg().to(device));
        st.exp_avg_sq(st.exp_avg_sq().to(device));
      }
    }
    s.step = read_value<int64_t>(archive, "step", path);
    s.data_rng = static_cast<uint64_t>(read_value<int64_t>(archive, "data_rng", path));
    s.best_val_loss = read_value<double>(archive, "best_val_loss", path);
    s.has_best = !std::isnan(s.best_val_loss);
    s.train_seconds = read_value<double>(archive, "train_seconds", path);
    s.tokens = read_value<int64_t>(archive, "tokens", path);
    torch::Tensor rng;
    archive.read("torch_rng", rng);
    auto generator = at::detail::getDefaultCPUGenerator();  // a handle sharing the global state
    generator.set_state(rng);
    c10::IValue world;  // absent before data-parallel runs: those were single-process
    s.world_size = archive.try_read("world_size", world) ? world.toInt() : 1;
    torch::Tensor rank_rng;
    if (archive.try_read("rank_rng", rank_rng)) s.rank_rng = rank_rng;
    c10::IValue precision;  // absent before runs kept it
    if (archive.try_read("precision", precision) && precision.isString()) s.precision = precision.toStringRef();
  });
  return s;
}

std::string checkpoint_precision(const std::string& path) {
  torch::serialize::InputArchive archive;
  open_checkpoint(path, archive);
  c10::IValue precision;
  return archive.try_read("precision", precision) && precision.isString() ? precision.toStringRef() : "";
}

std::string recorded_precision(const RunPaths& run, const std::string& from_checkpoint) {
  const auto known = [](const std::string& p) { return p == "bf16" || p == "fp32"; };
  if (known(from_checkpoint)) return from_checkpoint;
  if (!file_exists(run.summary())) return "";
  std::string why;
  try {
    const nlohmann::json summary = read_json_file(run.summary());
    const nlohmann::json p = summary.is_object() && summary.contains("precision") ? summary["precision"] : nlohmann::json();
    if (p.is_string() && known(p.get<std::string>())) return p.get<std::string>();
    why = p.is_null() ? "records no precision" : "has precision " + p.dump() + ", not \"bf16\" or \"fp32\"";
  } catch (const ConfigError& e) {
    why = "cannot be read (" + std::string(e.what()) + ")";
  }
  spdlog::warn("{} {}: train.precision auto chooses anew", run.summary(), why);
  return "";
}

Config in_run_precision(const Config& c, const RunPaths& run, const std::string& from_checkpoint, const std::string& doing) {
  if (c.train.precision != "auto") return c;
  Config out = with_precision(c, recorded_precision(run, from_checkpoint));
  // Once a process: compare probes its 21 cells from one, and one line says it for all.
  static std::atomic<bool> said{false};
  if (out.train.precision != "auto" && !said.exchange(true))
    spdlog::info("train.precision auto: {} in {}, as the run trained", doing, out.train.precision);
  return out;
}

Config with_precision(Config c, const std::string& recorded) {
  if (c.train.precision != "auto" || recorded.empty()) return c;
  if (recorded == "fp32" || runs_on_cuda(c) || cpu_has_bf16()) c.train.precision = recorded;
  return c;
}

void save_weights(const std::string& path, GPT& model) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& p : model->named_parameters()) dict.insert(p.key(), p.value().detach().cpu().contiguous());
  write_file_atomic(path, torch::pickle_save(dict));
}

std::string RunPaths::cache() const {
  auto p = std::filesystem::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "runs/x/" names runs/x
  return (p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path()).string() + "/.poslab-cache";
}

Tokenizer RunPaths::read_vocab() const {
  if (!file_exists(vocab())) throw ConfigError("run " + dir + ": vocab.json, the run's vocabulary, is missing");
  const nlohmann::json j = read_json_file(vocab());  // names the file where it does not parse
  try {
    return Tokenizer::from_json(j, dir);
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    // Its own messages begin "vocab.json: ": the run's file by its path instead.
    throw ConfigError(vocab() + ": " + (what.rfind("vocab.json: ", 0) == 0 ? what.substr(12) : what));
  }
}

Config RunPaths::read_config() const {
  const nlohmann::json j = read_json_file(config());  // names the file where it does not parse
  try {
    return config_from_json(j);
  } catch (const ConfigError& e) {
    throw ConfigError(config() + ": " + e.what());
  }
}

bool is_run_dir(const std::string& dir) { return file_exists(RunPaths{dir}.config()); }

bool is_compare_dir(const std::string& dir) { return file_exists(dir + "/experiment.json"); }

std::string inside_another_output(const std::string& dir, bool in_runs) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "out/" names out
  for (fs::path at = p; at.has_relative_path(); at = at.parent_path()) {
    const std::string name = at.filename().string();
    if ((name == "cells" || name == "logs" || name == "configs") && is_compare_dir(at.parent_path().string()) &&
        (at == p || in_runs))
      return "a poslab compare output's " + name + "/ folder (" + at.parent_path().string() + ")";
    if (in_runs && at != p && is_run_dir(at.string())) return "a poslab train run (" + at.string() + ")";
  }
  return "";
}

std::string file_not_of_a_run(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  // What a start that stopped early may have written first, named as the run's own paths name them.
  const RunPaths paths{dir};
  const std::string vocab = fs::path(paths.vocab()).filename().string();
  const std::string tokenizer = fs::path(paths.tokenizer_model()).filename().string();
  std::string first;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool log = name.size() > 4 && name.compare(name.size() - 4, 4, ".log") == 0;  // a scheduler's, say
    if (name == vocab || name == tokenizer || name.rfind('.', 0) == 0 || log) continue;
    if (first.empty() || name < first) first = name;
  }
  return first;
}

std::string no_run_here(const std::string& dir) {
  if (is_compare_dir(dir))
    return "no run here (a poslab compare output: its runs are " + dir + "/cells/NAME)";
  return "no run here (config.json is missing)";
}

LoadedRun load_run(const std::string& dir) {
  RunPaths paths{dir};
  if (!is_run_dir(dir)) throw ConfigError("run " + dir + ": " + no_run_here(dir));
  LoadedRun run;
  run.config = paths.read_config();
  run.config.data.cache_dir = paths.cache();
  run.tokenizer = paths.read_vocab();
  run.config.model.vocab_size = static_cast<int>(run.tokenizer.size());
  run.model = GPT(run.config.model);
  if (!file_exists(paths.checkpoint()))
    throw ConfigError("run " + dir + ": no checkpoint.pt" +
                      (file_exists(paths.weights())
                           ? std::string(" (it was removed: commands read a run from checkpoint.pt; model.pt beside it "
                                         "holds the weights alone, for other tools)")
                           : std::string(" yet (the run stopped before its first checkpoint)")));
  run.state = load_checkpoint(paths.checkpoint(), run.model, nullptr);
  run.model->eval();
  return run;
}

}  // namespace poslab
