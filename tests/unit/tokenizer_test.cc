// Tokenizer tests: llama.cpp's vocabulary test vectors (../shared/vocab),
// round trips, the incremental detokenizer, special tokens, bad input, and
// the stories260K golden prompt.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/utf8.h"
#include "format/gguf.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace zl {
namespace {

namespace fs = std::filesystem;

const fs::path kShared = ZL_SHARED_DIR;

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Printable form of arbitrary bytes: C escapes for controls and non-UTF-8.
std::string escape(std::string_view s) {
  std::string out = "\"";
  char buf[8];
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7F) { std::snprintf(buf, sizeof(buf), "\\x%02X", c); out += buf; }
    else out += static_cast<char>(c);
  }
  if (!utf8::is_valid(s)) out += " (invalid UTF-8)";
  return out + "\"";
}

std::string ids_str(const std::vector<TokenId>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

struct VectorCase {
  std::string input;
  std::vector<TokenId> expected;
};

// The .inp/.out format of ../shared/vocab/README.md.
std::vector<VectorCase> read_vectors(const fs::path& gguf) {
  const std::string inp = read_all(gguf.string() + ".inp");
  const std::string outp = read_all(gguf.string() + ".out");
  static constexpr std::string_view kMarker = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  size_t pos = 0;
  while (pos < inp.size()) {
    size_t m = inp.find(kMarker, pos);
    if (m == std::string::npos) m = inp.size();
    cases.push_back({inp.substr(pos, m - pos), {}});
    pos = m == inp.size() ? m : m + kMarker.size();
  }
  std::istringstream lines(outp);
  std::string line;
  size_t k = 0;
  while (std::getline(lines, line)) {
    if (k >= cases.size()) break;
    std::istringstream ids(line);
    TokenId id;
    while (ids >> id) cases[k].expected.push_back(id);
    ++k;
  }
  EXPECT_EQ(k, cases.size()) << "line count of " << gguf << ".out differs from its inputs";
  return cases;
}

const std::vector<std::string> kVocabs = {"llama-spm", "phi-3", "llama-bpe", "gpt-2",
                               "falcon",    "starcoder", "deepseek-llm", "qwen2"};

fs::path vocab_path(const std::string& name) { return kShared / "vocab" / ("ggml-vocab-" + name + ".gguf"); }

// Loaded once per process: the big vocabularies take a while to read.
const Tokenizer& tokenizer_for(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto t = Tokenizer::load(vocab_path(name).string());
    CHECK(t.ok()) << t.status().to_string();
    it = cache.emplace(name, std::move(t).value()).first;
  }
  return *it->second;
}

#define SKIP_WITHOUT_SHARED()                                                              \
  if (!fs::exists(kShared / "vocab")) GTEST_SKIP() << "no shared test data at " << kShared \
                                                   << " (../shared absent)"

constexpr EncodeOptions kRaw{.add_special = false, .parse_special = false};

// What decode(encode(x)) gives for valid UTF-8 x: an SPM vocabulary with
// add_space_prefix adds one leading space (the '▁' prefix).
std::string expected_round_trip(const Tokenizer& t, const std::string& x) {
  if (t.kind() == VocabKind::kSpm && t.vocab().add_space_prefix() && !x.empty()) return " " + x;
  return x;
}

// Falcon's and StarCoder's vocabularies lack the tokens of a few bytes (0x0B,
// 0xC0, 0xF5.., ...); like llama.cpp we drop such bytes, so text containing
// them cannot round trip there.
bool representable(const Tokenizer& t, std::string_view x) {
  for (char c : x) {
    if (t.vocab().byte_token(static_cast<uint8_t>(c)) == kNoToken) return false;
  }
  return true;
}

class VocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabTest, VectorsExact) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for(GetParam());
  const auto cases = read_vectors(vocab_path(GetParam()));
  ASSERT_FALSE(cases.empty());
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = t.encode(cases[i].input, kRaw);
    if (got == cases[i].expected) {
      ++passed;
    } else {
      ADD_FAILURE() << GetParam() << " case " << i << "\n  input:    " << escape(cases[i].input)
                    << "\n  expected: " << ids_str(cases[i].expected) << "\n  got:      " << ids_str(got);
    }
  }
  std::printf("[ vectors  ] %-13s %zu/%zu exact\n", GetParam().c_str(), passed, cases.size());
}

TEST_P(VocabTest, RoundTripVectors) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for(GetParam());
  for (const auto& c : read_vectors(vocab_path(GetParam()))) {
    const auto ids = t.encode(c.input, kRaw);
    EXPECT_EQ(t.decode(ids), expected_round_trip(t, c.input)) << "input " << escape(c.input);
  }
}

// Concatenated deltas == one-shot decode, and every delta is valid UTF-8.
void check_incremental(const Tokenizer& t, const std::vector<TokenId>& ids, const std::string& what) {
  IncrementalDetokenizer detok(t);
  std::string all;
  for (TokenId id : ids) {
    const std::string delta = detok.push(id);
    ASSERT_TRUE(utf8::is_valid(delta)) << what << ": delta " << escape(delta) << " after id " << id;
    all += delta;
  }
  const std::string tail = detok.flush();
  ASSERT_TRUE(utf8::is_valid(tail));
  all += tail;
  EXPECT_EQ(all, t.decode(ids)) << what;
}

TEST_P(VocabTest, IncrementalMatchesOneShot) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for(GetParam());
  for (const auto& c : read_vectors(vocab_path(GetParam()))) {
    check_incremental(t, c.expected, "vector " + escape(c.input));
  }
  // Every token of the vocabulary once, in id order (splits UTF-8 everywhere).
  std::vector<TokenId> all(t.vocab().n_tokens());
  for (TokenId i = 0; i < t.vocab().n_tokens(); ++i) all[i] = i;
  check_incremental(t, all, "all ids");
}

// Random strings of code points drawn from scripts that stress the tokenizers.
std::string random_unicode(std::mt19937& rng, size_t max_len) {
  static const std::pair<uint32_t, uint32_t> kRanges[] = {
      {0x20, 0x7E},       {0x20, 0x7E},     {0x20, 0x7E},   {0x09, 0x0D},     {0xA0, 0x17F},
      {0x300, 0x36F},     {0x370, 0x3FF},   {0x400, 0x4FF}, {0x590, 0x6FF},   {0x900, 0x97F},
      {0x1780, 0x17FF},   {0x2000, 0x206F}, {0x3000, 0x30FF}, {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3},
      {0xFF00, 0xFFEF},   {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF}, {0xE000, 0xF8FF}, {0x30, 0x39},
  };
  std::uniform_int_distribution<size_t> len_d(0, max_len), range_d(0, std::size(kRanges) - 1);
  std::string s;
  const size_t len = len_d(rng);
  for (size_t i = 0; i < len; ++i) {
    const auto [lo, hi] = kRanges[range_d(rng)];
    uint32_t cp = std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
    utf8::append(cp, &s);
  }
  return s;
}

TEST_P(VocabTest, RoundTripRandomUnicode) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for(GetParam());
  std::mt19937 rng(1234);
  int n_checked = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string x = random_unicode(rng, 48);
    const auto ids = t.encode(x, kRaw);
    check_incremental(t, ids, "random " + escape(x));
    if (!representable(t, x)) continue;
    ++n_checked;
    ASSERT_EQ(t.decode(ids), expected_round_trip(t, x)) << "input " << escape(x) << " ids " << ids_str(ids);
  }
  EXPECT_GT(n_checked, 100);
}

// Arbitrary bytes: no crash, and the text comes back with U+FFFD per bad byte.
TEST_P(VocabTest, RandomBytesFollowReplacementPolicy) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for(GetParam());
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> byte(0, 255), len(0, 40);
  for (int i = 0; i < 300; ++i) {
    std::string x(len(rng), '\0');
    for (char& c : x) c = static_cast<char>(byte(rng));
    const auto ids = t.encode(x, kRaw);
    for (TokenId id : ids) ASSERT_TRUE(t.vocab().is_valid(id));
    check_incremental(t, ids, "bytes " + escape(x));
    if (!representable(t, utf8::sanitize(x))) continue;
    ASSERT_EQ(t.decode(ids), expected_round_trip(t, utf8::sanitize(x))) << "input " << escape(x);
  }
}

// Long runs and odd characters: finish quickly (linear time) and round trip.
TEST_P(VocabTest, AdversarialInputs) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for(GetParam());
  std::string zwj_family;
  for (int i = 0; i < 2000; ++i) zwj_family += "\xF0\x9F\x91\xA8\xE2\x80\x8D";  // 👨 + ZWJ
  std::string json = "{";
  for (int i = 0; i < 8000; ++i) json += "\"k" + std::to_string(i) + "\":[" + std::to_string(i * 7) + ",null],";
  json += "\"end\":{}}";
  const std::pair<const char*, std::string> inputs[] = {
      {"100k 'a'", std::string(100000, 'a')},
      {"100k digits", std::string(100000, '7')},
      {"100k spaces", std::string(100000, ' ')},
      {"100k newlines", std::string(100000, '\n')},
      {"100k tabs+spaces", [] { std::string s; for (int i = 0; i < 50000; ++i) s += " \t"; return s; }()},
      {"17 newlines", std::string(17, '\n') + "x"},
      {"NUL bytes", std::string("a\0b\0\0c", 6)},
      {"BOM", "\xEF\xBB\xBFhello \xEF\xBB\xBF"},
      {"zero width space", "a\xE2\x80\x8B" "b\xE2\x80\x8B\xE2\x80\x8B"},
      {"ZWJ sequence", zwj_family},
      {"lone continuation bytes", std::string(1000, '\x80')},
      {"minified JSON", json},
      {"CJK run", [] { std::string s; for (int i = 0; i < 30000; ++i) s += "\xE4\xB8\xAD"; return s; }()},
  };
  for (const auto& [name, x] : inputs) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = t.encode(x, kRaw);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(secs, 5.0) << name << " took " << secs << " s: not linear?";
    if (representable(t, utf8::sanitize(x))) {
      EXPECT_EQ(t.decode(ids), expected_round_trip(t, utf8::sanitize(x))) << name;
    }
  }
}

// llama.cpp's parse_special = false: the text of every control (and unknown)
// token is ordinary text, wherever it stands; only user-defined tokens are
// still matched verbatim. Checked for each such token of the vocabulary, in
// the middle of text, alone, and between spaces (Phi-3's rstrip).
TEST_P(VocabTest, ControlTokenTextIsPlainText) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for(GetParam());
  const Vocab& v = t.vocab();
  size_t n_checked = 0;
  for (TokenId id : v.special_tokens()) {
    if (v.type(id) == TokenType::kUserDefined) continue;
    const std::string& text = v.text(id);
    for (const std::string& x : {"x" + text + "y", text, " " + text + " \n"}) {
      const auto raw = t.encode(x, kRaw);
      for (TokenId r : raw) {
        ASSERT_FALSE(v.is_control(r) || v.type(r) == TokenType::kUnknown)
            << GetParam() << ": " << escape(x) << " -> " << ids_str(raw) << " holds special token " << r;
      }
      if (representable(t, x)) {
        EXPECT_EQ(t.decode(raw), expected_round_trip(t, x)) << GetParam() << " " << escape(x);
      }
      // The same text with parse_special is the token (the input does spell it).
      const auto parsed = t.encode(x, {.add_special = false, .parse_special = true});
      EXPECT_EQ(std::count(parsed.begin(), parsed.end(), id), 1) << GetParam() << " " << escape(x) << " -> "
                                                                 << ids_str(parsed);
    }
    ++n_checked;
  }
  EXPECT_GT(n_checked, 0u) << GetParam() << " has no control token";
}

// Phi-3 types "</s>" user-defined; llama.cpp treats it as control (an
// end-of-generation text), so without parse_special it is the same text as in
// Llama 2's vocabulary, which Phi-3's extends.
TEST(SpecialTokens, Phi3EosTextIsPlainText) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& phi3 = tokenizer_for("phi-3");
  const Tokenizer& llama2 = tokenizer_for("llama-spm");
  EXPECT_TRUE(phi3.vocab().is_control(2));
  EXPECT_TRUE(phi3.vocab().is_eog(2));
  for (const std::string x : {"a</s>", "</s>", "x </s> y</s></s>\n", "<s></s><unk>"}) {
    EXPECT_EQ(phi3.encode(x, kRaw), llama2.encode(x, kRaw)) << escape(x);
  }
  const auto parsed = phi3.encode("a</s> b", {.add_special = false, .parse_special = true});
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 2), 1) << ids_str(parsed);
  // Qwen2's "</s>" is a normal token in the file; llama.cpp makes it control too.
  const Tokenizer& qwen = tokenizer_for("qwen2");
  const TokenId qs = qwen.vocab().find("</s>");
  ASSERT_NE(qs, kNoToken);
  EXPECT_TRUE(qwen.vocab().is_control(qs));
  const auto q = qwen.encode("a</s>", {.add_special = false, .parse_special = true});
  EXPECT_EQ(std::count(q.begin(), q.end(), qs), 1) << ids_str(q);
  const auto qr = qwen.encode("a</s>", kRaw);
  EXPECT_EQ(std::count(qr.begin(), qr.end(), qs), 0) << ids_str(qr);
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabTest, ::testing::ValuesIn(kVocabs),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });


// The tokenizer model and the BPE pre-tokenizer named by the file reach their
// "unsupported" messages escaped as the GGUF reader escapes every string
// (review 22 #5): a NUL does not cut the message, an ESC is not sent raw.
TEST(VocabErrors, NamesFromTheFileAreEscaped) {
  auto load = [](const std::string& model, const std::string& pre) {
    GgufWriter w;
    w.set("tokenizer.ggml.model", GgufValue::string(model));
    if (!pre.empty()) w.set("tokenizer.ggml.pre", GgufValue::string(pre));
    w.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "b", "ab"}));
    w.set("tokenizer.ggml.merges", GgufValue::string_array({"a b"}));
    const std::vector<uint8_t> bytes = w.to_bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size());
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return Tokenizer::from_gguf(**f);
  };
  auto model = load(std::string("bp") + '\0' + "e\x1b[0m\xc3", "");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(model.status().message(), "tokenizer model 'bp\\x00e\\x1b[0m\\xc3' (supported: llama, gpt2)");
  auto pre = load("gpt2", std::string("q") + '\0' + "\x07wen");
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.status().kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(pre.status().message(), "BPE pre-tokenizer 'q\\x00\\x07wen'");
  EXPECT_TRUE(load("gpt2", "qwen2").ok());  // the same file with a known pre-tokenizer
}

// ../shared/vocab/README.md's table: sizes, BOS ids and the add-BOS default.
TEST(VocabFacts, MatchReadme) {
  SKIP_WITHOUT_SHARED();
  struct Row {
    const char* name;
    int32_t n_tokens;
    TokenId bos;
    bool add_bos;
    VocabKind kind;
  };
  const Row rows[] = {
      {"llama-spm", 32000, 1, true, VocabKind::kSpm},         {"phi-3", 32064, 1, true, VocabKind::kSpm},
      {"llama-bpe", 128256, 128000, true, VocabKind::kBpe},   {"gpt-2", 50257, 50256, false, VocabKind::kBpe},
      {"falcon", 65024, 11, false, VocabKind::kBpe},          {"starcoder", 49152, 0, false, VocabKind::kBpe},
      {"deepseek-llm", 102400, 100000, true, VocabKind::kBpe}, {"qwen2", 151936, 151643, false, VocabKind::kBpe},
  };
  for (const Row& r : rows) {
    const Vocab& v = tokenizer_for(r.name).vocab();
    EXPECT_EQ(v.n_tokens(), r.n_tokens) << r.name;
    EXPECT_EQ(v.bos(), r.bos) << r.name;
    EXPECT_EQ(v.add_bos(), r.add_bos) << r.name;
    EXPECT_EQ(v.kind(), r.kind) << r.name;
    EXPECT_FALSE(v.add_eos()) << r.name;
  }
  const Vocab& l3 = tokenizer_for("llama-bpe").vocab();
  EXPECT_EQ(l3.eos(), 128009);
  EXPECT_EQ(l3.eot(), 128009);
  EXPECT_TRUE(l3.is_eog(128009));
  EXPECT_TRUE(l3.is_eog(128008));  // <|eom_id|>
  EXPECT_FALSE(l3.is_eog(128000));
  EXPECT_TRUE(l3.is_eog(128001));  // <|end_of_text|>: an end-of-generation text in llama.cpp
  const Vocab& qwen = tokenizer_for("qwen2").vocab();
  EXPECT_EQ(qwen.eot(), 151645);  // <|im_end|>
  EXPECT_TRUE(qwen.is_eog(151643));
  EXPECT_TRUE(qwen.is_eog(151645));
  EXPECT_EQ(tokenizer_for("phi-3").vocab().eot(), 32007);  // <|end|>
}

TEST(SpecialTokens, ParsedOnlyWhenAsked) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for("llama-bpe");
  const std::string text = "hi<|eot_id|>";
  const auto raw = t.encode(text, kRaw);
  EXPECT_EQ(std::count(raw.begin(), raw.end(), 128009), 0) << ids_str(raw);
  EXPECT_EQ(t.decode(raw), text);
  const auto parsed = t.encode(text, {.add_special = false, .parse_special = true});
  ASSERT_EQ(parsed.size(), 2u) << ids_str(parsed);
  EXPECT_EQ(parsed[1], 128009);
  // BOS comes from the vocabulary's add_bos.
  EXPECT_EQ(t.encode("hi", {.add_special = true})[0], 128000);
  // Control tokens render as "" unless asked.
  EXPECT_EQ(t.token_to_piece(128009), "");
  EXPECT_EQ(t.token_to_piece(128009, /*render_special=*/true), "<|eot_id|>");
  EXPECT_EQ(t.decode(parsed), "hi");
  EXPECT_EQ(t.decode(parsed, {.render_special = true}), text);
}

TEST(SpecialTokens, SegmentsKeepUserContentRaw) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for("llama-bpe");
  // Template markup is parsed, user content is not, and raw text that spans
  // segments is tokenized as one fragment.
  const TextSegment segs[] = {
      {"<|start_header_id|>user<|end_header_id|>\n\n", true},
      {"Hello <|eot_id|>", false},
      {" world<|eot_id|>", true},
  };
  const auto ids = t.encode(segs, /*add_special=*/false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 128009), 1) << ids_str(ids);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_EQ(ids[0], 128006);
  const auto whole = t.encode("<|start_header_id|>user<|end_header_id|>\n\nHello  world<|eot_id|>",
                              {.add_special = false, .parse_special = true});
  const TextSegment plain[] = {{"<|start_header_id|>user<|end_header_id|>\n\nHello ", true},
                               {" world<|eot_id|>", true}};
  EXPECT_EQ(t.encode(plain, false), whole);
}

TEST(SpecialTokens, UserDefinedAlwaysMatched) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for("qwen2");
  const auto ids = t.encode("a<tool_call>b", kRaw);  // user-defined: an added token
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151657), 1) << ids_str(ids);
  const auto ctl = t.encode("a<|im_start|>b", kRaw);  // control: not without parse_special
  EXPECT_EQ(std::count(ctl.begin(), ctl.end(), 151644), 0) << ids_str(ctl);
  EXPECT_EQ(t.decode(ids), "a<tool_call>b");
}

TEST(SpecialTokens, Phi3RstripAndSpacePrefix) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for("phi-3");
  const auto ids = t.encode("<|user|>\nHi<|end|>\n<|assistant|>\n", {.add_special = false, .parse_special = true});
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 32010);
  EXPECT_EQ(ids.back(), 32001);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), t.vocab().byte_token('\n')), 0) << ids_str(ids);
  // Text after a special token gets the SPM space prefix: "Hi" -> "▁Hi".
  EXPECT_EQ(t.token_to_piece(ids[1]), " Hi");
  const Tokenizer& spm = tokenizer_for("llama-spm");
  const auto s = spm.encode("<s>Hello", {.add_special = false, .parse_special = true});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], 1);
  EXPECT_EQ(spm.token_to_piece(s[1]), " Hello");
}

TEST(Stories260K, GoldenPromptsAndText) {
  const fs::path model = kShared / "models" / "stories260K.gguf";
  const fs::path golden = kShared / "golden" / "stories260K.json";
  if (!fs::exists(model) || !fs::exists(golden)) GTEST_SKIP() << "no stories260K model/golden under " << kShared;
  auto tok = Tokenizer::load(model.string());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const Tokenizer& t = **tok;
  const boost::json::value doc = boost::json::parse(read_all(golden));
  const auto& cases = doc.at("cases").as_array();
  int n_text_cases = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i].as_object();
    if (!c.contains("prompt_text")) continue;
    ++n_text_cases;
    auto ids_of = [](const boost::json::value& v) {
      std::vector<TokenId> ids;
      for (const auto& x : v.as_array()) ids.push_back(static_cast<TokenId>(x.as_int64()));
      return ids;
    };
    const std::string prompt(c.at("prompt_text").as_string());
    EXPECT_EQ(t.encode(prompt), ids_of(c.at("prompt_ids"))) << "case " << i << " " << escape(prompt);
    const auto gen = ids_of(c.at("generated_ids"));
    const std::string text(c.at("generated_text").as_string());
    EXPECT_EQ(t.decode(gen), text) << "case " << i;
    check_incremental(t, gen, "golden case " + std::to_string(i));
  }
  EXPECT_EQ(n_text_cases, 3);
  // The brief's own example: case 4.
  EXPECT_EQ(t.encode("Once upon a time"), (std::vector<TokenId>{1, 403, 407, 261, 378}));
  // Leading space rule: kept by default, stripped on request.
  const auto ids = t.encode("Once", {.add_special = false});
  EXPECT_EQ(t.decode(ids), " Once");
  EXPECT_EQ(t.decode(ids, {.strip_leading_space = true}), "Once");
}

// The block split used for long inputs must not change the words.
TEST(PreTokenizer, SafeSplitPointsKeepWords) {
  std::mt19937 rng(5);
  static const char* kBits[] = {"word", " ", "  ", "\n", "\n\n", "\t", "3", "42", "!", "'s", "'S", ".", "\r\n",
                                "\xE4\xB8\xAD", "\xE3\x80\x80", "\xC2\xA0", "A", "z", "\n ", " \n", ",\n", "x\n"};
  std::uniform_int_distribution<size_t> pick(0, std::size(kBits) - 1);
  for (int round = 0; round < 200; ++round) {
    std::string text;
    for (int i = 0; i < 60; ++i) text += kBits[pick(rng)];
    for (PreTokenizerKind kind : {PreTokenizerKind::kDefault, PreTokenizerKind::kLlama3, PreTokenizerKind::kQwen2,
                                  PreTokenizerKind::kGpt2, PreTokenizerKind::kFalcon, PreTokenizerKind::kStarcoder,
                                  PreTokenizerKind::kDeepseekLlm, PreTokenizerKind::kDeepseekCoder}) {
      PreTokenizerScratch scratch;
      std::vector<TextSpan> whole, parts;
      pre_tokenize(kind, text, &whole, &scratch);
      size_t begin = 0;
      while (begin < text.size()) {
        const size_t end = safe_split_point(text, begin + 1);
        std::vector<TextSpan> w;
        pre_tokenize(kind, std::string_view(text).substr(begin, end - begin), &w, &scratch);
        for (TextSpan sp : w) parts.push_back({static_cast<uint32_t>(sp.begin + begin), static_cast<uint32_t>(sp.end + begin)});
        begin = end;
      }
      ASSERT_EQ(whole.size(), parts.size()) << pre_tokenizer_name(kind) << " " << escape(text);
      for (size_t i = 0; i < whole.size(); ++i) {
        ASSERT_TRUE(whole[i].begin == parts[i].begin && whole[i].end == parts[i].end)
            << pre_tokenizer_name(kind) << " word " << i << " of " << escape(text);
      }
    }
  }
}

TEST(Unicode, Flags) {
  EXPECT_TRUE(unicode::is_letter('a'));
  EXPECT_TRUE(unicode::is_letter(0x4E2D));   // 中
  EXPECT_TRUE(unicode::is_number('7'));
  EXPECT_TRUE(unicode::is_number(0x0663));   // Arabic-Indic three
  EXPECT_TRUE(unicode::is_whitespace(' '));
  EXPECT_TRUE(unicode::is_whitespace(0x3000));
  EXPECT_TRUE(unicode::is_whitespace(0x85));
  EXPECT_FALSE(unicode::is_whitespace(0x200B));  // ZERO WIDTH SPACE is not White_Space
  EXPECT_FALSE(unicode::is_whitespace(0x1C));
  EXPECT_TRUE(unicode::flags(0x0301) & unicode::kMark);
  EXPECT_TRUE(unicode::flags('!') & unicode::kPunctuation);
  EXPECT_TRUE(unicode::flags('+') & unicode::kSymbol);
  EXPECT_EQ(unicode::flags(0x110000), 0);
}

TEST(Utf8Holdback, HoldsSplitCharacters) {
  Utf8Holdback h;
  EXPECT_EQ(h.push("\xF0\x9F"), "");
  EXPECT_EQ(h.n_held(), 2u);
  EXPECT_EQ(h.push("\x98"), "");
  EXPECT_EQ(h.push("\x81!"), "\xF0\x9F\x98\x81!");
  EXPECT_EQ(h.push("\xE4\xBD"), "");
  EXPECT_EQ(h.push("x"), "\xEF\xBF\xBD\xEF\xBF\xBDx");  // the sequence was broken
  EXPECT_EQ(h.push("\xE4"), "");
  EXPECT_EQ(h.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(h.n_held(), 0u);
}

TEST(IncrementalDetokenizer, ByteTokensFormOneCharacter) {
  SKIP_WITHOUT_SHARED();
  const Tokenizer& t = tokenizer_for("llama-spm");
  // "你" = E4 BD A0 as three byte tokens.
  const std::vector<TokenId> ids = {t.vocab().byte_token(0xE4), t.vocab().byte_token(0xBD),
                                    t.vocab().byte_token(0xA0)};
  IncrementalDetokenizer d(t);
  EXPECT_EQ(d.push(ids[0]), "");
  EXPECT_EQ(d.push(ids[1]), "");
  EXPECT_EQ(d.push(ids[2]), "\xE4\xBD\xA0");
  EXPECT_EQ(d.flush(), "");
  IncrementalDetokenizer d2(t);
  EXPECT_EQ(d2.push(ids[0]), "");
  EXPECT_EQ(d2.flush(), "\xEF\xBF\xBD");
  // Out-of-range ids are ignored, not a crash.
  EXPECT_EQ(d2.push(-5), "");
  EXPECT_EQ(d2.push(1 << 30), "");
}

}  // namespace
}  // namespace zl
