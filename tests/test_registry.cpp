// The kind registry: every documented built-in is registered with its family, names are unique, and an
// in-tree kind with options of its own is validated like a built-in; SHA-256 (the plug-in hash) on the
// standard's test vectors.
#include <gtest/gtest.h>

#include <algorithm>

#include "config/config.h"
#include "model/positional/positional.h"
#include "model/positional/registry.h"
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
  builtins.erase(std::remove(builtins.begin(), builtins.end(), "test_width_bias"), builtins.end());  // below
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
  refused({{"kind", "alibi"}, {"test_hight", 1}}, "unknown key 'model.pos_encoding.test_hight'");
  // The option round-trips through a run's config.json.
  Config back = config_from_json(config_to_json(c));
  EXPECT_EQ(back.model.pos_encoding.options.at("test_width").get<double>(), 3.0);
}

TEST(Sha256, FipsTestVectors) {
  // FIPS 180-4 examples (NIST's SHA256.pdf): "abc", the two-block message, and the empty string.
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
