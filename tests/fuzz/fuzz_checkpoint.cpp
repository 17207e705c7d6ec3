// Fuzzes the checkpoint loader: arbitrary bytes as checkpoint.pt for a tiny model.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "model/gpt.h"
#include "train/run_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/poslab-fuzz-checkpoint-" + std::to_string(::getpid()) + ".pt";
  static poslab::GPT model = [] {
    poslab::ModelConfig m;
    m.n_layer = 1;
    m.n_head = 2;
    m.n_embd = 8;
    m.block_size = 8;
    m.vocab_size = 5;
    return poslab::GPT(m);
  }();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    poslab::load_checkpoint(path, model, nullptr);
  } catch (const poslab::ConfigError&) {
    // refused with a message: the expected outcome for bad input
  }
  return 0;
}
