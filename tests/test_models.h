// The tiny model config the model-level tests share: 2 layers, 2 heads, 16 wide, 32 positions.
#pragma once
#include <string>

#include "config/config.h"

namespace poslab::testing {

inline ModelConfig tiny(const std::string& kind) {
  ModelConfig m;
  m.n_layer = 2;
  m.n_head = 2;
  m.n_embd = 16;
  m.block_size = 32;
  m.vocab_size = 11;
  m.pos_encoding.kind = kind;
  return m;
}

}  // namespace poslab::testing
