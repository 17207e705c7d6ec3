// The factory: looks a kind up in the registry (model/positional/registry.h) and builds it. No code
// here or elsewhere switches on a kind name; each kind's file registers how it is built and checked.
#include "model/positional/positional.h"

namespace poslab {

// The spec of a kind, or ConfigError listing the registered kinds.
static const EncodingSpec& spec_of(const std::string& kind) {
  if (const auto* spec = find_encoding(kind)) return *spec;
  throw ConfigError("model.pos_encoding.kind: unknown encoding '" + kind + "' (allowed: " + join_kinds(encoding_kinds()) + ")");
}

double default_additive_scale(const std::string& kind, int64_t n_embd) {
  const auto& spec = spec_of(kind);
  return spec.default_scale ? spec.default_scale(n_embd) : 1.0;
}

double additive_scale(const PositionalOptions& o) {
  return o.encoding.scale > 0 ? o.encoding.scale : default_additive_scale(o.encoding.kind, o.n_embd);
}

std::string encoding_family(const std::string& kind) { return spec_of(kind).family; }

// A plug-in's code may throw anything, a std::exception or not (`throw "bad width";`): each becomes one
// ConfigError naming the file, where anything else would end the process in std::terminate. Built-ins
// throw ConfigError at most, and only for bad options.
static std::shared_ptr<PositionalEncodingImpl> build(const EncodingSpec& spec, const PositionalOptions& o) {
  if (spec.plugin.empty()) return spec.make(o);
  std::shared_ptr<PositionalEncodingImpl> pe;
  try {
    pe = spec.make(o);
  } catch (const ConfigError&) {
    throw;
  } catch (...) {
    throw ConfigError("model.pos_encoding.kind " + spec.kind + " (plug-in " + spec.plugin +
                      "): its constructor failed: " + current_exception_text());
  }
  if (!pe || pe->kind() != spec.kind || pe->family() != spec.family)
    throw ConfigError("model.pos_encoding.kind " + spec.kind + " (plug-in " + spec.plugin +
                      "): its make function must return an encoding of kind '" + spec.kind + "' and family '" +
                      spec.family + "'");
  return pe;
}

std::shared_ptr<PositionalEncodingImpl> make_positional(const PositionalOptions& o) {
  auto pe = build(spec_of(o.encoding.kind), o);
  pe->set_randomize(o.encoding.randomize.max_position, o.encoding.randomize.eval);
  return pe;
}

void check_positional(const PositionalOptions& o) {
  const auto& spec = spec_of(o.encoding.kind);
  if (spec.check) {
    try {
      spec.check(o);
    } catch (const ConfigError&) {
      throw;
    } catch (...) {  // a check that threw something else: a plug-in's is named by its file
      if (spec.plugin.empty()) throw ConfigError("model.pos_encoding (kind " + spec.kind + "): " + current_exception_text());
      throw ConfigError("model.pos_encoding.kind " + spec.kind + " (plug-in " + spec.plugin +
                        "): its check failed: " + current_exception_text());
    }
  }
  if (spec.plugin.empty()) return;
  // Build it once, so a plug-in whose constructor throws fails here, before any work. Parameters draw from
  // torch's generator: put its state back so the model a run builds next is the one it would have built.
  auto generator = at::detail::getDefaultCPUGenerator();
  const auto state = generator.get_state();
  try {
    torch::NoGradGuard no_grad;
    build(spec, o);
  } catch (...) {
    generator.set_state(state);
    throw;
  }
  generator.set_state(state);
}

}  // namespace poslab
