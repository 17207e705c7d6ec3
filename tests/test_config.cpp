// Config loading: defaults, extends, overrides, and one-line errors that name the key.
#include <gtest/gtest.h>

#include <cstdint>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "config/config.h"
#include "util/files.h"
#include "test_util.h"

using namespace poslab;
using poslab::testing::TempDir;

// Runs `f`, expects a ConfigError whose message contains every fragment.
template <typename F>
static void expect_error(F f, std::initializer_list<const char*> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    for (const char* fragment : fragments) EXPECT_NE(msg.find(fragment), std::string::npos) << "'" << fragment << "' in: " << msg;
  }
}

TEST(Config, DefaultsAreValid) {
  Config c = config_from_json(nlohmann::json::object());
  EXPECT_EQ(c.model.pos_encoding.kind, "learned");
  EXPECT_EQ(c.model.pos_encoding.base, 10000.0);
  EXPECT_EQ(c.device, "auto");
}

TEST(Config, FileOverridesDefaultsAndExtendsChains) {
  TempDir dir;
  dir.file("base.json", R"({"model": {"n_layer": 3, "pos_encoding": {"kind": "rope"}}, "train": {"max_iters": 7}})");
  auto path = dir.file("child.json", R"({"extends": "base.json", "train": {"max_iters": 9}})");
  Config c = load_config(path);
  EXPECT_EQ(c.model.n_layer, 3);
  EXPECT_EQ(c.model.pos_encoding.kind, "rope");
  EXPECT_EQ(c.train.max_iters, 9);
  EXPECT_EQ(c.model.n_embd, Config{}.model.n_embd);
}

TEST(Config, SetOverridesParseValues) {
  TempDir dir;
  auto path = dir.file("c.json", R"({})");
  Config c = load_config(path, {"model.pos_encoding.kind=alibi", "train.learning_rate=0.003", "model.bias=true",
                                "eval.lengths=[8,16]", "model.dropout=0"});
  EXPECT_EQ(c.model.pos_encoding.kind, "alibi");
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 0.003);
  EXPECT_TRUE(c.model.bias);
  EXPECT_EQ(c.eval.lengths, (std::vector<int>{8, 16}));
  // An integer written into a float key keeps it a float key for later overrides.
  Config d = load_config(path, {"model.dropout=0", "model.dropout=0.1"});
  EXPECT_DOUBLE_EQ(d.model.dropout, 0.1);
}

// Paths to files are made absolute where they are written: in a file relative to it, in --set relative to the
// working directory; either way the saved config names the same files from any directory.
TEST(Config, FilePathsAreAbsoluteFromTheFileOrTheWorkingDirectory) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "cfg");
  auto path = dir.file("cfg/c.json", R"({"data": {"kind": "tokens", "dir": "../tok", "tokenizer": {"model": "sp/m.model"}}})");
  auto j = load_config_json(path);
  EXPECT_EQ(j["data"]["dir"], (dir.path / "tok").lexically_normal().string());
  EXPECT_EQ(j["data"]["tokenizer"]["model"], (dir.path / "cfg" / "sp" / "m.model").string());
  const auto cwd = std::filesystem::current_path();
  apply_overrides(j, {"data.dir=other", "data.train_path=a/train.bin", "data.val_path=/abs/val.bin", "data.path=t.txt",
                      "data.tokenizer={\"model\": \"x.model\"}"});
  EXPECT_EQ(j["data"]["dir"], (cwd / "other").string());
  EXPECT_EQ(j["data"]["train_path"], (cwd / "a" / "train.bin").string());
  EXPECT_EQ(j["data"]["val_path"], "/abs/val.bin");
  EXPECT_EQ(j["data"]["path"], (cwd / "t.txt").string());
  EXPECT_EQ(j["data"]["tokenizer"]["model"], (cwd / "x.model").string());  // inside an object value too
  apply_overrides(j, {"data.dir="});  // empty stays empty: no file named
  EXPECT_EQ(j["data"]["dir"], "");
}

TEST(Config, RoundTripsThroughJson) {
  TempDir dir;
  Config c = load_config(dir.file("c.json", R"({"seed": 5, "model": {"pos_encoding": {"kind": "binary", "bits": 6}}})"));
  Config back = config_from_json(config_to_json(c));
  EXPECT_EQ(config_to_json(back), config_to_json(c));
}

TEST(ConfigErrors, UnknownKeyNamesPathAndAllowed) {
  TempDir dir;
  auto path = dir.file("c.json", R"({"model": {"n_layers": 2}})");
  expect_error([&] { load_config(path); }, {"unknown key 'model.n_layers'", "n_layer", "c.json"});
}

// A key written twice in one object: JSON keeps the last, dropping the first without a word; refused, naming it.
TEST(ConfigErrors, AKeyWrittenTwiceInOneObjectIsNamed) {
  TempDir dir;
  expect_error([&] { load_config(dir.file("a.json", R"({"model": {"n_layer": 1, "n_layer": 3}})")); },
               {"a.json: key model.n_layer appears twice in one object"});
  expect_error([&] { load_config(dir.file("b.json", R"({"model": {"n_layer": 3}, "train": {}, "model": {"n_head": 4}})")); },
               {"b.json: key model appears twice in one object"});
  expect_error([&] { parse_json_text(R"({"grid": [{"a": 1}, {"b": 2, "b": 3}]})", "e.json"); },
               {"e.json: key grid[].b appears twice in one object"});
  // The same key in two objects (siblings, or an object and its child) is not a duplicate.
  EXPECT_NO_THROW(parse_json_text(R"({"model": {"n_layer": 1, "pos_encoding": {"n_layer": 2}}, "train": {"n_layer": 1},
                                     "x": [{"k": 1}, {"k": 2}]})", "ok.json"));
}

// Data files named without data.kind would train on the default synthetic task: refused, naming the file
// or --set that gave the key and the kind to set; a kind given (task included) or inherited is a choice.
TEST(ConfigErrors, DataFilesWithoutAKindAreRefused) {
  TempDir dir;
  auto tokens = dir.file("t.json", R"({"data": {"dir": "corpus"}})");
  expect_error([&] { load_config(tokens); }, {"t.json: data.dir names data", "data.kind is not set", "set data.kind to tokens"});
  auto small = dir.file("s.json", R"({"data": {"dir": "corpus"}, "model": {"block_size": 8}})");
  expect_error([&] { load_config(small); }, {"data.kind is not set"});  // not the copy task's own data.max_len check
  auto text = dir.file("x.json", R"({"data": {"path": "corpus.txt"}})");
  expect_error([&] { load_config(text); }, {"x.json: data.path names data", "set data.kind to text"});
  auto plain = dir.file("p.json", R"({"seed": 3})");
  expect_error([&] { load_config(plain, {"data.train_path=a.bin", "data.val_path=b.bin"}); },
               {"--set data.train_path: data.train_path names data", "set data.kind to tokens"});
  EXPECT_EQ(load_config(plain).data.kind, "task");  // no data named: the default task, as before
  auto chosen = dir.file("c.json", R"({"data": {"kind": "task", "dir": "corpus"}})");
  EXPECT_EQ(load_config(chosen).data.kind, "task");  // a grid's base may name files a task cell ignores
  auto parent = dir.file("parent.json", R"({"data": {"kind": "tokens", "dir": "corpus"}})");
  auto child = dir.file("child.json", R"({"extends": "parent.json", "data": {"dir": "other"}})");
  EXPECT_EQ(load_config(child).data.kind, "tokens");
  EXPECT_EQ(load_config(plain, {"data.kind=text", "data.path=x.txt"}).data.kind, "text");
  // Named on the command line for a kind that reads another: it would train on the config's own data.
  auto textcfg = dir.file("text.json", R"({"data": {"kind": "text", "path": "corpus.txt"}})");
  expect_error([&] { load_config(textcfg, {"data.dir=corpus"}); },
               {"--set data.dir: data.dir is read by data.kind tokens, but data.kind is text", "add --set data.kind=tokens"});
  expect_error([&] { load_config(chosen, {"data.path=x.txt"}); }, {"--set data.path: data.path is read by data.kind text"});
  // The file's own data.path beside a kind switched on the command line is the grid's case: allowed.
  EXPECT_EQ(load_config(textcfg, {"data.kind=task"}).data.kind, "task");
  // Not only the file keys: every data key one kind reads, given on the command line to another.
  expect_error([&] { load_config(textcfg, {"data.max_len=40"}); },
               {"--set data.max_len: data.max_len is read by data.kind task, but data.kind is text", "add --set data.kind=task"});
  expect_error([&] { load_config(textcfg, {"data.vocab_size=50304"}); }, {"--set data.vocab_size", "data.kind tokens"});
  expect_error([&] { load_config(textcfg, {"data.mqar.gaps=uniform"}); }, {"--set data.mqar.gaps", "data.kind task"});
  expect_error([&] { load_config(textcfg, {R"(data.mqar={"space": 2})"}); }, {"--set data.mqar", "data.kind task"});
  auto tokcfg = dir.file("tok.json", R"({"data": {"kind": "tokens", "dir": "corpus"}})");
  expect_error([&] { load_config(tokcfg, {"data.val_fraction=0.2"}); },
               {"--set data.val_fraction: data.val_fraction is read by data.kind text, but data.kind is tokens"});
  EXPECT_EQ(load_config(textcfg, {"data.val_fraction=0.2"}).data.val_fraction, 0.2);  // its own kind: read
  EXPECT_EQ(load_config(tokcfg, {"data.format=llmc", "data.dtype=uint16"}).data.format, "llmc");
  EXPECT_EQ(load_config(textcfg, {"data.dir="}).data.kind, "text");  // an empty file key clears it
  EXPECT_EQ(load_config(textcfg, {"data.kind=task", "data.max_len=12"}).data.max_len, 12);
}

// An encoding option given on the command line for a kind that does not read it is refused, naming the
// kinds that do; in a file it is left alone (a grid's base serves cells of several kinds).
TEST(ConfigErrors, SetOfAnEncodingOptionItsKindDoesNotReadIsRefused) {
  TempDir dir;
  auto alibi = dir.file("a.json", R"({"model": {"pos_encoding": {"kind": "alibi"}}})");
  expect_error([&] { load_config(alibi, {"model.pos_encoding.rotary_fraction=0.5"}); },
               {"--set model.pos_encoding.rotary_fraction: model.pos_encoding.rotary_fraction is read by "
                "model.pos_encoding.kind rope, but model.pos_encoding.kind is alibi: add --set model.pos_encoding.kind=rope"});
  expect_error([&] { load_config(alibi, {"model.pos_encoding.base=500"}); },
               {"--set model.pos_encoding.base", "read by the kinds sinusoidal, rope, xpos, sandwich", "kind is alibi"});
  expect_error([&] { load_config(alibi, {R"(model.pos_encoding={"kind": "alibi", "num_buckets": 8})"}); },
               {"--set model.pos_encoding: model.pos_encoding.num_buckets is read by model.pos_encoding.kind t5"});
  expect_error([&] { load_config(alibi, {"model.pos_encoding.scale=2"}); },
               {"model.pos_encoding.scale is read by the kinds index, binary, sinusoidal"});
  // Read by the kind the config ends with: taken, whichever --set named the kind.
  EXPECT_EQ(load_config(alibi, {"model.pos_encoding.kind=rope", "model.pos_encoding.rotary_fraction=0.5"})
                .model.pos_encoding.rotary_fraction, 0.5);
  EXPECT_EQ(load_config(alibi, {"model.pos_encoding.npos=8", "model.pos_encoding.kind=cope"}).model.pos_encoding.npos, 8);
  // From a file, for another kind: kept, unread.
  auto file = dir.file("f.json", R"({"model": {"pos_encoding": {"kind": "rope", "num_buckets": 8}}})");
  EXPECT_EQ(load_config(file).model.pos_encoding.num_buckets, 8);
  expect_error([&] { load_config(file, {"model.pos_encoding.kind=alibi", "model.pos_encoding.max_distance=40"}); },
               {"--set model.pos_encoding.max_distance", "kind t5"});
}

// A --set whose value is a number past a double's range, or whose key path has an empty part, says so
// (they were "must be a number, got \"1e999\"" and "unknown key 'model.'").
TEST(ConfigErrors, SetValuesPastRangeAndEmptyKeyParts) {
  TempDir dir;
  auto path = dir.file("c.json", R"({"seed": 3})");
  expect_error([&] { load_config(path, {"train.learning_rate=1e999"}); },
               {"--set train.learning_rate: 1e999 is past the range of a number"});
  expect_error([&] { load_config(path, {"train.learning_rate=-1e999"}); }, {"past the range of a number"});
  for (const std::string bad : {"model..n_layer=2", ".seed=2", "model.=2"})
    expect_error([&] { load_config(path, {bad}); }, {(std::string("--set ") + bad + ": the key path").c_str(), "has an empty part"});
  EXPECT_EQ(load_config(path, {"train.learning_rate=1e300"}).train.learning_rate, 1e300);  // in range: read
}

TEST(ConfigErrors, WrongType) {
  TempDir dir;
  auto path = dir.file("c.json", R"({"model": {"n_layer": "two"}})");
  expect_error([&] { load_config(path); }, {"model.n_layer must be an integer", "\"two\""});
  auto frac = dir.file("d.json", R"({"train": {"batch_size": 1.5}})");
  expect_error([&] { load_config(frac); }, {"train.batch_size must be an integer"});
}

TEST(ConfigErrors, ImpossibleValues) {
  TempDir dir;
  auto path = dir.file("c.json", "{}");
  expect_error([&] { load_config(path, {"model.n_embd=66", "model.n_head=4"}); }, {"model.n_embd", "divisible by model.n_head"});
  expect_error([&] { load_config(path, {"model.pos_encoding.kind=rope", "model.n_embd=20", "model.n_head=4"}); },
               {"model.n_embd", "even", "rope"});
  // Part of an odd head rotates (GPT-NeoX's rotary_pct): accepted.
  EXPECT_NO_THROW(load_config(path, {"model.pos_encoding.kind=rope", "model.pos_encoding.rotary_fraction=0.5",
                                     "model.n_embd=20", "model.n_head=4"}));
  expect_error([&] { load_config(path, {"model.n_layer=0"}); }, {"model.n_layer must be positive"});
  expect_error([&] { load_config(path, {"train.batch_size=-3"}); }, {"train.batch_size must be positive"});
  expect_error([&] { load_config(path, {"model.dropout=1.5"}); }, {"model.dropout"});
  expect_error([&] { load_config(path, {"model.pos_encoding.kind=nope"}); },
               {"model.pos_encoding.kind", "unknown encoding 'nope'", "rope", "alibi", "cope"});
  expect_error([&] { load_config(path, {"data.task=juggle"}); }, {"data.task", "unknown task 'juggle'", "copy"});
  expect_error([&] { load_config(path, {"eval.lengths=[8,0]"}); }, {"eval.lengths"});
  expect_error([&] { load_config(path, {"eval.lengths=[8,16,8]"}); }, {"eval.lengths", "8 is listed twice"});
  expect_error([&] { load_config(path, {"data.kind=text"}); }, {"data.path"});
  // A short context no evaluated length exceeds is refused before training (lengths given, and the
  // default 8x block_size); on a task, where key tokens are off, it is not looked at.
  const std::string text = "data.path=" + dir.file("t.txt", "some text");
  expect_error([&] { load_config(path, {"data.kind=text", text, "eval.lengths=[64,128]", "eval.key_short=128"}); },
               {"eval.key_short", "longest length evaluated (128)"});
  expect_error([&] { load_config(path, {"data.kind=text", text, "model.block_size=32", "eval.key_short=256"}); },
               {"eval.key_short", "(256)"});
  EXPECT_EQ(load_config(path, {"data.kind=text", text, "model.pos_encoding.kind=rope", "eval.lengths=[64,128]",
                                "eval.key_short=127"}).eval.key_short, 127);
  // A margin of 0 counts rounding noise as key tokens (targets scored alike both ways): above 0 only.
  expect_error([&] { load_config(path, {"data.kind=text", text, "eval.key_margin=0"}); }, {"eval.key_margin", "> 0 nats"});
  EXPECT_DOUBLE_EQ(load_config(path, {"data.kind=text", text, "eval.key_margin=0.001"}).eval.key_margin, 0.001);
  // A learned table (the default kind) has no rows past its block for the short-context pass's windows.
  expect_error([&] { load_config(path, {"data.kind=text", text, "eval.lengths=[64,128]", "eval.key_short=127"}); },
               {"eval.key_short", "at most model.block_size (64) with a learned table"});
  EXPECT_EQ(load_config(path, {"data.task=copy", "eval.lengths=[8]", "eval.key_short=64"}).eval.key_short, 64);
  expect_error([&] { load_config(path, {"train.batch_size=4", "train.batch_shards=5"}); },
               {"train.batch_shards", "up to train.batch_size"});
  expect_error([&] { load_config(path, {"model.dropout=0.1", "train.batch_shards=2"}); },
               {"train.batch_shards", "model.dropout"});
}

TEST(ConfigErrors, EncodingOptions) {
  TempDir dir;
  auto path = dir.file("c.json", R"({"model": {"block_size": 64}})");
  const std::string at = "model.pos_encoding.";
  auto kind = [&](const std::string& k) { return at + "kind=" + k; };
  expect_error([&] { load_config(path, {kind("rope"), at + "rotary_fraction=0"}); }, {"rotary_fraction", "in (0, 1]"});
  expect_error([&] { load_config(path, {kind("rope"), at + "rotary_fraction=1.5"}); }, {"rotary_fraction", "in (0, 1]"});
  expect_error([&] { load_config(path, {kind("rope"), at + "rotary_fraction=0.05"}); }, {"rotary_fraction", "one pair"});
  expect_error([&] { load_config(path, {kind("t5"), at + "num_buckets=1"}); }, {"model.pos_encoding.num_buckets", "at least 2"});
  expect_error([&] { load_config(path, {kind("t5"), at + "max_distance=16"}); }, {"model.pos_encoding.max_distance", "num_buckets/2"});
  expect_error([&] { load_config(path, {kind("t5"), at + "num_buckets=\"32\""}); }, {"model.pos_encoding.num_buckets must be an integer"});
  expect_error([&] { load_config(path, {kind("cope"), at + "npos=0"}); }, {"model.pos_encoding.npos must be positive"});
  expect_error([&] { load_config(path, {kind("fire"), at + "init_c=-1"}); }, {"model.pos_encoding.init_c must be positive"});
  expect_error([&] { load_config(path, {kind("fire"), at + "mlp_width=0"}); }, {"model.pos_encoding.mlp_width must be positive"});
  expect_error([&] { load_config(path, {kind("xpos"), at + "scale_base=0"}); }, {"model.pos_encoding.scale_base must be positive"});
  expect_error([&] { load_config(path, {kind("xpos"), "model.n_embd=20", "model.n_head=4"}); }, {"even", "xpos"});
  expect_error([&] { load_config(path, {at + "randomize.max_position=32"}); },
               {"model.pos_encoding.randomize.max_position", ">= model.block_size (64)"});
  expect_error([&] { load_config(path, {at + "randomize.eval=1"}); }, {"model.pos_encoding.randomize.eval must be a boolean"});
  expect_error([&] { load_config(path, {at + "randomize.max=9"}); }, {"unknown key 'model.pos_encoding.randomize.max'"});
  // Options of another kind are ignored in a file, as bits is for every kind but binary, unchecked; on the
  // command line they are refused.
  EXPECT_NO_THROW(load_config(dir.file("o.json", R"({"model": {"pos_encoding": {"kind": "alibi", "num_buckets": 1}}})")));
  expect_error([&] { load_config(path, {kind("alibi"), at + "num_buckets=1"}); }, {"--set model.pos_encoding.num_buckets", "kind t5"});
  Config c = load_config(path, {kind("fire"), at + "randomize.max_position=2048", at + "mlp_width=8"});
  EXPECT_EQ(c.model.pos_encoding.randomize.max_position, 2048);
  EXPECT_EQ(c.model.pos_encoding.mlp_width, 8);
  Config back = config_from_json(config_to_json(c));
  EXPECT_EQ(back.model.pos_encoding.randomize.max_position, 2048);
  EXPECT_EQ(back.model.pos_encoding.mlp_width, 8);
}

TEST(ConfigErrors, SetPathThatDoesNotExist) {
  TempDir dir;
  auto path = dir.file("c.json", "{}");
  expect_error([&] { load_config(path, {"model.pos.kind=rope"}); }, {"--set model.pos.kind", "unknown key 'model.pos'"});
  expect_error([&] { load_config(path, {"nonsense"}); }, {"--set nonsense", "key.path=value"});
}

TEST(ConfigErrors, MalformedJsonGivesLineAndColumn) {
  TempDir dir;
  auto path = dir.file("c.json", "{\n  \"seed\": 1,\n  \"model\": {\"n_layer\": }\n}\n");
  expect_error([&] { load_config(path); }, {"c.json", "malformed JSON at line 3, column"});
}

TEST(ConfigErrors, MissingFileAndExtendsCycle) {
  TempDir dir;
  expect_error([&] { load_config(dir.sub("nope.json")); }, {"nope.json", "no such file"});
  dir.file("a.json", R"({"extends": "b.json"})");
  auto b = dir.file("b.json", R"({"extends": "a.json"})");
  expect_error([&] { load_config(b); }, {"cycle"});
}

// Found by fuzz_config: a number too large for any numeric type escaped as a non-Config exception.
TEST(ConfigErrors, FuzzRegressionHugeNumbers) {
  TempDir dir;
  auto path = dir.file("c.json", "3330000000000000000000000.0000000000000003074457e345618258602: {\"{");
  expect_error([&] { load_config(path); }, {"c.json"});
  auto big = dir.file("big.json", R"({"model": {"n_layer": 99999999999999}})");
  expect_error([&] { load_config(big); }, {"model.n_layer must be an integer"});
  auto overflow = dir.file("of.json", R"({"seed": 1e999})");
  expect_error([&] { load_config(overflow); }, {"of.json"});
  auto ok = dir.file("ok.json", "{}");
  expect_error([&] { load_config(ok, {"model.n_layer=1e999"}); }, {"model.n_layer"});
}

// An atomic write that cannot be committed (its name taken by a directory) leaves no temp file behind.
TEST(Files, AFailedAtomicWriteLeavesNoTempFile) {
  poslab::testing::TempDir dir;
  const std::string taken = dir.sub("cache.json");
  std::filesystem::create_directories(taken + "/inside");
  EXPECT_THROW(poslab::write_file_atomic(taken, "{}\n"), std::runtime_error);
  for (const auto& e : std::filesystem::directory_iterator(dir.sub("")))
    EXPECT_EQ(e.path().filename().string().rfind("cache.json.tmp", 0), std::string::npos) << e.path();
  EXPECT_TRUE(std::filesystem::is_directory(taken + "/inside"));
}

// Two writers of one path at once (two `poslab eval` of one run): every write succeeds, and the file is always
// one writer's whole content, never the other's bytes renamed in by the first nor a mix of both.
TEST(Files, ConcurrentAtomicWritesOfOnePathEachCommitTheirOwnFile) {
  poslab::testing::TempDir dir;
  const std::string path = dir.sub("eval.json");
  const std::string a(1 << 18, 'a'), b(1 << 17, 'b');  // different lengths: a mix shows in the size too
  std::atomic<int> failures{0};
  auto writer = [&](const std::string& data) {
    for (int i = 0; i < 60; ++i) try {
        poslab::write_file_atomic(path, data);
      } catch (const std::exception&) {
        ++failures;
      }
  };
  std::thread t1(writer, a), t2(writer, b);
  for (int i = 0; i < 200; ++i) {
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(got == a || got == b) << "a file of " << got.size() << " bytes, neither writer's";
  }
  t1.join();
  t2.join();
  EXPECT_EQ(failures.load(), 0);
  std::ifstream in(path, std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(got == a || got == b);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.sub(""))) ++entries, (void)e;
  EXPECT_EQ(entries, 1u) << "temp files left beside eval.json";
}
