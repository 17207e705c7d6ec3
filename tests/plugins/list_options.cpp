// A plug-in whose options are lists and objects (tests/cli/cli_errors.sh): their defaults are what a run's
// config.json holds, so every command that reads the run reads them back. Its check throws a string, not a
// std::exception, on a negative width; a second kind registers from a static EncodingRegistrar (inside
// dlopen), which poslab takes as this file's own.
#include "model/positional/plugin.h"

#include <memory>

namespace {
using poslab::PositionalOptions;

// A bias kind that does nothing: its options are what the tests exercise.
class ListBiasImpl : public poslab::PositionalEncodingImpl {
 public:
  explicit ListBiasImpl(std::string kind) : PositionalEncodingImpl(std::move(kind)) {}
  std::string family() const override { return "bias"; }
};

poslab::EncodingSpec spec(const std::string& kind) {
  poslab::EncodingSpec s;
  s.kind = kind;
  s.family = "bias";
  s.make = [kind](const PositionalOptions&) { return std::make_shared<ListBiasImpl>(kind); };
  return s;
}

const poslab::EncodingRegistrar kStatic{spec("static_list_bias")};
}  // namespace

POSLAB_PLUGIN(registrar) {
  auto s = spec("list_bias");
  s.options = {{"list_names", {"a", "b"}},
               {"list_widths", {1.5, 2.5}},
               {"list_shape", {{"width", 1.0}, {"inner", {{"n", 2}}}}},
               {"list_tags", nlohmann::json::array()}};
  s.check = [](const PositionalOptions& o) {
    for (const auto& w : o.encoding.options.at("list_widths"))
      if (w.get<double>() < 0) throw "bad width";  // not a std::exception
  };
  registrar.add(std::move(s));
}
