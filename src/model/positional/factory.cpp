// The factory: the one place where an encoding's kind name picks its implementation.
#include <cmath>

#include "model/positional/additive.h"
#include "model/positional/bias.h"
#include "model/positional/cope.h"
#include "model/positional/relative_bias.h"
#include "model/positional/rotary.h"

namespace poslab {

double default_additive_scale(const std::string& kind, int64_t n_embd) {
  return kind == "index" ? 1.0 : 1.0 / std::sqrt(static_cast<double>(n_embd));
}

static std::shared_ptr<PositionalEncodingImpl> make_kind(const PositionalOptions& o) {
  const auto& e = o.encoding;
  const double scale = e.scale > 0 ? e.scale : default_additive_scale(e.kind, o.n_embd);
  if (e.kind == "none") return std::make_shared<NoEncodingImpl>();
  if (e.kind == "index") return std::make_shared<IndexEncodingImpl>(scale);
  if (e.kind == "binary") return std::make_shared<BinaryEncodingImpl>(o.n_embd, e.bits, e.signed_bits, scale);
  if (e.kind == "sinusoidal") return std::make_shared<SinusoidalEncodingImpl>(o.n_embd, e.base, scale);
  // Randomized positions reach max_position - 1: the table needs that many rows.
  const int64_t rows = e.randomize.max_position > 0 ? e.randomize.max_position : o.block_size;
  if (e.kind == "learned") return std::make_shared<LearnedEncodingImpl>(rows, o.n_embd);
  const int64_t head = o.n_embd / o.n_head;
  if (e.kind == "rope") return std::make_shared<RotaryEncodingImpl>(head, e.base, rotary_dims(head, e.rotary_fraction));
  if (e.kind == "xpos") return std::make_shared<XposEncodingImpl>(head, e.base, e.scale_base);
  if (e.kind == "alibi") return std::make_shared<AlibiEncodingImpl>(o.n_head);
  if (e.kind == "t5") return std::make_shared<T5BiasImpl>(o.n_head, o.n_embd, e.num_buckets, e.max_distance);
  if (e.kind == "kerple_log" || e.kind == "kerple_power") return std::make_shared<KerpleBiasImpl>(e.kind, o.n_head);
  if (e.kind == "sandwich") return std::make_shared<SandwichBiasImpl>(o.n_head, head, e.base);
  if (e.kind == "fire") return std::make_shared<FireBiasImpl>(o.n_head, e.mlp_width, e.init_c, e.init_L);
  if (e.kind == "cope") return std::make_shared<CopeEncodingImpl>(head, e.npos);
  throw ConfigError("model.pos_encoding.kind: unknown encoding '" + e.kind + "'");
}

std::string encoding_family(const std::string& kind) {
  PosEncodingConfig e;
  e.kind = kind;
  return make_kind({e, /*n_embd=*/2, /*n_head=*/1, /*block_size=*/1})->family();  // the smallest valid shape
}

std::shared_ptr<PositionalEncodingImpl> make_positional(const PositionalOptions& o) {
  auto pe = make_kind(o);
  pe->set_randomize(o.encoding.randomize.max_position, o.encoding.randomize.eval);
  return pe;
}

}  // namespace poslab
