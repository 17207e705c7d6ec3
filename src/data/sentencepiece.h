// SentencePiece from poslab: the poslab-tokenize executable does the work in its own process.
// Debian's libsentencepiece carries its own protobuf-lite while LibTorch links libprotobuf; two
// protobuf runtimes in one process is a risk no test can clear for every LibTorch, so poslab never
// links libsentencepiece and runs poslab-tokenize (which never links LibTorch) instead.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace poslab {

// poslab-tokenize: $POSLAB_TOKENIZE, else beside the running executable, else the build tree's,
// else the PATH. Empty when none is found.
std::string tokenize_tool();
// Runs poslab-tokenize with `args`; stdin from `input_file` (or /dev/null), stdout into `*out`.
// A refusal (exit 2) becomes a ConfigError with the tool's own one-line message; progress lines
// on its stderr are passed through when `show_progress`.
void run_tokenize_tool(const std::vector<std::string>& args, const std::string& input_file, std::string* out,
                       bool show_progress = false);

std::vector<int64_t> sentencepiece_encode(const std::string& model, const std::string& text, const std::string& source);
std::string sentencepiece_decode(const std::string& model, const std::vector<int64_t>& ids);
// The model's count of pieces (it is loaded to count them: a damaged model is refused here).
int64_t sentencepiece_pieces(const std::string& model);

// Text through SentencePiece, tokenized once: a directory under `cache_root` keyed by the text
// file (path, size, modification time), the split and the tokenizer (training settings, or the
// model file's bytes) holding train.bin, val.bin, meta.json and tokenizer.model. Returns it.
std::string tokenized_text_dir(const std::string& text_path, double val_fraction, int sp_vocab_size,
                               const std::string& sp_model_type, const std::string& model_path,
                               const std::string& cache_root);

}  // namespace poslab
