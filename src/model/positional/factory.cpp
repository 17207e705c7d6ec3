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

// One small call of each hook a plug-in's family uses, so that a wrong shape, a value that is not finite, or
// parameters behind a bias declared constant (the model would cache it across steps, and the second backward
// through it fail) is one line naming the file now, not a LibTorch error inside a training step.
static void try_plugin_hooks(const EncodingSpec& spec, PositionalEncodingImpl& pe, const PositionalOptions& o) {
  const std::string who = "model.pos_encoding.kind " + spec.kind + " (plug-in " + spec.plugin + "): ";
  const int64_t T = std::min<int64_t>(o.block_size, 8), H = o.n_head, C = o.n_embd, hs = C / H;
  const auto positions = torch::arange(T, torch::kLong);  // (T,)
  auto expect = [&](const char* hook, const torch::Tensor& got, std::vector<int64_t> want) {
    auto text = [](c10::IntArrayRef sizes) {
      std::string out;
      for (const auto n : sizes) out += (out.empty() ? "" : ", ") + std::to_string(n);
      return "(" + out + ")";
    };
    if (!got.defined() || got.sizes() != c10::IntArrayRef(want))
      throw ConfigError(who + hook + " returned " + (got.defined() ? "a tensor of shape " + text(got.sizes()) : "no tensor") +
                        " for " + std::to_string(T) + " positions, expected " + text(want) + " (docs/extending.md)");
    if (!torch::isfinite(got).all().item<bool>())
      throw ConfigError(who + hook + " returned values that are not finite (nan or inf) for positions 0.." + std::to_string(T - 1));
  };
  try {
    if (spec.family == "additive") expect("embed()", pe.embed(torch::zeros({1, T, C}), positions), {1, T, C});
    if (spec.family == "rotary") {
      const auto [q, k] = pe.rotate(torch::ones({1, H, T, hs}), torch::ones({1, H, T, hs}), positions);
      expect("rotate()", q, {1, H, T, hs});
      expect("rotate()", k, {1, H, T, hs});
    }
    if (spec.family == "bias") {
      if (const auto b = pe.bias(positions, positions); b.defined()) expect("bias()", b, {H, T, T});
      if (pe.constant_bias() && !pe.parameters().empty())
        throw ConfigError(who + "it has parameters but constant_bias() is true: a learned bias must override "
                                "constant_bias() to return false (docs/extending.md)");
    }
    if (spec.family == "context") expect("scores()", pe.scores(torch::zeros({1, H, T, T}), torch::ones({1, H, T, hs}), 1.0), {1, H, T, T});
  } catch (const ConfigError&) {
    throw;
  } catch (...) {
    throw ConfigError(who + "a trial call of its hooks failed: " + current_exception_text());
  }
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
    try_plugin_hooks(spec, *build(spec, o), o);
  } catch (...) {
    generator.set_state(state);
    throw;
  }
  generator.set_state(state);
}

}  // namespace poslab
