// `poslab train --init-from RUN`: a new run (new optimizer, LR schedule, step 0) starting from another
// run's weights, e.g. to fine-tune a model to a longer context (Position Interpolation, Chen et al. 2023).
// Everything is checked before the new run directory exists; any mismatch is a one-line ConfigError.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "data/tokenizer.h"
#include "model/gpt.h"

namespace poslab {

struct InitSource {
  std::string dir;
  Config config;  // the source run's resolved config
  CharTokenizer tokenizer;
  nlohmann::json summary;  // its summary.json (status, step), null where it has none
};

// Reads the source run and checks that its weights fit a model of `config` (layers, width, heads,
// bias, encoding). Fills config.model.pos_encoding.rope_scaling.original_length (when 0) with the
// source's block_size: the length the scaling stretches from.
InitSource read_init_source(const std::string& dir, Config& config);
// What init_from.json records, and the run's log line says: the source (absolute path), its block_size,
// status and step (its weights are those of that step), and the model keys set otherwise here
// ({"model.pos_encoding.base": {"there": 10000, "here": 500000}}): the weights fit, their meaning moved.
nlohmann::json init_source_record(const InitSource& source, const Config& config);
std::string describe_init_source(const nlohmann::json& record);
// Checks what needs the built model and the new corpus's vocabulary (a learned table cannot grow; the
// vocabularies must match), then copies the source's weights into `model`.
// `target_pe`: the new run's encoding section, to name an option that changes a parameter's shape.
void init_weights_from(const InitSource& source, GPT& model, const CharTokenizer& tokenizer,
                       const PosEncodingConfig& target_pe);

}  // namespace poslab
