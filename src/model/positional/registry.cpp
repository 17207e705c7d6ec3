// The kind-name registry: a map filled by the built-ins' static registrars and by plug-ins.
#include "model/positional/registry.h"

#include <cxxabi.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <typeinfo>

namespace poslab {

// Function-local statics: built while other files' static registrars run, whatever their order.
static std::map<std::string, EncodingSpec>& registry() {
  static std::map<std::string, EncodingSpec> specs;
  return specs;
}
static std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

// Set by load_plugin around dlopen: a plug-in's static EncodingRegistrar runs inside dlopen, where a
// throw cannot reach poslab (the process would abort) and the kind would not be known as the plug-in's.
static thread_local std::vector<EncodingSpec>* collecting = nullptr;

std::vector<EncodingSpec>* collect_registrations(std::vector<EncodingSpec>* into) {
  std::swap(collecting, into);
  return into;
}

void register_encoding(EncodingSpec spec) {
  if (collecting != nullptr) {  // load_plugin checks it with the plug-in's other kinds
    collecting->push_back(std::move(spec));
    return;
  }
  if (const std::string problem = registration_problem(spec); !problem.empty()) throw ConfigError(problem);
  if (spec.options.is_null()) spec.options = nlohmann::json::object();  // `{}` in an aggregate registration is null
  if (!spec.options.is_object())
    throw ConfigError("encoding kind '" + spec.kind + "': its options must be a JSON object of option -> default");
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& specs = registry();
  if (auto it = specs.find(spec.kind); it != specs.end())
    throw ConfigError("encoding kind '" + spec.kind + "' is registered twice (" +
                      (it->second.plugin.empty() ? "a built-in" : "by " + it->second.plugin) + ", then " +
                      (spec.plugin.empty() ? "a built-in" : "by " + spec.plugin) + ")");
  const std::string kind = spec.kind;
  specs.emplace(kind, std::move(spec));
}

std::string registration_problem(const EncodingSpec& spec) {
  const std::string& k = spec.kind;
  const bool named = !k.empty() && std::islower(static_cast<unsigned char>(k[0])) &&
                     std::all_of(k.begin(), k.end(), [](char c) { return std::islower(static_cast<unsigned char>(c)) ||
                                                                         std::isdigit(static_cast<unsigned char>(c)) || c == '_'; });
  if (!named)
    return "encoding kind '" + k + "': a kind name is lowercase letters, digits and '_', starting with a letter";
  const std::vector<std::string> families = {"additive", "rotary", "bias", "context", "none"};
  if (std::find(families.begin(), families.end(), spec.family) == families.end())
    return "encoding kind '" + k + "': family '" + spec.family + "' is not one of additive, rotary, bias, context, none";
  if (!spec.make) return "encoding kind '" + k + "': its registration has no make function";
  return "";
}

const EncodingSpec* find_encoding(const std::string& kind) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(kind);
  return it == registry().end() ? nullptr : &it->second;  // std::map nodes never move
}

static std::vector<std::string> kinds_where(const std::function<bool(const EncodingSpec&)>& keep) {
  std::vector<const EncodingSpec*> specs;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (const auto& [kind, spec] : registry())
      if (keep(spec)) specs.push_back(&spec);
  }
  std::stable_sort(specs.begin(), specs.end(), [](const EncodingSpec* a, const EncodingSpec* b) { return a->listing < b->listing; });
  std::vector<std::string> out;
  for (const auto* s : specs) out.push_back(s->kind);
  return out;
}

std::vector<std::string> encoding_kinds() {
  return kinds_where([](const EncodingSpec&) { return true; });
}

std::vector<std::string> encoding_kinds_of(const std::string& family) {
  return kinds_where([&](const EncodingSpec& s) { return s.family == family; });
}

nlohmann::json declared_encoding_options(const std::string& plugin) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [kind, spec] : registry())
    if (spec.plugin.empty() || spec.plugin == plugin) out.update(spec.options);
  return out;
}

std::string join_kinds(const std::vector<std::string>& kinds, const std::string& separator) {
  std::string out;
  for (const auto& k : kinds) out += (out.empty() ? "" : separator) + k;
  return out;
}

std::string current_exception_text() {
  std::string text;
  try {
    throw;
  } catch (const std::exception& e) {
    text = e.what();
  } catch (const char* s) {
    text = s ? s : "a null string";
  } catch (const std::string& s) {
    text = s;
  } catch (...) {
    const std::type_info* type = abi::__cxa_current_exception_type();
    std::string name = type ? type->name() : "something";
    int status = 0;
    if (char* readable = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status)) {
      if (status == 0) name = readable;
      std::free(readable);
    }
    text = "it threw " + name + ", not a std::exception";
  }
  for (char& c : text)  // one line
    if (c == '\n' || c == '\r') c = ' ';
  return text.substr(0, 300);
}

void require_option(bool ok, const std::string& key, const std::string& expected, const nlohmann::json& got) {
  if (!ok) throw ConfigError(key + " must be " + expected + ", got " + got.dump());
}

}  // namespace poslab
