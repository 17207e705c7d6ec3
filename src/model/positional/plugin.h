// Writing a plug-in: a shared library that adds encodings poslab does not have. It includes this header,
// defines its PositionalEncodingImpl subclasses and registers them in POSLAB_PLUGIN; a config names the
// library in model.pos_encoding.plugin (docs/extending.md; examples/plugin/ is a complete one).
#pragma once
#include <torch/nn/module.h>
#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR, in the ABI a plug-in declares

#include <string>
#include <vector>

#include "model/positional/positional.h"
#include "model/positional/registry.h"

// Bumped whenever PositionalEncodingImpl, EncodingSpec or PositionalOptions change in a way that breaks
// a plug-in compiled against the old ones; poslab refuses a plug-in built for another number.
#define POSLAB_PLUGIN_ABI 1

namespace poslab {

// What a plug-in was compiled against; poslab loads it only when every field equals its own.
struct PluginAbi {
  int poslab_abi;     // POSLAB_PLUGIN_ABI
  int torch_version;  // LibTorch major * 100 + minor: C++ classes (Tensor, nn::Module) change across versions
  int cxx11_abi;      // libstdc++'s std::string layout (_GLIBCXX_USE_CXX11_ABI)
};

inline PluginAbi plugin_abi() {
#ifdef _GLIBCXX_USE_CXX11_ABI
  const int cxx11 = _GLIBCXX_USE_CXX11_ABI;
#else
  const int cxx11 = -1;
#endif
  return {POSLAB_PLUGIN_ABI, TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR, cxx11};
}

// Collects a plug-in's kinds; poslab registers them all once the plug-in returns (or none, on an error).
// Each spec's plugin field is filled in by poslab.
struct PluginRegistrar {
  void add(EncodingSpec spec) { specs.push_back(std::move(spec)); }
  std::vector<EncodingSpec> specs;
};

}  // namespace poslab

// The plug-in's two entry points: its ABI, and the body that registers its kinds:
//   POSLAB_PLUGIN(registrar) { registrar.add({"my_bias", "bias", make, check, {}, {{"width", 8.0}}}); }
#define POSLAB_PLUGIN(registrar)                                                                                \
  extern "C" __attribute__((visibility("default"))) ::poslab::PluginAbi poslab_plugin_abi() {                   \
    return ::poslab::plugin_abi();                                                                              \
  }                                                                                                             \
  extern "C" __attribute__((visibility("default"))) void poslab_plugin_register(::poslab::PluginRegistrar& registrar)
