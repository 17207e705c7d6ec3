// Plug-ins that poslab must refuse in one line (tests/cli/cli_errors.sh, tests/test_registry.cpp), one per
// POSLAB_BAD_* macro: no entry points, an ABI mismatch, registers nothing, a built-in's kind, one kind twice,
// a throwing constructor, a registration that throws what is not a std::exception, a kind whose forward
// pass throws what is not a std::exception, hooks that return a wrong shape or nan, a learned bias declared
// constant, and libraries without
// entry points that register a kind from a static EncodingRegistrar as they load (inside dlopen): a
// built-in's name, a free one; and a plug-in whose own static initializer throws inside dlopen. Each is a real shared library built against this poslab (tests/CMakeLists.txt).
#include "model/positional/plugin.h"

#include <cmath>
#include <memory>
#include <stdexcept>

namespace {
using poslab::PositionalOptions;

// A bias kind that does nothing; its construction is what the tests exercise.
class NoBiasImpl : public poslab::PositionalEncodingImpl {
 public:
  explicit NoBiasImpl(std::string kind) : PositionalEncodingImpl(std::move(kind)) {}
  std::string family() const override { return "bias"; }
};

poslab::EncodingSpec spec(const std::string& kind) {
  poslab::EncodingSpec s;
  s.kind = kind;
  s.family = "bias";
  s.make = [kind](const PositionalOptions&) { return std::make_shared<NoBiasImpl>(kind); };
  return s;
}
}  // namespace

#if defined(POSLAB_BAD_NOT_A_PLUGIN)
extern "C" int not_a_poslab_plugin() { return 1; }  // a shared library without poslab's entry points
#elif defined(POSLAB_BAD_STATIC_BUILTIN)
static const poslab::EncodingRegistrar kTaken{spec("alibi")};  // the in-tree pattern, a built-in's name
#elif defined(POSLAB_BAD_STATIC_FREE)
static const poslab::EncodingRegistrar kFree{spec("static_free_bias")};  // a free name, but no entry points
#elif defined(POSLAB_BAD_STATIC_THROWS)
// A table built as the library loads, from something missing on this machine: the throw comes inside dlopen.
static int load_table() { throw std::runtime_error("the table file kernel.bin is missing"); }
[[maybe_unused]] static const int kTable = load_table();
POSLAB_PLUGIN(registrar) { registrar.add(spec("static_throws_bias")); }
#elif defined(POSLAB_BAD_ABI)
// Built for another plug-in ABI: the entry points written out by hand, one number off.
extern "C" __attribute__((visibility("default"))) poslab::PluginAbi poslab_plugin_abi() {
  auto abi = poslab::plugin_abi();
  abi.poslab_abi += 1;
  return abi;
}
extern "C" __attribute__((visibility("default"))) void poslab_plugin_register(poslab::PluginRegistrar& r) {
  r.add(spec("abi_kind"));
}
#else
POSLAB_PLUGIN(registrar) {
#if defined(POSLAB_BAD_NOTHING)
  (void)registrar;  // registers no kind
#elif defined(POSLAB_BAD_BUILTIN)
  registrar.add(spec("alibi"));  // a built-in's name
#elif defined(POSLAB_BAD_TWICE)
  registrar.add(spec("twin_bias"));
  registrar.add(spec("twin_bias"));
#elif defined(POSLAB_BAD_THROWS_INT)
  registrar.add(spec("int_bias"));
  throw 42;  // not a std::exception
#elif defined(POSLAB_BAD_FORWARD_INT)
  struct IntBiasImpl : NoBiasImpl {
    IntBiasImpl() : NoBiasImpl("forward_int_bias") {}
    // Not a std::exception, and only in a training step (with gradients): the trial call of the hooks at the
    // config check runs without them, so the throw comes where a step must catch it.
    torch::Tensor bias(const torch::Tensor&, const torch::Tensor&) override {
      if (torch::GradMode::is_enabled()) throw 7;
      return {};  // no bias
    }
    bool constant_bias() const override { return false; }  // called in every forward, not cached from a validation
  };
  auto s = spec("forward_int_bias");
  s.make = [](const PositionalOptions&) { return std::make_shared<IntBiasImpl>(); };
  registrar.add(std::move(s));
#elif defined(POSLAB_BAD_SHAPE) || defined(POSLAB_BAD_NAN) || defined(POSLAB_BAD_CONSTANT)
  // A bias of one head too many; a bias of nan; a learned bias that leaves constant_bias() true.
  struct HookBiasImpl : NoBiasImpl {
    explicit HookBiasImpl(int64_t heads) : NoBiasImpl("hook_bias"), heads_(heads) {
      slope_ = register_parameter("slope", torch::ones({heads}));
    }
    torch::Tensor bias(const torch::Tensor& q, const torch::Tensor& k) override {
      const auto distance = (q.unsqueeze(1) - k.unsqueeze(0)).to(torch::kFloat);  // (t_q, t_k)
#if defined(POSLAB_BAD_SHAPE)
      return torch::zeros({heads_ + 1, q.size(0), k.size(0)});
#elif defined(POSLAB_BAD_NAN)
      return torch::full({heads_, q.size(0), k.size(0)}, std::nan(""));
#else
      return -slope_.view({-1, 1, 1}) * distance.abs();  // (H, t_q, t_k)
#endif
    }
#if !defined(POSLAB_BAD_CONSTANT)
    bool constant_bias() const override { return false; }
#endif
    int64_t heads_;
    torch::Tensor slope_;
  };
  auto s = spec("hook_bias");
  s.make = [](const PositionalOptions& o) { return std::make_shared<HookBiasImpl>(o.n_head); };
  registrar.add(std::move(s));
#elif defined(POSLAB_BAD_THROWS)
  auto s = spec("throwing_bias");
  s.make = [](const PositionalOptions&) -> std::shared_ptr<poslab::PositionalEncodingImpl> {
    throw std::runtime_error("no widths left");
  };
  registrar.add(std::move(s));
#else
#error "define one POSLAB_BAD_* macro"
#endif
}
#endif
