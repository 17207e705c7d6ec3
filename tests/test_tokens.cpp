// Token files, meta.json and meta.pkl: files written independently by numpy and by Python's pickle
// (Debian's /usr/bin/python3) read back to the values a formula in the test gives, and every bad
// shape refused with a ConfigError naming the file.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "config/config.h"
#include "data/corpus.h"
#include "data/token_corpus.h"
#include "data/token_file.h"
#include "data/token_meta.h"
#include "test_util.h"

using namespace poslab;
using poslab::testing::TempDir;

// Runs a Python script with Debian's interpreter; false when it (or numpy) is missing.
static bool python(const TempDir& dir, const std::string& script) {
  const std::string path = dir.file("script.py", script);
  return std::system(("/usr/bin/python3 " + path + " >/dev/null 2>&1").c_str()) == 0;
}
static bool have_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

// The tokens the numpy scripts write: token i of a file with `modulus` distinct ids.
static int64_t expected_token(int64_t i, int64_t modulus) { return (i * 7919 + 13) % modulus; }

static std::string write_tokens_py(const std::string& path, const std::string& format, const std::string& dtype,
                                   int64_t n, int64_t modulus) {
  std::string s = "import numpy as np\n";
  s += "toks = ((np.arange(" + std::to_string(n) + ", dtype=np.int64) * 7919 + 13) % " + std::to_string(modulus) +
       ").astype(np." + dtype + ")\n";
  s += "with open('" + path + "', 'wb') as f:\n";
  if (format == "llmc") {  // llm.c's dev/data/data_common.py write_datafile, written out here
    s += "    header = np.zeros(256, dtype=np.int32)\n";
    s += "    header[0] = " + std::string(dtype == "uint16" ? "20240520" : "20240801") + "\n";
    s += "    header[1] = " + std::string(dtype == "uint16" ? "1" : "7") + "\n";
    s += "    header[2] = len(toks)\n";
    s += "    f.write(header.tobytes())\n";
  }
  s += "    f.write(toks.tobytes())\n";
  return s;
}

struct FormatCase {
  std::string format, dtype;
  int64_t modulus;
};

class NumpyTokenFiles : public ::testing::TestWithParam<FormatCase> {};

TEST_P(NumpyTokenFiles, ReadBackAsWritten) {
  if (!have_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy is needed";
  const auto& p = GetParam();
  TempDir dir;
  const int64_t n = 5003;
  const std::string path = dir.sub("tokens.bin");
  ASSERT_TRUE(python(dir, write_tokens_py(path, p.format, p.dtype, n, p.modulus)));
  // "auto" finds both formats; raw uint32 needs the dtype said.
  TokenFile f(path, "auto", p.format == "nanogpt" ? p.dtype : "auto", "test " + path);
  EXPECT_EQ(f.layout().format, p.format);
  EXPECT_EQ(f.layout().token_bytes, p.dtype == "uint16" ? 2 : 4);
  EXPECT_EQ(f.layout().header_bytes, p.format == "llmc" ? 1024 : 0);
  ASSERT_EQ(f.size(), n);
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{2500}, n - 1}) EXPECT_EQ(f.at(i), expected_token(i, p.modulus)) << i;
  std::vector<int64_t> window(100);
  f.read(4000, 100, window.data(), p.modulus);
  for (int64_t k = 0; k < 100; ++k) EXPECT_EQ(window[k], expected_token(4000 + k, p.modulus));
  int64_t top = 0;
  for (int64_t i = 0; i < n; ++i) top = std::max(top, expected_token(i, p.modulus));
  EXPECT_EQ(f.max_id(), top);
  EXPECT_EQ(f.max_id(), top);  // the second answer comes from the cache file
  EXPECT_TRUE(std::filesystem::exists(path + ".poslab-scan.json"));
  // A window that holds an id at or above the vocabulary is refused with the byte offset.
  const int64_t bad_at = 4000 + 7;
  const int64_t small_vocab = expected_token(bad_at, p.modulus);  // that id is then out of range
  try {
    f.read(bad_at, 1, window.data(), small_vocab);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    const std::string offset = std::to_string(f.layout().header_bytes + bad_at * f.layout().token_bytes);
    EXPECT_NE(std::string(e.what()).find("at byte offset " + offset), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, NumpyTokenFiles,
                         ::testing::Values(FormatCase{"nanogpt", "uint16", 65535}, FormatCase{"nanogpt", "uint32", 1000003},
                                           FormatCase{"llmc", "uint16", 50257}, FormatCase{"llmc", "uint32", 128256}),
                         [](const auto& info) { return info.param.format + "_" + info.param.dtype; });

static std::vector<uint8_t> llmc_header(int32_t magic, int32_t count) {
  std::vector<uint8_t> h(1024, 0);
  auto put = [&](int at, int32_t v) {
    for (int b = 0; b < 4; ++b) h[at + b] = static_cast<uint8_t>((static_cast<uint32_t>(v) >> (8 * b)) & 0xFF);
  };
  put(0, magic);
  put(4, 1);
  put(8, count);
  return h;
}

static std::string layout_error(const std::vector<uint8_t>& head, uint64_t size, const std::string& format,
                                const std::string& dtype) {
  try {
    token_file_layout(head.data(), head.size(), size, format, dtype, "f.bin");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// A raw uint16 file whose token i is i mod 65536, written here byte by byte (little-endian).
static std::string write_counting_tokens(const TempDir& dir, const std::string& name, int64_t n) {
  std::string bytes(static_cast<size_t>(n * 2), '\0');
  for (int64_t i = 0; i < n; ++i) {
    bytes[static_cast<size_t>(2 * i)] = static_cast<char>(i & 0xff);
    bytes[static_cast<size_t>(2 * i + 1)] = static_cast<char>((i >> 8) & 0xff);
  }
  return dir.file(name, bytes);
}

// A token file truncated while a run has it mapped: the next read past its new end is a ConfigError
// naming the file and both sizes, and every read after it too, instead of SIGBUS ending the process.
TEST(TokenFile, TruncatedWhileMappedIsAnErrorNamingTheFile) {
  TempDir dir;
  const int64_t n = int64_t{1} << 20;  // 2 MiB: the window read below lies far past the cut
  const std::string path = write_counting_tokens(dir, "train.bin", n);
  const TokenFile f(path, "nanogpt", "uint16", "data.train_path " + path);
  std::vector<int64_t> out(64);
  f.read(n - 64, 64, out.data(), 0);
  for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(out[i], (n - 64 + i) % 65536);
  std::filesystem::resize_file(path, 4096);  // as a rewrite in place or a full disk leaves it
  try {
    f.read(n - 64, 64, out.data(), 0);
    ADD_FAILURE() << "a read past the new end passed";
  } catch (const ConfigError& e) {
    const std::string want = "data.train_path " + path + ": the file was truncated while this process read it (4096 bytes now, " +
                             std::to_string(n * 2) + " when opened)";
    EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u) << e.what();
  }
  EXPECT_THROW(f.read(0, 8, out.data(), 0), ConfigError);  // the file is not what was opened: no read passes
}

// The handler answers faults in token files only: a SIGBUS anywhere else goes where it went before, to the
// default action (the process ends by SIGBUS) or to the handler installed before it (AddressSanitizer's, which
// reports the fault and aborts).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POSLAB_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define POSLAB_TEST_ASAN 1
#endif
TEST(TokenFileDeathTest, ASigbusOutsideTokenFilesStillEndsTheProcess) {
  TempDir dir;
  const std::string path = write_counting_tokens(dir, "train.bin", 1 << 16);
  const TokenFile guarded(path, "nanogpt", "uint16", "data.train_path " + path);  // the handler is installed
  const std::string other = write_counting_tokens(dir, "other.bin", 1 << 16);
  EXPECT_EXIT(
      {
        const int fd = ::open(other.c_str(), O_RDWR);
        auto* map = static_cast<volatile const char*>(::mmap(nullptr, 1 << 17, PROT_READ, MAP_SHARED, fd, 0));
        if (::ftruncate(fd, 0) != 0) std::exit(3);
        const char c = map[70000];  // past the new end
        std::exit(c == 0 ? 4 : 5);  // not reached
      },
#if defined(POSLAB_TEST_ASAN)
      ::testing::KilledBySignal(SIGABRT), "AddressSanitizer: BUS");
#else
      ::testing::KilledBySignal(SIGBUS), "");
#endif
}

TEST(TokenFileLayout, RefusesEveryBadShapeNamingTheFile) {
  const std::vector<uint8_t> raw(16, 1);
  EXPECT_NE(layout_error(raw, 7, "auto", "auto").find("f.bin: 7 bytes is not a whole number of uint16 tokens"), std::string::npos);
  EXPECT_NE(layout_error(raw, 6, "nanogpt", "uint32").find("not a whole number of uint32"), std::string::npos);
  EXPECT_NE(layout_error(raw, 0, "auto", "auto").find("holds no tokens"), std::string::npos);
  EXPECT_NE(layout_error(std::vector<uint8_t>(1024, 1), 2048, "llmc", "auto").find("expected llm.c's magic 20240520"),
            std::string::npos);
  EXPECT_NE(layout_error(raw, 16, "llmc", "auto").find("shorter than llm.c's 1024-byte header"), std::string::npos);
  // header count 10 uint16 = 20 bytes, but 22 follow
  EXPECT_NE(layout_error(llmc_header(kLlmcMagicU16, 10), 1024 + 22, "auto", "auto")
                .find("the llm.c header says 10 tokens (20 bytes) but the file holds 22 bytes"),
            std::string::npos);
  EXPECT_NE(layout_error(llmc_header(kLlmcMagicU16, 10), 1044, "auto", "uint32").find("data.dtype is uint32"), std::string::npos);
  // Accepted: the count agrees; uint32 from the magic.
  auto l = token_file_layout(llmc_header(kLlmcMagicU32, 10).data(), 1024, 1024 + 40, "auto", "auto", "f.bin");
  EXPECT_EQ(l.token_bytes, 4);
  EXPECT_EQ(l.count, 10);
  // The magic in a file shorter than the header: a truncated shard, named as one (not read raw), unless
  // data.format says the file is a raw array.
  const auto short_shard = llmc_header(kLlmcMagicU16, 2);
  EXPECT_NE(layout_error({short_shard.begin(), short_shard.begin() + 8}, 8, "auto", "auto")
                .find("f.bin: 8 bytes start with llm.c's magic 20240520 but are shorter than its 1024-byte header"),
            std::string::npos);
  l = token_file_layout(short_shard.data(), 8, 8, "nanogpt", "auto", "f.bin");
  EXPECT_EQ(l.format, "nanogpt");
  EXPECT_EQ(l.count, 4);
  // Without the magic, auto reads a raw array.
  l = token_file_layout(raw.data(), raw.size(), 16, "auto", "auto", "f.bin");
  EXPECT_EQ(l.format, "nanogpt");
  EXPECT_EQ(l.count, 8);
}

// A sidecar's dtype (meta.pkl says uint16, meta.json may say uint32) describes raw arrays; an llm.c shard's
// magic outranks it, and only an explicit data.dtype that differs from the magic is refused.
TEST(TokenFileLayout, ASidecarsDtypeReadsRawArraysAndYieldsToTheMagic) {
  const std::vector<uint8_t> raw(16, 1);
  auto l = token_file_layout(raw.data(), raw.size(), 16, "auto", "auto", "f.bin", /*raw_dtype=*/"uint32");
  EXPECT_EQ(l.token_bytes, 4);
  EXPECT_EQ(l.count, 4);
  l = token_file_layout(raw.data(), raw.size(), 16, "auto", "uint16", "f.bin", /*raw_dtype=*/"uint32");  // data.dtype wins
  EXPECT_EQ(l.count, 8);
  l = token_file_layout(llmc_header(kLlmcMagicU32, 10).data(), 1024, 1024 + 40, "auto", "auto", "f.bin", "uint16");
  EXPECT_EQ(l.token_bytes, 4);
  EXPECT_EQ(l.count, 10);
  l = token_file_layout(llmc_header(kLlmcMagicU16, 10).data(), 1024, 1024 + 20, "auto", "auto", "f.bin", "uint32");
  EXPECT_EQ(l.token_bytes, 2);
  EXPECT_EQ(l.count, 10);
}

// nanoGPT's data/shakespeare_char/prepare.py, its meta part written out again here.
static std::string prepare_meta_py(const std::string& text_path, const std::string& out, int protocol) {
  return "import pickle\n"
         "data = open('" + text_path + "', encoding='utf-8').read()\n"
         "chars = sorted(list(set(data)))\n"
         "vocab_size = len(chars)\n"
         "stoi = { ch:i for i,ch in enumerate(chars) }\n"
         "itos = { i:ch for i,ch in enumerate(chars) }\n"
         "meta = {'vocab_size': vocab_size, 'itos': itos, 'stoi': stoi}\n"
         "with open('" + out + "', 'wb') as f:\n"
         "    pickle.dump(meta, f" + (protocol > 0 ? ", protocol=" + std::to_string(protocol) : std::string()) + ")\n";
}

TEST(MetaPkl, ReadsWhatPythonsPickleWritesAtProtocols2To5) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "First Citizen: caf\xc3\xa9 & na\xc3\xafve, line " + std::to_string(i) + "!\n";
  const std::string text_path = dir.file("input.txt", text);
  // The characters, sorted by code point (bytewise order of UTF-8 is code point order).
  std::set<std::string> unique;
  for (size_t i = 0; i < text.size();) {
    const size_t len = (static_cast<unsigned char>(text[i]) < 0x80) ? 1 : 2;
    unique.insert(text.substr(i, len));
    i += len;
  }
  const std::vector<std::string> chars(unique.begin(), unique.end());
  for (int protocol : {0, 2, 3, 4, 5}) {  // 0: the default of the running Python (4 or 5)
    const std::string out = dir.sub("meta" + std::to_string(protocol) + ".pkl");
    if (!python(dir, prepare_meta_py(text_path, out, protocol))) GTEST_SKIP() << "/usr/bin/python3 is needed";
    std::ifstream in(out, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto m = parse_meta_pkl(bytes, out);
    EXPECT_EQ(m.vocab_size, static_cast<int64_t>(chars.size())) << protocol;
    EXPECT_EQ(m.itos, chars) << protocol;
  }
}

TEST(MetaPkl, RefusesOtherShapesInOneLine) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1, 2, 3]", "pickle opcode 0x5d"},  // EMPTY_LIST: lists are not read
      {"{'vocab_size': 3}", "itos missing"},
      {"{'vocab_size': 2, 'itos': {0: 'a', 1: 'b', 5: 'c'}}", "outside 0..vocab_size-1"},
      {"{'vocab_size': 2, 'itos': {0: 'a', 1: 2}}", "itos must map integers to strings"},
      {"{'vocab_size': 2.5, 'itos': {}}", "pickle opcode"},
      {"{'vocab_size': 2, 'itos': {0: 'a', 1: '\\ud800'}}", "itos[1] is not UTF-8 text (byte 0)"},  // a lone surrogate
      {"{'vocab_size': 3, 'itos': {0: 'a', 1: 'b', 2: 'a'}}", "itos[0] and itos[2] are the same string \"a\""},
      {"{'vocab_size': 2, 'itos': {0: 'a', 1: ''}}", "itos[1] is the empty string"},
      {"{'vocab_size': 2**40, 'itos': {0: 'a'}}", "vocab_size 1099511627776 is not in 1..65536"},  // LONG1
      {"{'vocab_size': -2**40, 'itos': {0: 'a'}}", "vocab_size -1099511627776 is not in 1..65536"},
      {"{'vocab_size': 2**80, 'itos': {0: 'a'}}", "an integer of 11 bytes"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string out = dir.sub("bad" + std::to_string(i) + ".pkl");
    if (!python(dir, "import pickle\npickle.dump(" + cases[i].first + ", open('" + out + "', 'wb'), protocol=4)\n"))
      GTEST_SKIP() << "/usr/bin/python3 is needed";
    std::ifstream in(out, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      parse_meta_pkl(bytes, out);
      ADD_FAILURE() << cases[i].first;
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(out + ": not nanoGPT's meta.pkl"), std::string::npos) << what;
      EXPECT_NE(what.find(cases[i].second), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos);
    }
  }
  // A small vocab_size written by LONG1 (Python 2's long, or a hand-made pickle) reads as itself.
  const std::string long1 = dir.sub("long1.pkl");
  if (python(dir, "import pickle, pickletools\n"
                  "b = pickle.dumps({'vocab_size': 2**33, 'itos': {}}, protocol=2)\n"
                  "assert b'\\x8a' in b\n"
                  "open('" + long1 + "', 'wb').write(b.replace(b'\\x8a\\x05\\x00\\x00\\x00\\x00\\x02', b'\\x8a\\x05\\x02\\x00\\x00\\x00\\x00'))\n")) {
    std::ifstream in(long1, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      parse_meta_pkl(bytes, long1);
      ADD_FAILURE() << "an empty itos for vocab_size 2 was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("itos has 0 entries for vocab_size 2"), std::string::npos) << e.what();
    }
  }
  // Protocol 1 and truncation.
  EXPECT_THROW(parse_meta_pkl(std::string("\x80\x01}q\x00.", 6), "p1.pkl"), ConfigError);
  EXPECT_THROW(parse_meta_pkl(std::string("\x80\x04\x95", 3), "cut.pkl"), ConfigError);
  EXPECT_THROW(parse_meta_pkl("", "empty.pkl"), ConfigError);
}

TEST(MetaJson, ReadsPoslabsSidecarAndRefusesBadValues) {
  auto m = parse_meta_json(R"({"vocab_size": 300, "dtype": "uint16", "eot_id": 2, "tokenizer": "tok.model"})", "/d/meta.json");
  EXPECT_EQ(m.vocab_size, 300);
  EXPECT_EQ(m.dtype, "uint16");
  EXPECT_EQ(m.eot_id, 2);
  EXPECT_EQ(m.tokenizer, "/d/tok.model");
  for (const char* bad : {R"([1])", R"({"dtype": "uint16"})", R"({"vocab_size": 70000, "dtype": "uint16"})",
                          R"({"vocab_size": 10, "eot_id": 10})", R"({"vocab_size": 10, "dtype": "int8"})", "{"})
    EXPECT_THROW(parse_meta_json(bad, "/d/meta.json"), ConfigError) << bad;
}

static void write_u16(const std::string& path, const std::vector<uint16_t>& ids) {
  std::ofstream f(path, std::ios::binary);
  for (uint16_t v : ids) f.put(static_cast<char>(v & 0xFF)).put(static_cast<char>(v >> 8));
}

static Config token_config(const std::string& dir) {
  Config c;
  c.data.kind = "tokens";
  c.data.dir = dir;
  c.model.block_size = 8;
  return c;
}

TEST(TokenCorpus, WindowsAndBatchesComeFromTheFiles) {
  TempDir dir;
  std::vector<uint16_t> train(1000), val(200);
  for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint16_t>(i % 50);
  for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<uint16_t>((i * 3) % 50);
  write_u16(dir.sub("train.bin"), train);
  write_u16(dir.sub("val.bin"), val);
  Config c = token_config(dir.path.string());
  c.data.vocab_size = 50;
  auto corpus = make_corpus(c);
  EXPECT_EQ(corpus->tokenizer().size(), 50);
  const auto& text = static_cast<const TextCorpus&>(*corpus);
  EXPECT_EQ(text.split_tokens(Split::Train), 1000);
  EXPECT_EQ(text.split_tokens(Split::Val), 200);
  auto w = text.windows(Split::Val, {10, 100}, 5);  // (2, 5)
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(w[0][k].item<int64_t>(), val[10 + k]);
    EXPECT_EQ(w[1][k].item<int64_t>(), val[100 + k]);
  }
  Rng rng(3);
  auto b = corpus->batch(Split::Train, 4, rng);
  ASSERT_EQ(b.x.sizes(), (std::vector<int64_t>{4, 8}));
  // Consecutive training tokens: each row counts up by one modulo 50, and y is x shifted.
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < 8; ++t) EXPECT_EQ(b.y[r][t].item<int64_t>(), (b.x[r][t].item<int64_t>() + 1) % 50);
}

// meta.json without a dtype for a vocabulary uint16 cannot hold (Llama 3's 128256): the raw arrays are
// uint32, not read as uint16 halves of ids (which are all below the vocabulary, so nothing would say so).
TEST(TokenCorpus, AVocabularyAbove65536WithoutADtypeReadsUint32) {
  TempDir dir;
  auto write_u32 = [](const std::string& path, int64_t n) {
    std::ofstream f(path, std::ios::binary);
    for (int64_t i = 0; i < n; ++i) {
      const auto v = static_cast<uint32_t>(expected_token(i, 128256));
      for (int b = 0; b < 4; ++b) f.put(static_cast<char>((v >> (8 * b)) & 0xFF));
    }
  };
  write_u32(dir.sub("train.bin"), 400);
  write_u32(dir.sub("val.bin"), 100);
  std::ofstream(dir.sub("meta.json")) << R"({"vocab_size": 128256})";
  Config c = token_config(dir.path.string());
  auto corpus = make_corpus(c);
  const auto& text = static_cast<const TextCorpus&>(*corpus);
  EXPECT_EQ(text.split_tokens(Split::Train), 400);
  EXPECT_EQ(text.split_tokens(Split::Val), 100);
  auto w = text.windows(Split::Val, {20}, 5);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(w[0][k].item<int64_t>(), expected_token(20 + k, 128256));
  // The same from data.vocab_size alone, without a sidecar.
  std::filesystem::remove(dir.sub("meta.json"));
  c.data.vocab_size = 128256;
  EXPECT_EQ(static_cast<const TextCorpus&>(*make_corpus(c)).split_tokens(Split::Train), 400);
}

// Token files linked into a directory of one's own, named by data.train_path and data.val_path: the vocabulary
// is that directory's meta.json, beside the files as named, not the one beside the links' targets.
TEST(TokenCorpus, LinkedFilesReadTheMetaBesideTheLinks) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "shared");
  std::filesystem::create_directories(dir.path / "mine");
  write_u16(dir.sub("shared/train.bin"), std::vector<uint16_t>(1000, 1));
  write_u16(dir.sub("shared/val.bin"), std::vector<uint16_t>(300, 1));
  dir.file("shared/meta.json", R"({"vocab_size": 50})");
  dir.file("mine/meta.json", R"({"vocab_size": 60})");
  std::filesystem::create_symlink("../shared/train.bin", dir.path / "mine" / "train.bin");
  std::filesystem::create_symlink("../shared/val.bin", dir.path / "mine" / "val.bin");
  const Config c = load_config(dir.file("c.json", R"({"data": {"kind": "tokens", "train_path": "mine/train.bin",
      "val_path": "mine/val.bin"}, "model": {"block_size": 8}, "eval": {"lengths": [8]}})"));
  EXPECT_EQ(c.data.train_path, dir.sub("mine/train.bin"));
  EXPECT_EQ(make_corpus(c)->tokenizer().size(), 60);
}

// The scan cache is keyed by size and modification time: a file rewritten keeping both (a restored time) is
// checked by the full scan that a refusal makes, and opens when its ids are fine (it was refused naming the
// token before the file, "byte offset -2 (token -1)", after reading outside the map).
TEST(TokenCorpus, AStaleScanCacheIsCheckedAgainstTheFile) {
  TempDir dir;
  std::vector<uint16_t> train(1000, 1);
  train[10] = 90;
  write_u16(dir.sub("train.bin"), train);
  write_u16(dir.sub("val.bin"), std::vector<uint16_t>(300, 1));
  const auto when = std::filesystem::last_write_time(dir.sub("train.bin"));
  Config c = token_config(dir.path.string());
  c.data.vocab_size = 100;
  EXPECT_NO_THROW(make_corpus(c));  // caches the largest id, 90
  train[10] = 1;
  write_u16(dir.sub("train.bin"), train);
  std::filesystem::last_write_time(dir.sub("train.bin"), when);
  c.data.vocab_size = 50;
  EXPECT_NO_THROW(make_corpus(c));
  train[20] = 70;
  write_u16(dir.sub("train.bin"), train);
  std::filesystem::last_write_time(dir.sub("train.bin"), when);
  try {
    make_corpus(c);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train.bin: token id 70 at byte offset 40 (token 20)"), std::string::npos) << e.what();
  }
}

TEST(TokenCorpus, RefusesIdsAtOrAboveTheVocabularyAndShortValidation) {
  TempDir dir;
  std::vector<uint16_t> train(200, 1), val(100, 1);  // val: too short for a 100-token block, train not
  train[37] = 60;  // byte offset 74
  write_u16(dir.sub("train.bin"), train);
  write_u16(dir.sub("val.bin"), val);
  Config c = token_config(dir.path.string());
  c.data.vocab_size = 50;
  try {
    make_corpus(c);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train.bin: token id 60 at byte offset 74 (token 37)"), std::string::npos) << e.what();
  }
  c.data.vocab_size = 61;
  c.model.block_size = 100;  // val holds 100 tokens, 101 needed for one validation window
  try {
    make_corpus(c);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("val.bin: 100 tokens is too short: validation needs at least model.block_size+1 = 101"),
              std::string::npos) << e.what();
  }
  c.model.block_size = 99;
  c.eval.lengths = {64, 128};  // past the file: the evaluation reports 128 not applicable, the corpus is fine
  EXPECT_NO_THROW(make_corpus(c));
  c.model.block_size = 8;
  c.data.vocab_size = 0;  // no meta.json or meta.pkl beside the files either
  EXPECT_THROW(make_corpus(c), ConfigError);
}
