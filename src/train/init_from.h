// `poslab train --init-from RUN`: a new run (new optimizer, LR schedule, step 0) starting from another
// run's weights, e.g. to fine-tune a model to a longer context (Position Interpolation, Chen et al. 2023).
// Everything is checked before the new run directory exists; any mismatch is a one-line ConfigError.
#pragma once
#include <string>

#include "config/config.h"
#include "data/tokenizer.h"
#include "model/gpt.h"

namespace poslab {

struct InitSource {
  std::string dir;
  Config config;  // the source run's resolved config
  CharTokenizer tokenizer;
};

// Reads the source run and checks that its weights fit a model of `config` (layers, width, heads,
// bias, encoding). Fills config.model.pos_encoding.rope_scaling.original_length (when 0) with the
// source's block_size: the length the scaling stretches from.
InitSource read_init_source(const std::string& dir, Config& config);
// Checks what needs the built model and the new corpus's vocabulary (a learned table cannot grow; the
// vocabularies must match), then copies the source's weights into `model`.
// `target_pe`: the new run's encoding section, to name an option that changes a parameter's shape.
void init_weights_from(const InitSource& source, GPT& model, const CharTokenizer& tokenizer,
                       const PosEncodingConfig& target_pe);

}  // namespace poslab
