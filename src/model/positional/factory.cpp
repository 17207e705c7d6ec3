// The factory: the one place where an encoding's kind name picks its implementation.
#include <cmath>

#include "model/positional/additive.h"
#include "model/positional/bias.h"
#include "model/positional/rotary.h"

namespace poslab {

double default_additive_scale(const std::string& kind, int64_t n_embd) {
  return kind == "index" ? 1.0 : 1.0 / std::sqrt(static_cast<double>(n_embd));
}

std::shared_ptr<PositionalEncodingImpl> make_positional(const PositionalOptions& o) {
  const auto& e = o.encoding;
  const double scale = e.scale > 0 ? e.scale : default_additive_scale(e.kind, o.n_embd);
  if (e.kind == "none") return std::make_shared<NoEncodingImpl>();
  if (e.kind == "index") return std::make_shared<IndexEncodingImpl>(scale);
  if (e.kind == "binary") return std::make_shared<BinaryEncodingImpl>(o.n_embd, e.bits, e.signed_bits, scale);
  if (e.kind == "sinusoidal") return std::make_shared<SinusoidalEncodingImpl>(o.n_embd, e.base, scale);
  if (e.kind == "learned") return std::make_shared<LearnedEncodingImpl>(o.block_size, o.n_embd);
  if (e.kind == "rope") return std::make_shared<RotaryEncodingImpl>(o.n_embd / o.n_head, e.base);
  if (e.kind == "alibi") return std::make_shared<AlibiEncodingImpl>(o.n_head);
  throw ConfigError("model.pos_encoding.kind: unknown encoding '" + e.kind + "'");
}

}  // namespace poslab
