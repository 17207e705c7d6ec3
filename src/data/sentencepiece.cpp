// Running poslab-tokenize: fork + exec with files for stdin/stdout/stderr (no pipes to deadlock),
// and the cache of tokenized text.
#include "data/sentencepiece.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/config.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace poslab {

static bool executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

std::string tokenize_tool() {
  if (const char* env = std::getenv("POSLAB_TOKENIZE"); env != nullptr && *env) {
    if (!executable(env) || fs::is_directory(env))
      throw ConfigError(std::string("POSLAB_TOKENIZE ") + env + ": not an executable file (unset it to use the poslab-tokenize beside poslab)");
    return env;
  }
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = (self.parent_path() / "poslab-tokenize").string();
    if (executable(beside)) return beside;
  }
#ifdef POSLAB_TOKENIZE_BUILD_PATH
  if (executable(POSLAB_TOKENIZE_BUILD_PATH)) return POSLAB_TOKENIZE_BUILD_PATH;
#endif
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string dir; std::getline(ss, dir, ':');)
      if (executable(dir + "/poslab-tokenize")) return dir + "/poslab-tokenize";
  }
  return "";
}

static std::string temp_file(const std::string& tag) {
  std::string templ = (fs::temp_directory_path() / ("poslab-" + tag + "-XXXXXX")).string();
  const int fd = ::mkstemp(templ.data());
  if (fd < 0) throw std::runtime_error("cannot create a temporary file: " + std::string(std::strerror(errno)));
  ::close(fd);
  return templ;
}

void run_tokenize_tool(const std::vector<std::string>& args, const std::string& input_file, std::string* out,
                       bool show_progress) {
  const std::string tool = tokenize_tool();
  if (tool.empty())
    throw ConfigError("SentencePiece needs the poslab-tokenize executable, which was not found beside poslab or on the "
                      "PATH (build it: it needs libsentencepiece-dev; or set POSLAB_TOKENIZE)");
  const std::string out_file = temp_file("out"), err_file = temp_file("err");
  std::vector<std::string> argv_s{tool};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    const int in = ::open(input_file.empty() ? "/dev/null" : input_file.c_str(), O_RDONLY);
    const int o = ::open(out_file.c_str(), O_WRONLY | O_TRUNC);
    const int e = show_progress ? 2 : ::open(err_file.c_str(), O_WRONLY | O_TRUNC);
    if (in < 0 || o < 0 || e < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(tool.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string err;
  {
    std::ifstream f(err_file);
    std::stringstream ss;
    ss << f.rdbuf();
    err = ss.str();
  }
  if (out != nullptr) {
    std::ifstream f(out_file, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    *out = ss.str();
  }
  ::unlink(out_file.c_str());
  ::unlink(err_file.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code == 0) return;
  // The tool's own one-line message, without its "poslab-tokenize: error: " prefix.
  while (!err.empty() && err.back() == '\n') err.pop_back();
  std::string line = err.substr(err.rfind('\n') == std::string::npos ? 0 : err.rfind('\n') + 1);
  const std::string prefix = "poslab: error: ";
  if (line.rfind(prefix, 0) == 0) line = line.substr(prefix.size());
  if (code == 2) throw ConfigError(line.empty() ? "poslab-tokenize refused its input" : line);
  throw std::runtime_error("poslab-tokenize failed (exit " + std::to_string(code) + ")" + (line.empty() ? "" : ": " + line));
}

// The tool names the model file by its own flag (--model), which poslab's user never typed: a refusal of
// the file names it as the SentencePiece model it is.
static ConfigError naming_the_model(const ConfigError& e) {
  std::string what = e.what();
  if (what.rfind("--model ", 0) == 0) what = "SentencePiece model " + what.substr(8);
  return ConfigError(what);
}

std::vector<int64_t> sentencepiece_encode(const std::string& model, const std::string& text, const std::string& source) {
  const std::string in = temp_file("text");
  {
    std::ofstream f(in, std::ios::binary);
    f << text;
  }
  std::string out;
  try {
    run_tokenize_tool({"encode", "--model", model, "--source", source}, in, &out);
  } catch (const ConfigError& e) {
    ::unlink(in.c_str());
    throw naming_the_model(e);
  } catch (...) {
    ::unlink(in.c_str());
    throw;
  }
  ::unlink(in.c_str());
  std::vector<int64_t> ids;
  std::stringstream ss(out);
  for (int64_t id; ss >> id;) ids.push_back(id);
  return ids;
}

std::string sentencepiece_decode(const std::string& model, const std::vector<int64_t>& ids) {
  const std::string in = temp_file("ids");
  {
    std::ofstream f(in);
    for (auto id : ids) f << id << "\n";
  }
  std::string out;
  try {
    run_tokenize_tool({"decode", "--model", model}, in, &out);
  } catch (const ConfigError& e) {
    ::unlink(in.c_str());
    throw naming_the_model(e);
  } catch (...) {
    ::unlink(in.c_str());
    throw;
  }
  ::unlink(in.c_str());
  return out;
}

int64_t sentencepiece_pieces(const std::string& model) {
  std::string out;
  try {
    run_tokenize_tool({"pieces", "--model", model}, "", &out);
  } catch (const ConfigError& e) {
    throw naming_the_model(e);
  }
  return std::stoll(out);
}

// FNV-1a over the key's text: stable across runs and machines, enough to name a cache entry.
static std::string fnv_hex(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string tokenized_text_dir(const std::string& text_path, double val_fraction, int sp_vocab_size,
                               const std::string& sp_model_type, const std::string& model_path,
                               const std::string& cache_root) {
  struct stat st {};
  if (::stat(text_path.c_str(), &st) != 0) throw ConfigError("data.path " + text_path + ": no such file");
  // The fraction as written in the config, not rounded to 6 decimals (1e-7 became 0, a refusal of the range).
  char fraction[32];
  std::snprintf(fraction, sizeof fraction, "%.15g", val_fraction);
  std::ostringstream text_key;
  text_key << absolute_path(text_path) << '|' << st.st_size << '|' << st.st_mtim.tv_sec << '.' << st.st_mtim.tv_nsec << '|'
           << fraction << '|';
  const std::string stem = cache_root + "/" + fs::path(text_path).stem().string() + "-";
  // The entry of the text tokenized by a given model's bytes.
  auto model_entry = [&](const std::string& model_bytes) { return stem + fnv_hex(text_key.str() + "model|" + fnv_hex(model_bytes)); };
  // The model trained on the text tokenized it too: its entry is an alias of the training settings' one, so that
  // a run reading the text again with its kept copy of that model (evaluation, resume) finds it.
  auto alias_model_entry = [&](const std::string& dir) {
    std::error_code ec;
    const std::string alias = model_entry(read_text_file(dir + "/tokenizer.model", "tokenizer.model"));
    if (!fs::exists(fs::symlink_status(alias, ec))) fs::create_directory_symlink(fs::path(dir).filename(), alias, ec);
  };
  const std::string dir = model_path.empty()
                              ? stem + fnv_hex(text_key.str() + "train|" + std::to_string(sp_vocab_size) + '|' + sp_model_type)
                              : model_entry(read_text_file(model_path, "data.tokenizer.model"));
  // A model trained with fewer pieces than asked for (the text holds no more): said at every use, not only the first.
  auto warn_short = [&] {
    if (!model_path.empty()) return;
    try {
      const auto meta = nlohmann::json::parse(read_text_file(dir + "/meta.json", "meta.json"));
      const int64_t pieces = meta.value("vocab_size", int64_t{0});
      if (pieces > 0 && pieces < sp_vocab_size)
        spdlog::warn("data.tokenizer.sentencepiece.vocab_size {}: the text gives only {} pieces, so the model has {}, not {}",
                     sp_vocab_size, pieces, pieces, sp_vocab_size);
    } catch (const std::exception&) {
      // meta.json is read again, with its errors named, when the token files are opened
    }
  };
  if (file_exists(dir + "/meta.json")) {  // written last: its presence means complete
    if (model_path.empty()) alias_model_entry(dir);
    warn_short();
    return dir;
  }
  const bool created = fs::create_directories(cache_root);
  spdlog::info("tokenizing {} with SentencePiece (cached in {})", text_path, dir);
  std::vector<std::string> args{"tokenize", "--input", text_path, "--out", dir, "--val-fraction",
                                fraction, "--from-config"};
  if (!model_path.empty()) args.insert(args.end(), {"--tokenizer", model_path});
  else args.insert(args.end(), {"--vocab-size", std::to_string(sp_vocab_size), "--model-type", sp_model_type});
  // Two runs of a grid may tokenize at once: each writes its own directory and the rename is atomic.
  try {
    run_tokenize_tool(args, "", nullptr);
  } catch (...) {
    std::error_code ec;
    if (created) fs::remove(cache_root, ec);  // refused input leaves nothing behind (only if still empty)
    throw;
  }
  if (model_path.empty()) alias_model_entry(dir);
  warn_short();
  return dir;
}

}  // namespace poslab
