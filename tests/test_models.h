// The tiny model config the model-level tests share (2 layers, 2 heads, 16 wide, 32 positions), and the
// built-in kinds the tests that go over every kind use.
#pragma once
#include <string>
#include <vector>

#include "config/config.h"
#include "model/positional/registry.h"

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

// The kinds registered when the test binary starts, the built-ins: taken at static initialisation, before
// any test registers kinds of its own (test_registry.cpp adds one that needs an option and implements no
// hook), whichever order the tests run or are combined in.
inline const std::vector<std::string> kBuiltInKinds = encoding_kinds();

}  // namespace poslab::testing
