// Plug-ins that poslab must refuse in one line (tests/cli/cli_errors.sh, tests/test_registry.cpp): no entry
// points, an ABI mismatch, registers nothing, a built-in's kind, one kind twice, a throwing constructor, a
// registration that throws what is not a std::exception, a kind whose forward pass throws what is not a
// std::exception, hooks that return a wrong shape or nan, a learned bias declared constant, an option with a null
// default; libraries without entry points that register a kind from a static EncodingRegistrar as they load
// (inside dlopen): a built-in's name, a free one; and a plug-in whose own static initializer throws inside dlopen.
// Each is a real shared library built against this poslab, all from this one object (tests/CMakeLists.txt): a
// library is libbad_VARIANT.so and reads its variant from its own file name as it loads, since every compile
// here loads the precompiled LibTorch header (~11 s), once instead of once per variant. The variants without
// entry points are linked with a version script that hides them.
#include <dlfcn.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "model/positional/plugin.h"

namespace {
using poslab::PositionalOptions;

// "twice" for .../libbad_twice.so: this library's own file, found from an address inside it.
std::string variant() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&variant), &info) == 0 || info.dli_fname == nullptr)
    throw std::runtime_error("bad_plugin: dladdr found no file for this library");
  std::string name = info.dli_fname;
  name = name.substr(name.find_last_of('/') + 1);
  const std::string prefix = "libbad_", suffix = ".so";
  if (name.rfind(prefix, 0) != 0 || name.size() <= prefix.size() + suffix.size())
    throw std::runtime_error("bad_plugin: " + name + " is not named libbad_VARIANT.so");
  return name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
}

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

// Not a std::exception, and only in a training step (with gradients): the trial call of the hooks at the
// config check runs without them, so the throw comes where a step must catch it.
struct IntBiasImpl : NoBiasImpl {
  IntBiasImpl() : NoBiasImpl("forward_int_bias") {}
  torch::Tensor bias(const torch::Tensor&, const torch::Tensor&) override {
    if (torch::GradMode::is_enabled()) throw 7;
    return {};  // no bias
  }
  bool constant_bias() const override { return false; }  // called in every forward, not cached from a validation
};

// shape: a bias of one head too many; nan: a bias of nan; constant: a learned bias that leaves constant_bias() true.
struct HookBiasImpl : NoBiasImpl {
  HookBiasImpl(int64_t heads, std::string how) : NoBiasImpl("hook_bias"), heads_(heads), how_(std::move(how)) {
    slope_ = register_parameter("slope", torch::ones({heads}));
  }
  torch::Tensor bias(const torch::Tensor& q, const torch::Tensor& k) override {
    const auto distance = (q.unsqueeze(1) - k.unsqueeze(0)).to(torch::kFloat);  // (t_q, t_k)
    if (how_ == "shape") return torch::zeros({heads_ + 1, q.size(0), k.size(0)});
    if (how_ == "nan") return torch::full({heads_, q.size(0), k.size(0)}, std::nan(""));
    return -slope_.view({-1, 1, 1}) * distance.abs();  // (H, t_q, t_k)
  }
  bool constant_bias() const override { return how_ == "constant"; }
  int64_t heads_;
  std::string how_;
  torch::Tensor slope_;
};

// Static initializers, run by dlopen in every variant's library; each acts only in its own.
// static_throws: a table built as the library loads, from something missing on this machine.
int load_table() {
  if (variant() == "static_throws") throw std::runtime_error("the table file kernel.bin is missing");
  return 0;
}
[[maybe_unused]] const int kTable = load_table();
// static_builtin: the in-tree pattern with a built-in's name; static_free: a free name (both without entry points).
std::unique_ptr<poslab::EncodingRegistrar> static_registrar() {
  const auto v = variant();
  if (v == "static_builtin") return std::make_unique<poslab::EncodingRegistrar>(spec("alibi"));
  if (v == "static_free") return std::make_unique<poslab::EncodingRegistrar>(spec("static_free_bias"));
  return nullptr;
}
[[maybe_unused]] const auto kRegistrar = static_registrar();
}  // namespace

extern "C" int not_a_poslab_plugin() { return 1; }  // not_a_plugin: a shared library without poslab's entry points

// The entry points as POSLAB_PLUGIN writes them (model/positional/plugin.h), but for abi's, one number off.
extern "C" __attribute__((visibility("default"))) poslab::PluginAbi poslab_plugin_abi() {
  auto abi = poslab::plugin_abi();
  if (variant() == "abi") abi.poslab_abi += 1;  // built for another plug-in ABI
  return abi;
}

extern "C" __attribute__((visibility("default"))) void poslab_plugin_register(poslab::PluginRegistrar& registrar) {
  const auto v = variant();
  if (v == "abi") {
    registrar.add(spec("abi_kind"));
  } else if (v == "nothing") {
    // registers no kind
  } else if (v == "builtin") {
    registrar.add(spec("alibi"));  // a built-in's name
  } else if (v == "twice") {
    registrar.add(spec("twin_bias"));
    registrar.add(spec("twin_bias"));
  } else if (v == "throws_int") {
    registrar.add(spec("int_bias"));
    throw 42;  // not a std::exception
  } else if (v == "forward_int") {
    auto s = spec("forward_int_bias");
    s.make = [](const PositionalOptions&) { return std::make_shared<IntBiasImpl>(); };
    registrar.add(std::move(s));
  } else if (v == "shape" || v == "nan" || v == "constant") {
    auto s = spec("hook_bias");
    s.make = [v](const PositionalOptions& o) { return std::make_shared<HookBiasImpl>(o.n_head, v); };
    registrar.add(std::move(s));
  } else if (v == "throws") {
    auto s = spec("throwing_bias");
    s.make = [](const PositionalOptions&) -> std::shared_ptr<poslab::PositionalEncodingImpl> {
      throw std::runtime_error("no widths left");
    };
    registrar.add(std::move(s));
  } else if (v == "null_option") {
    auto s = spec("null_option_bias");
    s.options = {{"thing", nullptr}};  // a default no config value could replace
    registrar.add(std::move(s));
  } else if (v == "static_throws") {
    registrar.add(spec("static_throws_bias"));  // not reached: its library failed to load
  } else {
    throw std::runtime_error("bad_plugin: no variant '" + v + "'");
  }
}
