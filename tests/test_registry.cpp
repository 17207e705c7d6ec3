// The kind registry: every documented built-in is registered with its family, names are unique, and an
// in-tree kind with options of its own is validated like a built-in (lists element by element, objects key
// by key); plug-ins loaded in this process: refusals register nothing and name the file, whatever the
// plug-in threw, and a plug-in's options are read whatever the order its keys come in; SHA-256 (the
// plug-in hash) on the standard's test vectors.
#include <gtest/gtest.h>

#include <algorithm>

#include "config/config.h"
#include "experiment/experiment.h"
#include "model/positional/positional.h"
#include "model/positional/registry.h"
#include "test_util.h"
#include "util/sha256.h"

using namespace poslab;

TEST(Registry, EveryDocumentedKindIsRegisteredWithItsFamily) {
  // docs/encodings.md's kinds, in the order poslab has always listed them (help, error messages), with the
  // family of the hook each one uses.
  const std::vector<std::pair<std::string, std::string>> documented = {
      {"none", "none"},         {"index", "additive"},    {"binary", "additive"},     {"sinusoidal", "additive"},
      {"learned", "additive"},  {"rope", "rotary"},       {"alibi", "bias"},          {"xpos", "rotary"},
      {"t5", "bias"},           {"kerple_log", "bias"},   {"kerple_power", "bias"},   {"sandwich", "bias"},
      {"fire", "bias"},         {"cope", "context"}};
  std::vector<std::string> names;
  for (const auto& [kind, family] : documented) {
    names.push_back(kind);
    const EncodingSpec* spec = find_encoding(kind);
    ASSERT_NE(spec, nullptr) << kind;
    EXPECT_EQ(spec->family, family) << kind;
    EXPECT_TRUE(spec->plugin.empty()) << kind;
    PosEncodingConfig e;
    e.kind = kind;
    auto pe = make_positional({e, /*n_embd=*/16, /*n_head=*/2, /*block_size=*/32});
    EXPECT_EQ(pe->kind(), kind);
    EXPECT_EQ(pe->family(), family) << "the spec's family is what the instance says";
  }
  auto builtins = encoding_kinds();
  // Kinds the tests below register: in-tree ones of their own, and a plug-in's.
  builtins.erase(std::remove_if(builtins.begin(), builtins.end(),
                                [](const std::string& k) {
                                  return k == "test_width_bias" || k == "test_list_bias" || !find_encoding(k)->plugin.empty();
                                }),
                 builtins.end());
  EXPECT_EQ(builtins, names) << "listed in that order, and nothing else registered";
  EXPECT_EQ(encoding_kinds_of("rotary"), (std::vector<std::string>{"rope", "xpos"}));
  EXPECT_EQ(find_encoding("zigzag"), nullptr);
}

TEST(Registry, ANameIsTakenOnce) {
  EncodingSpec spec;
  spec.kind = "alibi";
  spec.family = "bias";
  spec.make = [](const PositionalOptions&) -> std::shared_ptr<PositionalEncodingImpl> { return nullptr; };
  try {
    register_encoding(spec);
    FAIL() << "registering alibi again must throw";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("encoding kind 'alibi' is registered twice"), std::string::npos) << e.what();
  }
  spec.kind = "";
  EXPECT_THROW(register_encoding(spec), ConfigError) << "a spec needs a name";
  // A name becomes part of cell and file names; a family decides how the model calls the kind.
  for (const std::string bad : {"kind c", "Rope2", "2d", "a/b", "a-b", "_x"}) {
    spec.kind = bad;
    EXPECT_NE(registration_problem(spec).find("'" + bad + "': a kind name is lowercase letters, digits and '_'"), std::string::npos)
        << registration_problem(spec);
    EXPECT_THROW(register_encoding(spec), ConfigError) << bad;
    EXPECT_EQ(find_encoding(bad), nullptr) << bad;
  }
  spec.kind = "fine_name2";
  spec.family = "weird";
  EXPECT_NE(registration_problem(spec).find("family 'weird' is not one of additive, rotary, bias, context, none"), std::string::npos);
  EXPECT_THROW(register_encoding(spec), ConfigError);
  EXPECT_EQ(find_encoding("fine_name2"), nullptr);
  // Every built-in passes the same checks.
  for (const auto& kind : encoding_kinds()) EXPECT_EQ(registration_problem(*find_encoding(kind)), "") << kind;
}

// A kind with an option of its own, registered as an in-tree file would: config validation reads and
// checks the option through the spec, with no code that knows the kind.
class WidthBiasImpl : public PositionalEncodingImpl {
 public:
  explicit WidthBiasImpl(double width) : PositionalEncodingImpl("test_width_bias"), width(width) {}
  std::string family() const override { return "bias"; }
  double width;
};
// Registered when the test first runs, not at load: the suites that run over every registered kind
// (instantiated before any test runs) keep to the real ones.
static void register_width_bias() {
  static const EncodingRegistrar registrar{{"test_width_bias", "bias",
                                            [](const PositionalOptions& o) {
                                              return std::make_shared<WidthBiasImpl>(o.encoding.options.at("test_width").get<double>());
                                            },
                                            [](const PositionalOptions& o) {
                                              const double w = o.encoding.options.at("test_width").get<double>();
                                              require_option(w > 0, "model.pos_encoding.test_width", "positive", w);
                                            },
                                            {}, {{"test_width", 8.0}}, /*listing=*/5000}};
}

TEST(Registry, AnInTreeKindsOptionsAreReadAndChecked) {
  register_width_bias();
  using nlohmann::json;
  Config c = config_from_json(json{{"model", {{"pos_encoding", {{"kind", "test_width_bias"}, {"test_width", 3}}}}}});
  EXPECT_EQ(c.model.pos_encoding.options.at("test_width").get<double>(), 3.0);
  auto pe = make_positional({c.model.pos_encoding, c.model.n_embd, c.model.n_head, c.model.block_size});
  EXPECT_EQ(std::dynamic_pointer_cast<WidthBiasImpl>(pe)->width, 3.0);
  EXPECT_EQ(config_from_json(json{{"model", {{"pos_encoding", {{"kind", "test_width_bias"}}}}}})
                .model.pos_encoding.options.at("test_width").get<double>(),
            8.0)
      << "the declared default";
  auto refused = [&](const json& pe, const std::string& fragment) {
    try {
      config_from_json(json{{"model", {{"pos_encoding", pe}}}});
      ADD_FAILURE() << pe.dump() << " must be refused";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  refused({{"kind", "test_width_bias"}, {"test_width", -1}}, "model.pos_encoding.test_width must be positive, got -1");
  refused({{"kind", "test_width_bias"}, {"test_width", "wide"}}, "model.pos_encoding.test_width must be a number, got \"wide\"");
  refused({{"kind", "alibi"}, {"test_hight", 1}}, "model.pos_encoding.test_hight: unknown key (allowed here: base, ");
  // The option round-trips through a run's config.json.
  Config back = config_from_json(config_to_json(c));
  EXPECT_EQ(back.model.pos_encoding.options.at("test_width").get<double>(), 3.0);
  // It is the kind's own: a --set of it for another kind is refused, naming the kind; a file may hold it.
  poslab::testing::TempDir dir;
  const std::string alibi = dir.file("a.json", R"({"model": {"pos_encoding": {"kind": "alibi"}}})");
  try {
    load_config(alibi, {"model.pos_encoding.test_width=3"});
    ADD_FAILURE() << "a --set of test_width for alibi must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--set model.pos_encoding.test_width: model.pos_encoding.test_width is read by "
                                         "model.pos_encoding.kind test_width_bias, but model.pos_encoding.kind is alibi"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(load_config(alibi, {"model.pos_encoding.test_width=3", "model.pos_encoding.kind=test_width_bias"})
                .model.pos_encoding.options.at("test_width").get<double>(),
            3.0);
  EXPECT_NO_THROW(load_config(dir.file("b.json", R"({"model": {"pos_encoding": {"kind": "alibi", "test_width": 3}}})")));
}

// Options whose defaults are lists of anything and objects: a value must have the default's type element by
// element and key by key, and a run's config.json, which holds the defaults, reads back.
static nlohmann::json J(const char* text) { return nlohmann::json::parse(text); }

static void register_list_bias() {
  static const EncodingRegistrar registrar{{"test_list_bias", "bias",
                                            [](const PositionalOptions&) { return std::make_shared<WidthBiasImpl>(1.0); },
                                            {},
                                            {},
                                            J(R"({"test_names": ["a", "b"], "test_widths": [1.5, 2.5], "test_mixed": [1, "one"],
                                                  "test_grid": [[1, 2]], "test_shape": {"width": 1.0, "inner": {"n": 2}},
                                                  "test_tags": [], "test_free": {}})"),
                                            /*listing=*/5001}};
}

TEST(Registry, ListAndObjectOptionsHaveTheirDefaultsTypes) {
  register_list_bias();
  using nlohmann::json;
  auto options = [](json pe) {
    pe["kind"] = "test_list_bias";
    return config_from_json(json{{"model", {{"pos_encoding", pe}}}}).model.pos_encoding.options;
  };
  const json defaults = options(json::object());
  EXPECT_EQ(defaults.at("test_names"), J(R"(["a", "b"])"));
  // Its own defaults, as a run's config.json holds them, read back (every command that reads a run does).
  Config c = config_from_json(json{{"model", {{"pos_encoding", {{"kind", "test_list_bias"}}}}}});
  EXPECT_EQ(config_from_json(config_to_json(c)).model.pos_encoding.options, defaults);
  EXPECT_EQ(options(J(R"({"test_names": ["x"]})")).at("test_names"), J(R"(["x"])"));
  EXPECT_EQ(options(J(R"({"test_names": []})")).at("test_names"), json::array()) << "an empty list has no element to refuse";
  const json widths = options(J(R"({"test_widths": [1, 2]})")).at("test_widths");
  EXPECT_TRUE(widths[0].is_number_float()) << "integers stand for floats, and stay floats";
  EXPECT_EQ(options(J(R"({"test_mixed": ["two", 3, "four"]})")).at("test_mixed"), J(R"(["two", 3, "four"])"))
      << "each element fits one of the default's";
  EXPECT_EQ(options(J(R"({"test_grid": [[3], [4, 5, 6]]})")).at("test_grid"), J("[[3], [4, 5, 6]]"));
  EXPECT_EQ(options(J(R"({"test_shape": {"width": 3}})")).at("test_shape"), J(R"({"width": 3.0, "inner": {"n": 2}})"))
      << "a key not given keeps its default";
  EXPECT_EQ(options(J(R"({"test_tags": [1, "a", {"b": 2}]})")).at("test_tags"), J(R"([1, "a", {"b": 2}])"))
      << "an empty default list takes any list";
  EXPECT_EQ(options(J(R"({"test_free": {"any": [1]}})")).at("test_free"), J(R"({"any": [1]})"))
      << "an empty default object takes any object";

  auto refused = [&](const char* given, const std::string& message) {
    try {
      options(J(given));
      ADD_FAILURE() << given << " must be refused";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("model.pos_encoding." + message), std::string::npos) << e.what();
    }
  };
  refused(R"({"test_names": "a"})", R"(test_names must be a list of strings, got "a")");
  refused(R"({"test_names": ["a", 1]})", "test_names[1] must be a string, got 1");
  refused(R"({"test_widths": [1, "w"]})", R"(test_widths[1] must be a number, got "w")");
  refused(R"({"test_mixed": [true]})", "test_mixed[0] must be an integer (32-bit) or a string, got true");
  refused(R"({"test_mixed": [1.5]})", "test_mixed[0] must be an integer (32-bit) or a string, got 1.5");
  refused(R"({"test_grid": [[1, "x"]]})", R"(test_grid[0][1] must be an integer (32-bit), got "x")");
  refused(R"({"test_grid": [1]})", "test_grid[0] must be a list, got 1");
  refused(R"({"test_shape": {"inner": {"n": "x"}}})", R"(test_shape.inner.n must be an integer (32-bit), got "x")");
  refused(R"({"test_shape": {"depth": 1}})", "test_shape.depth: unknown key (allowed here: inner, width)");
  refused(R"({"test_shape": [1]})", "test_shape must be an object, got [1]");
  refused(R"({"test_tags": "x"})", R"(test_tags must be a list, got "x")");
  refused(R"({"test_free": [1]})", "test_free must be an object, got [1]");

  // Merged from layers: one key of an object option keeps the keys a file gave; a list is replaced.
  poslab::testing::TempDir dir;
  const auto path = dir.file("c.json", R"({"model": {"pos_encoding": {"kind": "test_list_bias", "test_names": ["p", "q"],
                                           "test_shape": {"width": 7, "inner": {"n": 5}}}}})");
  const std::string at = "model.pos_encoding.";
  Config merged = load_config(path, {at + "test_shape.inner.n=6", at + R"(test_names=["r"])"});
  EXPECT_EQ(merged.model.pos_encoding.options.at("test_shape"), J(R"({"width": 7.0, "inner": {"n": 6}})"));
  EXPECT_EQ(merged.model.pos_encoding.options.at("test_names"), J(R"(["r"])"));
}

// Plug-ins built beside the tests (tests/CMakeLists.txt), loaded in this process.
static std::string test_plugin(const std::string& name) { return std::string(POSLAB_TEST_PLUGINS_DIR) + "/lib" + name + ".so"; }

static std::string refusal(const std::string& plugin) {
  try {
    load_plugin(test_plugin(plugin), "--plugin");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(Plugin, KindsRegisteredAsItLoadsAreItsOwnAndRolledBackWhenRefused) {
  // A static EncodingRegistrar runs inside dlopen: a taken name is an error naming the file, not an abort
  // inside dlopen that calls the plug-in a built-in.
  const std::string builtin = refusal("bad_static_builtin");
  EXPECT_EQ(builtin.rfind("--plugin " + test_plugin("bad_static_builtin") + ": not a poslab plug-in", 0), 0) << builtin;
  EXPECT_NE(builtin.find("it registered 'alibi' as it loaded, and nothing is kept"), std::string::npos) << builtin;
  ASSERT_NE(find_encoding("alibi"), nullptr);
  EXPECT_TRUE(find_encoding("alibi")->plugin.empty()) << "the built-in stays";
  // A free name from a file that is refused is not registered.
  const std::string free = refusal("bad_static_free");
  EXPECT_NE(free.find(test_plugin("bad_static_free") + ": not a poslab plug-in"), std::string::npos) << free;
  EXPECT_NE(free.find("'static_free_bias'"), std::string::npos) << free;
  EXPECT_EQ(find_encoding("static_free_bias"), nullptr) << "a refused file leaves no kind registered";
  EXPECT_EQ(refusal("bad_static_free"), free) << "refused the same way again (dlopen runs no initializer twice)";
  EXPECT_EQ(find_encoding("static_free_bias"), nullptr);
}

TEST(Plugin, WhatItThrowsIsOneErrorNamingTheFile) {
  // `throw 42;` in POSLAB_PLUGIN: not a std::exception, and what it added before is not registered.
  const std::string thrown = refusal("bad_throws_int");
  EXPECT_EQ(thrown, "--plugin " + test_plugin("bad_throws_int") + ": its registration failed: it threw int, not a std::exception");
  EXPECT_EQ(find_encoding("int_bias"), nullptr);
  // `throw "bad width";` in a check: the kind, the file and the text.
  using nlohmann::json;
  try {
    config_from_json(json{{"model", {{"pos_encoding", {{"kind", "list_bias"}, {"plugin", test_plugin("list_options")}, {"list_widths", J("[1, -1]")}}}}}});
    ADD_FAILURE() << "a negative width must be refused";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "model.pos_encoding.kind list_bias (plug-in " + test_plugin("list_options") +
                                         "): its check failed: bad width");
  }
  // The plug-in's kind registered from a static EncodingRegistrar is its own.
  ASSERT_NE(find_encoding("static_list_bias"), nullptr);
  EXPECT_EQ(find_encoding("static_list_bias")->plugin, test_plugin("list_options"));
}

TEST(Plugin, ItsOptionsAreReadWhateverTheOrderOfTheKeys) {
  const std::string at = "model.pos_encoding.";
  poslab::testing::TempDir dir;
  const auto path = dir.file("c.json", R"({"model": {"block_size": 16}, "data": {"max_len": 4}})");
  const std::string so = test_plugin("gaussian_bias");
  // The option before the plug-in that declares it, in --set order.
  Config c = load_config(path, {at + "gauss_sigma=2.0", at + "plugin=" + so, at + "kind=gaussian_bias"});
  EXPECT_EQ(c.model.pos_encoding.options.at("gauss_sigma").get<double>(), 2.0);
  // In a config file, with the plug-in named by an override.
  const auto with_option = dir.file("o.json", R"({"model": {"block_size": 16, "pos_encoding": {"gauss_sigma": 3.0}}})");
  EXPECT_EQ(load_config(with_option, {at + "plugin=" + so, at + "kind=gaussian_bias"}).model.pos_encoding.options.at("gauss_sigma"), 3.0);
  // In an experiment's set, whose keys apply in sorted order (gauss_sigma before plugin).
  const auto exp = dir.file("e.json", R"({"base": "c.json", "set": {"model.pos_encoding.plugin": ")" + so +
                                          R"(", "model.pos_encoding.gauss_sigma": 2.5}, "grid": {"model.pos_encoding.kind": ["gaussian_bias"]}})");
  const Experiment e = load_experiment(exp);
  ASSERT_EQ(e.cells.size(), 1u);
  EXPECT_EQ(config_from_json(e.cells[0].config).model.pos_encoding.options.at("gauss_sigma"), 2.5);
  // Without a plug-in, an option no kind declares is still refused, naming the key.
  try {
    load_config(path, {at + "gauss_sigma=2.0"});
    ADD_FAILURE() << "gauss_sigma without its plug-in must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(at + "gauss_sigma: unknown key (allowed here: base, "), std::string::npos) << e.what();
  }
}

// A built-in kind beside a plug-in (an experiment's set naming it for every cell): the plug-in's options are
// checked against it, but the run records neither it nor them, so a moved or rebuilt plug-in leaves the run
// readable; a config recorded before (its hash given) reads without the file.
TEST(Plugin, ABuiltInKindBesideAPluginNeitherRecordsNorNeedsIt) {
  using nlohmann::json;
  const std::string so = test_plugin("gaussian_bias");
  const json cell = {{"model", {{"block_size", 16}, {"pos_encoding", {{"kind", "alibi"}, {"plugin", so}, {"gauss_sigma", 4.0}}}}},
                     {"data", {{"max_len", 4}}}};
  const Config c = config_from_json(cell);
  EXPECT_EQ(c.model.pos_encoding.kind, "alibi");
  EXPECT_TRUE(c.model.pos_encoding.plugin.empty());
  EXPECT_TRUE(c.model.pos_encoding.plugin_sha256.empty());
  EXPECT_FALSE(c.model.pos_encoding.options.contains("gauss_sigma")) << c.model.pos_encoding.options.dump();
  const json saved = config_to_json(c);
  EXPECT_EQ(saved["model"]["pos_encoding"]["plugin"], "");
  EXPECT_FALSE(saved["model"]["pos_encoding"].contains("gauss_sigma")) << saved.dump();
  // A typo still fails where the plug-in is named, naming the key.
  json typo = cell;
  typo["model"]["pos_encoding"]["gauss_sigmaa"] = 1.0;
  try {
    config_from_json(typo);
    ADD_FAILURE() << "gauss_sigmaa was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gauss_sigmaa: unknown key (neither alibi nor plug-in " + so), std::string::npos) << e.what();
  }
  // What an earlier version recorded for such a run: the plug-in, its hash and its option, the file now gone.
  json recorded = cell;
  recorded["model"]["pos_encoding"]["plugin"] = "/nonexistent/libgaussian_bias.so";
  recorded["model"]["pos_encoding"]["plugin_sha256"] = std::string(64, 'a');
  const Config old = config_from_json(recorded);
  EXPECT_EQ(old.model.pos_encoding.kind, "alibi");
  EXPECT_TRUE(old.model.pos_encoding.plugin.empty());
  // The plug-in's own kind still records it and its hash.
  json own = cell;
  own["model"]["pos_encoding"]["kind"] = "gaussian_bias";
  const Config g = config_from_json(own);
  EXPECT_EQ(g.model.pos_encoding.plugin, so);
  EXPECT_EQ(g.model.pos_encoding.plugin_sha256.size(), 64u);
  EXPECT_EQ(g.model.pos_encoding.options.at("gauss_sigma"), 4.0);
}

TEST(Sha256, FipsTestVectors) {
  // FIPS 180-4 examples (NIST's SHA256.pdf): "abc", the two-block message, and the empty string.
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
