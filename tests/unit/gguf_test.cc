// GGUF reader and writer: round trips through GgufWriter, hostile files built
// byte by byte (things the writer refuses to produce), truncation and byte
// flips of a valid file, and the real files under ZL_SHARED_DIR.
#include "format/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace zl {
namespace {

namespace fs = std::filesystem;

// --- hand-rolled byte builder -------------------------------------------------

constexpr uint32_t kTypeU8 = 0, kTypeU32 = 4, kTypeBool = 7, kTypeString = 8, kTypeArray = 9,
                   kTypeU64 = 10;
constexpr uint32_t kGgmlF32 = 0, kGgmlQ4_0 = 2;

// Writes GGUF fields exactly as told, valid or not.
class Bytes {
 public:
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& raw(std::string_view s) {
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& str(std::string_view s) { return u64(s.size()).raw(s); }
  Bytes& zeros(size_t n) {
    data.resize(data.size() + n, 0);
    return *this;
  }
  Bytes& pad_to(size_t alignment) {
    data.resize((data.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(kTypeU32).u32(v); }
  Bytes& kv_string(std::string_view key, std::string_view v) {
    return str(key).u32(kTypeString).str(v);
  }
  Bytes& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) u64(n);
    return u32(type).u64(offset);
  }

  std::vector<uint8_t> data;

 private:
  template <typename T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    data.insert(data.end(), p, p + sizeof(T));
    return *this;
  }
};

// Parses from an exact-size heap copy so that ASan sees any over-read.
Result<std::unique_ptr<GgufFile>> parse_copy(const std::vector<uint8_t>& bytes, size_t n,
                                             const GgufLimits& limits,
                                             std::unique_ptr<uint8_t[]>* keep) {
  *keep = std::make_unique<uint8_t[]>(n == 0 ? 1 : n);
  if (n > 0) std::memcpy(keep->get(), bytes.data(), n);
  return GgufFile::parse(keep->get(), n, limits);
}

// A file that must be rejected as corrupt, with `needle` in the message.
void expect_corrupt(const std::vector<uint8_t>& bytes, std::string_view needle,
                    const GgufLimits& limits = {}, ErrorKind kind = ErrorKind::kCorruptFile) {
  std::unique_ptr<uint8_t[]> keep;
  auto r = parse_copy(bytes, bytes.size(), limits, &keep);
  ASSERT_FALSE(r.ok()) << "parsed a file that should fail with: " << needle;
  EXPECT_EQ(r.status().kind(), kind) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << "message '" << r.status().message() << "' lacks '" << needle << "'";
}

std::unique_ptr<GgufFile> parse_ok(const std::vector<uint8_t>& bytes) {
  auto r = GgufFile::parse(bytes.data(), bytes.size());
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// A header with no tensors and one metadata entry, written by `kv`.
template <typename KvFn>
std::vector<uint8_t> one_kv_file(KvFn kv) {
  Bytes b;
  b.header(/*n_tensors=*/0, /*n_kv=*/1);
  kv(b);
  return b.data;
}

void expect_same_value(const GgufValue& a, const GgufValue& b, const std::string& where) {
  ASSERT_EQ(a.type(), b.type()) << where;
  if (a.as_string()) {
    EXPECT_EQ(*a.as_string(), *b.as_string()) << where;
  } else if (a.as_array()) {
    const GgufArray& x = *a.as_array();
    const GgufArray& y = *b.as_array();
    ASSERT_EQ(x.elem_type, y.elem_type) << where;
    ASSERT_EQ(x.items.size(), y.items.size()) << where;
    for (size_t i = 0; i < x.items.size(); ++i) {
      expect_same_value(x.items[i], y.items[i], where + "[" + std::to_string(i) + "]");
    }
  } else {
    EXPECT_EQ(a.raw_bits(), b.raw_bits()) << where;
  }
}

std::string temp_path(std::string_view name) {
  return (fs::temp_directory_path() /
          (std::string(name) + "." + std::to_string(::getpid()) + ".gguf"))
      .string();
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Byte i of tensor t in the test fills.
uint8_t pattern(int t, uint64_t i) {
  return static_cast<uint8_t>(i * 31 + t * 7 + 1);
}

GgufWriter::DataFn pattern_fill(int t) {
  return [t](uint8_t* dst, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = pattern(t, i);
  };
}

// A small valid file exercising every section: used for truncation and flips.
std::vector<uint8_t> small_valid_file() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("llama.block_count", GgufValue::u32(2));
  w.set("flag", GgufValue::boolean(true));
  w.set("scores", GgufValue::f32_array({0.5f, -1.0f}));
  w.set("tokens", GgufValue::string_array({"a", "", "bc"}));
  w.add_tensor("b", GgmlType::kQ4_0, {32}, pattern_fill(1));
  w.add_tensor("a", GgmlType::kF32, {4, 2}, pattern_fill(0));  // 32 bytes: the file ends with it
  return w.to_bytes();
}

// --- GgufValue -----------------------------------------------------------------

TEST(GgufValueTest, IntegerAccessors) {
  EXPECT_EQ(GgufValue::u8(200).as_int(), 200);
  EXPECT_EQ(GgufValue::i8(-5).as_int(), -5);
  EXPECT_EQ(GgufValue::i8(-5).as_uint(), std::nullopt);
  EXPECT_EQ(GgufValue::u16(65535).as_uint(), 65535u);
  EXPECT_EQ(GgufValue::i16(-32768).as_int(), -32768);
  EXPECT_EQ(GgufValue::u32(4000000000u).as_int(), 4000000000LL);
  EXPECT_EQ(GgufValue::i32(-7).as_float(), -7.0);
  EXPECT_EQ(GgufValue::i64(INT64_MIN).as_int(), INT64_MIN);
  EXPECT_EQ(GgufValue::u64(UINT64_MAX).as_int(), std::nullopt);
  EXPECT_EQ(GgufValue::u64(UINT64_MAX).as_uint(), UINT64_MAX);
  EXPECT_EQ(GgufValue::u64(1ull << 63).as_float(), 9223372036854775808.0);
  EXPECT_EQ(GgufValue::u64(INT64_MAX).as_int(), INT64_MAX);
  EXPECT_TRUE(GgufValue::u8(1).is_integer());
  EXPECT_FALSE(GgufValue::boolean(true).is_integer());
  EXPECT_EQ(GgufValue::u8(1).as_bool(), std::nullopt);
  EXPECT_EQ(GgufValue::u8(1).as_string(), nullptr);
  EXPECT_EQ(GgufValue::u8(1).as_array(), nullptr);
}

TEST(GgufValueTest, FloatBoolStringAccessors) {
  EXPECT_EQ(GgufValue::f32(1.5f).as_float(), 1.5);
  EXPECT_EQ(GgufValue::f32(1.5f).type(), GgufValueType::kFloat32);
  EXPECT_EQ(GgufValue::f32(1.5f).as_int(), std::nullopt);
  EXPECT_EQ(GgufValue::f64(-2.25).as_float(), -2.25);
  EXPECT_TRUE(GgufValue::f64(0).is_float());
  EXPECT_EQ(GgufValue::boolean(true).as_bool(), true);
  EXPECT_EQ(GgufValue::boolean(false).as_bool(), false);
  EXPECT_EQ(GgufValue::boolean(true).as_int(), 1);
  EXPECT_EQ(GgufValue::boolean(true).as_float(), std::nullopt);
  GgufValue s = GgufValue::string("héllo");
  ASSERT_NE(s.as_string(), nullptr);
  EXPECT_EQ(*s.as_string(), "héllo");
  EXPECT_EQ(s.as_int(), std::nullopt);
  EXPECT_EQ(gguf_value_type_name(GgufValueType::kFloat64), "float64");
}

TEST(GgufValueTest, ArrayBuilders) {
  GgufValue a = GgufValue::string_array({"x", "yz"});
  ASSERT_NE(a.as_array(), nullptr);
  EXPECT_EQ(a.as_array()->elem_type, GgufValueType::kString);
  EXPECT_EQ(*a.as_array()->items[1].as_string(), "yz");
  GgufValue f = GgufValue::f32_array({1.f, 2.f});
  EXPECT_EQ(f.as_array()->items[1].as_float(), 2.0);
  GgufValue i = GgufValue::i32_array({-1, 3});
  EXPECT_EQ(i.as_array()->elem_type, GgufValueType::kInt32);
  EXPECT_EQ(i.as_array()->items[0].as_int(), -1);
}

// --- writer -> reader round trips ----------------------------------------------

std::vector<std::pair<std::string, GgufValue>> every_value_type() {
  GgufArray nested{.elem_type = GgufValueType::kArray, .items = {}};
  nested.items.push_back(GgufValue::string_array({"a", "", "ünïcødé ✓"}));
  nested.items.push_back(GgufValue::string_array({}));
  GgufArray deeper{.elem_type = GgufValueType::kArray,
                   .items = {GgufValue::array(nested), GgufValue::array(nested)}};
  GgufArray bools{.elem_type = GgufValueType::kBool,
                  .items = {GgufValue::boolean(true), GgufValue::boolean(false)}};
  GgufArray u64s{.elem_type = GgufValueType::kUint64,
                 .items = {GgufValue::u64(UINT64_MAX), GgufValue::u64(0)}};
  GgufArray f64s{.elem_type = GgufValueType::kFloat64,
                 .items = {GgufValue::f64(-0.0), GgufValue::f64(1e300)}};
  return {
      {"t.u8", GgufValue::u8(255)},
      {"t.i8", GgufValue::i8(-128)},
      {"t.u16", GgufValue::u16(65535)},
      {"t.i16", GgufValue::i16(-32768)},
      {"t.u32", GgufValue::u32(UINT32_MAX)},
      {"t.i32", GgufValue::i32(INT32_MIN)},
      {"t.f32", GgufValue::f32(-3.25f)},
      {"t.f32_nan", GgufValue::f32(std::bit_cast<float>(0x7fc00123u))},
      {"t.bool_true", GgufValue::boolean(true)},
      {"t.bool_false", GgufValue::boolean(false)},
      {"t.string", GgufValue::string("hello")},
      {"t.string_empty", GgufValue::string("")},
      {"t.string_utf8", GgufValue::string("日本語 🙂 \xc3\xa9")},
      {"t.string_nul", GgufValue::string(std::string("a\0b", 3))},
      {"t.u64", GgufValue::u64(UINT64_MAX)},
      {"t.i64", GgufValue::i64(INT64_MIN)},
      {"t.f64", GgufValue::f64(3.141592653589793)},
      {"t.array_empty", GgufValue::array({.elem_type = GgufValueType::kUint8, .items = {}})},
      {"t.array_i32", GgufValue::i32_array({1, -2, 3})},
      {"t.array_f32", GgufValue::f32_array({0.5f})},
      {"t.array_bool", GgufValue::array(bools)},
      {"t.array_u64", GgufValue::array(u64s)},
      {"t.array_f64", GgufValue::array(f64s)},
      {"t.array_nested", GgufValue::array(nested)},
      {"t.array_deeper", GgufValue::array(deeper)},
  };
}

TEST(GgufRoundTripTest, EveryValueTypeThroughParse) {
  GgufWriter w;
  auto kv = every_value_type();
  for (const auto& [k, v] : kv) w.set(k, v);
  std::vector<uint8_t> bytes = w.to_bytes();
  auto f = parse_ok(bytes);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->metadata().size(), kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(f->metadata()[i].first, kv[i].first);  // file order kept
    expect_same_value(f->metadata()[i].second, kv[i].second, kv[i].first);
    ASSERT_NE(f->find(kv[i].first), nullptr);
  }
  EXPECT_EQ(f->get_string("t.string_utf8").value(), "日本語 🙂 \xc3\xa9");
  EXPECT_EQ(f->get_string("t.string_nul").value().size(), 3u);
  EXPECT_EQ(f->get_int("t.i64").value(), INT64_MIN);
  EXPECT_EQ(f->get_float("t.f32").value(), -3.25);
  EXPECT_EQ(f->get_bool("t.bool_false").value(), false);
  EXPECT_EQ(f->get_array("t.array_deeper")->items.size(), 2u);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(bytes.size() % 32, 0u);
}

TEST(GgufRoundTripTest, WriteThenOpenMapsTensorData) {
  GgufWriter w;
  for (const auto& [k, v] : every_value_type()) w.set(k, v);
  w.set_alignment(64);
  w.add_tensor("blk.0.w", GgmlType::kF32, {8, 3}, pattern_fill(0));
  w.add_tensor("blk.0.q", GgmlType::kQ4_0, {64, 2}, pattern_fill(1));
  w.add_tensor("norm", GgmlType::kF16, {5}, pattern_fill(2));
  w.add_tensor("cube", GgmlType::kQ8_0, {32, 2, 3, 1}, pattern_fill(3));
  const std::string path = temp_path("gguf_roundtrip");
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  ASSERT_TRUE(w.write(path, [&](uint64_t done, uint64_t total) {
                 progress.emplace_back(done, total);
               }).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const GgufFile& f = **r;
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_int("general.alignment").value(), 64);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().first, f.file_size());
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].second, f.file_size());
    if (i > 0) {
      EXPECT_GE(progress[i].first, progress[i - 1].first);
    }
  }
  const std::vector<std::tuple<std::string, GgmlType, std::array<int64_t, 4>, uint64_t>> want = {
      {"blk.0.w", GgmlType::kF32, {8, 3, 1, 1}, 96},
      {"blk.0.q", GgmlType::kQ4_0, {64, 2, 1, 1}, 72},
      {"norm", GgmlType::kF16, {5, 1, 1, 1}, 10},
      {"cube", GgmlType::kQ8_0, {32, 2, 3, 1}, 204},
  };
  ASSERT_EQ(f.tensors().size(), want.size());
  for (size_t t = 0; t < want.size(); ++t) {
    const GgufTensor* tensor = f.find_tensor(std::get<0>(want[t]));
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(tensor, &f.tensors()[t]);
    EXPECT_EQ(tensor->type, std::get<1>(want[t]));
    EXPECT_EQ(tensor->ne, std::get<2>(want[t]));
    EXPECT_EQ(tensor->n_bytes, std::get<3>(want[t]));
    EXPECT_EQ(tensor->offset % 64, 0u);
    for (uint64_t i = 0; i < tensor->n_bytes; ++i) {
      ASSERT_EQ(tensor->data[i], pattern(static_cast<int>(t), i)) << tensor->name << " byte " << i;
    }
  }
  EXPECT_EQ(f.find_tensor("cube")->n_dims, 4);
  EXPECT_EQ(f.find_tensor("cube")->n_elements(), 192);
  EXPECT_EQ(f.find_tensor("cube")->n_rows(), 6);
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
  EXPECT_EQ(read_file(path), w.to_bytes());
  fs::remove(path);
}

TEST(GgufRoundTripTest, PaddingBytesAreZero) {
  GgufWriter w;
  w.set("k", GgufValue::u8(7));
  auto fill_ff = [](uint8_t* dst, uint64_t n) { std::memset(dst, 0xff, n); };
  w.add_tensor("x", GgmlType::kF32, {3}, fill_ff);
  w.add_tensor("y", GgmlType::kF32, {5}, fill_ff);
  std::vector<uint8_t> bytes = w.to_bytes();
  // header: 24 + kv (8+1 key, 4 type, 1 value) + two infos (8+1 name, 4, 8, 4, 8) = 104
  const size_t header_end = 24 + 14 + 2 * 33;
  auto f = parse_ok(bytes);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->data_offset(), 128u);
  EXPECT_EQ(f->find_tensor("y")->offset, 32u);
  EXPECT_EQ(bytes.size(), 128u + 64u);
  for (size_t i = header_end; i < bytes.size(); ++i) {
    const bool in_x = i >= 128 && i < 128 + 12;
    const bool in_y = i >= 160 && i < 160 + 20;
    EXPECT_EQ(bytes[i], (in_x || in_y) ? 0xff : 0x00) << "byte " << i;
  }
}

TEST(GgufRoundTripTest, SetReplacesKeepingOrder) {
  GgufWriter w;
  w.set("a", GgufValue::u8(1));
  w.set("b", GgufValue::u8(2));
  w.set("a", GgufValue::string("x"));
  auto f = parse_ok(w.to_bytes());
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].first, "a");
  EXPECT_EQ(f->get_string("a").value(), "x");
  EXPECT_EQ(f->metadata()[1].first, "b");
}

TEST(GgufRoundTripTest, NullFillWritesZeros) {
  GgufWriter w;
  w.add_tensor("z", GgmlType::kF32, {4}, nullptr);
  auto bytes = w.to_bytes();
  auto f = parse_ok(bytes);
  ASSERT_NE(f, nullptr);
  for (uint64_t i = 0; i < 16; ++i) EXPECT_EQ(f->tensors()[0].data[i], 0);
}

// --- getters -----------------------------------------------------------------------

TEST(GgufGetterTest, NotFoundAndWrongTypeNameTheKey) {
  GgufWriter w;
  w.set("s", GgufValue::string("v"));
  w.set("u", GgufValue::u16(9));
  w.set("big", GgufValue::u64(UINT64_MAX));
  w.set("b", GgufValue::boolean(true));
  w.set("arr", GgufValue::i32_array({1}));
  auto f = parse_ok(w.to_bytes());
  ASSERT_NE(f, nullptr);

  auto missing = f->get_string("nope.key");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.key"), std::string::npos);
  EXPECT_EQ(f->get_int("nope").status().kind(), ErrorKind::kNotFound);
  EXPECT_EQ(f->get_float("nope").status().kind(), ErrorKind::kNotFound);
  EXPECT_EQ(f->get_bool("nope").status().kind(), ErrorKind::kNotFound);

  auto wrong = f->get_int("s");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().kind(), ErrorKind::kCorruptFile);
  EXPECT_NE(wrong.status().message().find("'s'"), std::string::npos);
  EXPECT_EQ(f->get_string("u").status().kind(), ErrorKind::kCorruptFile);
  EXPECT_EQ(f->get_bool("u").status().kind(), ErrorKind::kCorruptFile);
  EXPECT_EQ(f->get_int("b").status().kind(), ErrorKind::kCorruptFile);
  EXPECT_EQ(f->get_float("s").status().kind(), ErrorKind::kCorruptFile);
  EXPECT_EQ(f->get_int("big").status().kind(), ErrorKind::kCorruptFile);

  EXPECT_EQ(f->get_int("u").value(), 9);
  EXPECT_EQ(f->get_float("u").value(), 9.0);
  EXPECT_EQ(f->get_bool("b").value(), true);
  EXPECT_NE(f->get_array("arr"), nullptr);
  EXPECT_EQ(f->get_array("s"), nullptr);
  EXPECT_EQ(f->get_array("nope"), nullptr);
}

// --- hostile files: header -------------------------------------------------------

TEST(GgufCorruptTest, BadMagic) {
  Bytes b;
  b.raw("GGUG").u32(3).u64(0).u64(0);
  expect_corrupt(b.data, "not a GGUF file");
  expect_corrupt({}, "not a GGUF file");
  expect_corrupt({'G', 'G'}, "not a GGUF file");
}

TEST(GgufCorruptTest, Versions) {
  expect_corrupt(Bytes().header(0, 0, /*version=*/1).data, "version 1 is not supported", {},
                 ErrorKind::kUnsupported);
  expect_corrupt(Bytes().header(0, 0, /*version=*/4).data, "unknown GGUF version 4");
  expect_corrupt(Bytes().header(0, 0, /*version=*/0).data, "unknown GGUF version 0");
  expect_corrupt(Bytes().header(0, 0, /*version=*/0x03000000).data, "big-endian", {},
                 ErrorKind::kUnsupported);
  // Version 2 has the same layout as 3.
  auto f = parse_ok(Bytes().header(0, 1, /*version=*/2).kv_u32("x", 5).data);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->get_int("x").value(), 5);
}

TEST(GgufCorruptTest, TruncatedHeader) {
  expect_corrupt(Bytes().raw("GGUF").u32(3).u64(0).data,
                 "unexpected end of file at offset 16 reading metadata count");
}

TEST(GgufCorruptTest, HugeCountsRejectedBeforeAllocating) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_corrupt(Bytes().header(0, 1ull << 60).data,
                 "metadata count 1152921504606846976 exceeds the limit");
  expect_corrupt(Bytes().header(1ull << 60, 0).data,
                 "tensor count 1152921504606846976 exceeds the limit");
  expect_corrupt(Bytes().header(UINT64_MAX, UINT64_MAX).data, "exceeds the limit");
  // Within the limits but more than the file can hold.
  expect_corrupt(Bytes().header(0, 1000).kv_u32("a", 1).data,
                 "1000 metadata entries (14+ bytes each) and 0 tensor infos");
  expect_corrupt(Bytes().header(1000, 0).zeros(100).data,
                 "cannot fit in the 100 bytes left after the header");
  // With no limits at all, the bytes-left check alone must stop them.
  GgufLimits unlimited{.max_kv = UINT64_MAX >> 8, .max_tensors = UINT64_MAX >> 8};
  expect_corrupt(Bytes().header(1ull << 50, 1ull << 50).data, "cannot fit", unlimited);
  const auto ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 100.0);
}

// --- hostile files: metadata --------------------------------------------------------

TEST(GgufCorruptTest, StringLengthPastEof) {
  expect_corrupt(Bytes().header(0, 1).u64(100).raw("abcdefghijklmnop").data,
                 "key at offset 24: length 100 runs past the end of the file (16 bytes left)");
  expect_corrupt(one_kv_file([](Bytes& b) { b.str("k").u32(kTypeString).u64(50).raw("short"); }),
                 "metadata key 'k': string at offset");
}

TEST(GgufCorruptTest, HugeStringLength) {
  expect_corrupt(
      one_kv_file([](Bytes& b) { b.str("k").u32(kTypeString).u64(1ull << 62).raw("x"); }),
      "exceeds the limit of 67108864 bytes");
  expect_corrupt(Bytes().header(0, 1).u64(UINT64_MAX).zeros(16).data, "key at offset 24: length");
  GgufLimits small{.max_string_bytes = 4};
  expect_corrupt(one_kv_file([](Bytes& b) { b.kv_string("k", "hello"); }),
                 "exceeds the limit of 4 bytes", small);
}

TEST(GgufCorruptTest, ArrayCountPastEof) {
  expect_corrupt(
      one_kv_file(
          [](Bytes& b) { b.str("k").u32(kTypeArray).u32(kTypeU32).u64(1000).u32(1).u32(2); }),
      "array of 1000 uint32 items at offset 37 needs at least 4000 bytes but only 8 are left");
  expect_corrupt(one_kv_file([](Bytes& b) {
                   b.str("k").u32(kTypeArray).u32(kTypeString).u64(1000).zeros(100);
                 }),
                 "needs at least 8000 bytes");
  expect_corrupt(one_kv_file([](Bytes& b) {
                   b.str("k").u32(kTypeArray).u32(kTypeArray).u64(1000).zeros(100);
                 }),
                 "needs at least 12000 bytes");
  expect_corrupt(one_kv_file([](Bytes& b) {
                   b.str("k").u32(kTypeArray).u32(kTypeU8).u64(1ull << 40).zeros(8);
                 }),
                 "array count 1099511627776 exceeds the limit");
  GgufLimits few{.max_total_items = 5};
  expect_corrupt(
      one_kv_file([](Bytes& b) { b.str("k").u32(kTypeArray).u32(kTypeU8).u64(6).zeros(6); }),
      "more than 5 items in total", few);
  // A string inside an array that overruns: the item is named.
  expect_corrupt(one_kv_file([](Bytes& b) {
                   b.str("k").u32(kTypeArray).u32(kTypeString).u64(2).str("a").u64(9);
                 }),
                 "metadata key 'k': array item 1: string at offset");
}

// `levels` arrays nested in one another around a single u8.
std::vector<uint8_t> nested_arrays(int levels) {
  Bytes b;
  b.header(0, 1).str("deep").u32(kTypeArray);
  for (int i = 1; i < levels; ++i) b.u32(kTypeArray).u64(1);
  b.u32(kTypeU8).u64(1).u8(42);
  return b.data;
}

TEST(GgufCorruptTest, NestedArraysTooDeep) {
  auto f = parse_ok(nested_arrays(8));
  ASSERT_NE(f, nullptr);
  const GgufArray* a = f->get_array("deep");
  for (int i = 1; i < 8; ++i) a = a->items.at(0).as_array();
  EXPECT_EQ(a->items.at(0).as_int(), 42);
  expect_corrupt(nested_arrays(9), "arrays nested deeper than 8 levels");
  expect_corrupt(nested_arrays(1000), "arrays nested deeper than 8 levels");
}

TEST(GgufCorruptTest, UnknownValueType) {
  expect_corrupt(one_kv_file([](Bytes& b) { b.str("k").u32(13).u32(0); }),
                 "metadata key 'k': unknown value type 13");
  expect_corrupt(one_kv_file([](Bytes& b) { b.str("k").u32(kTypeArray).u32(0xffffffff).u64(0); }),
                 "unknown array element type 4294967295");
}

TEST(GgufCorruptTest, BoolMustBeZeroOrOne) {
  expect_corrupt(one_kv_file([](Bytes& b) { b.str("k").u32(kTypeBool).u8(2); }),
                 "bool at offset 37 has value 2");
  expect_corrupt(one_kv_file([](Bytes& b) {
                   b.str("k").u32(kTypeArray).u32(kTypeBool).u64(3).u8(1).u8(0).u8(255);
                 }),
                 "array item 2: bool has value 255");
}

TEST(GgufCorruptTest, BadKeys) {
  expect_corrupt(Bytes().header(0, 2).kv_u32("dup", 1).kv_u32("dup", 2).data,
                 "duplicate metadata key 'dup'");
  expect_corrupt(Bytes().header(0, 1).kv_u32("", 1).data,
                 "metadata entry 0 of 1: empty metadata key");
  expect_corrupt(Bytes().header(0, 1).kv_u32("a\nb", 1).data,
                 "'a\\x0ab' contains a control character");
  expect_corrupt(Bytes().header(0, 1).str("k").u32(kTypeU32).u8(1).data,
                 "metadata key 'k': unexpected end of file");
}

TEST(GgufCorruptTest, BadAlignment) {
  auto with_alignment = [](auto kv) {
    Bytes b;
    b.header(1, 1);
    kv(b);
    b.tensor("t", {4}, kGgmlF32, 0).pad_to(64).zeros(16);
    return b.data;
  };
  expect_corrupt(with_alignment([](Bytes& b) { b.kv_u32("general.alignment", 0); }),
                 "not a power of two");
  expect_corrupt(with_alignment([](Bytes& b) { b.kv_u32("general.alignment", 3); }),
                 "is 3, which is not a power");
  expect_corrupt(with_alignment([](Bytes& b) { b.kv_u32("general.alignment", 48); }),
                 "not a power of two");
  expect_corrupt(with_alignment([](Bytes& b) { b.str("general.alignment").u32(kTypeU64).u64(64); }),
                 "general.alignment has type uint64, expected uint32");
  auto f = parse_ok(with_alignment([](Bytes& b) { b.kv_u32("general.alignment", 64); }));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset(), 128u);
}

// --- hostile files: tensors -----------------------------------------------------------

// A file with the given tensor infos, default alignment, and `data_bytes` of data.
std::vector<uint8_t> tensors_file(const std::function<void(Bytes&)>& infos, uint64_t n_tensors,
                                  size_t data_bytes) {
  Bytes b;
  b.header(n_tensors, 0);
  infos(b);
  b.pad_to(32).zeros(data_bytes);
  return b.data;
}

TEST(GgufCorruptTest, TensorPlacement) {
  // Sanity: a valid two-tensor file, the second ending exactly at EOF.
  auto good = [](Bytes& b) { b.tensor("a", {8}, kGgmlF32, 0).tensor("b", {4}, kGgmlF32, 32); };
  auto f = parse_ok(tensors_file(good, 2, 48));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->find_tensor("b")->data, f->find_tensor("a")->data + 32);

  expect_corrupt(tensors_file(good, 2, 47),
                 "tensor 'b': data [128, 144) lies past the end of the file (size 143)");
  expect_corrupt(
      tensors_file(
          [](Bytes& b) {
            b.tensor("blk.0.attn_q.weight", {8, 8}, kGgmlF32, 0);
          },
          1, 100),
      "tensor 'blk.0.attn_q.weight': data [96, 352) lies past the end of the file (size 196)");
  // Overlaps: a tensor must start where the one before it ends.
  expect_corrupt(
      tensors_file([](Bytes& b) { b.tensor("a", {8}, kGgmlF32, 0).tensor("b", {8}, kGgmlF32, 0); },
                   2, 64),
      "tensor 'b' has offset 0, expected 32 (the end of 'a' [0, 32) aligned to 32)");
  expect_corrupt(tensors_file(
                     [](Bytes& b) {
                       b.tensor("big", {64}, kGgmlF32, 0)
                           .tensor("x", {4}, kGgmlF32, 64)
                           .tensor("y", {4}, kGgmlF32, 128);
                     },
                     3, 256),
                 "tensor 'x' has offset 64, expected 256");
  expect_corrupt(tensors_file([](Bytes& b) { b.tensor("a", {4}, kGgmlF32, 16); }, 1, 64),
                 "tensor 'a': offset 16 is not a multiple of the alignment 32");
  expect_corrupt(
      tensors_file([](Bytes& b) { b.tensor("a", {4}, kGgmlF32, UINT64_MAX - 31); }, 1, 64),
      "overflows");
  expect_corrupt(tensors_file([](Bytes& b) { b.tensor("a", {4}, kGgmlF32, 1ull << 40); }, 1, 64),
                 "lies past the end of the file");
  expect_corrupt(
      tensors_file([](Bytes& b) { b.tensor("a", {4}, kGgmlF32, 0).tensor("a", {4}, kGgmlF32, 32); },
                   2, 64),
      "duplicate tensor name 'a'");
}

// Each tensor at the running offset, as llama.cpp's reader requires (review
// 22 #3): a gap between tensors means some declared size does not match the
// data written (a tensor re-typed to a smaller type, say), so it is refused,
// naming the tensor, its offset and the expected one.
TEST(GgufCorruptTest, TensorsLieBackToBackInInfoOrder) {
  // A 16-byte tensor is followed at 32: the running offset is aligned up.
  auto f = parse_ok(tensors_file(
      [](Bytes& b) { b.tensor("a", {4}, kGgmlF32, 0).tensor("b", {4}, kGgmlF32, 32); }, 2, 48));
  ASSERT_NE(f, nullptr);
  // A gap of one alignment unit after 'a'.
  expect_corrupt(
      tensors_file([](Bytes& b) { b.tensor("a", {8}, kGgmlF32, 0).tensor("b", {4}, kGgmlF32, 64); },
                   2, 80),
      "tensor 'b' has offset 64, expected 32 (the end of 'a' [0, 32) aligned to 32)");
  // 'a' declared Q4_0 (18 bytes, so 'b' belongs at 32) but spaced as if F32.
  expect_corrupt(
      tensors_file(
          [](Bytes& b) { b.tensor("a", {32}, kGgmlQ4_0, 0).tensor("b", {4}, kGgmlF32, 128); }, 2,
          144),
      "tensor 'b' has offset 128, expected 32 (the end of 'a' [0, 18) aligned to 32)");
  // The first tensor starts the data section.
  expect_corrupt(tensors_file([](Bytes& b) { b.tensor("a", {4}, kGgmlF32, 32); }, 1, 48),
                 "tensor 'a' has offset 32, expected 0 (the start of the data section)");
  // No gap and no overlap, but not in info order.
  expect_corrupt(
      tensors_file([](Bytes& b) { b.tensor("a", {8}, kGgmlF32, 32).tensor("b", {8}, kGgmlF32, 0); },
                   2, 64),
      "tensor 'a' has offset 32, expected 0");
  // An empty tensor takes no room: the next one starts at the same offset.
  f = parse_ok(tensors_file(
      [](Bytes& b) {
        b.tensor("w", {4}, kGgmlF32, 0).tensor("empty", {0}, kGgmlF32, 32).tensor("v", {4}, kGgmlF32, 32);
      },
      3, 48));
  ASSERT_NE(f, nullptr);
  // The file's own alignment rounds the running offset: 80 bytes end at 128 with 64.
  auto aligned64 = [](uint64_t second) {
    Bytes b;
    b.header(2, 1).kv_u32("general.alignment", 64);
    b.tensor("a", {20}, kGgmlF32, 0).tensor("b", {4}, kGgmlF32, second).pad_to(64).zeros(second + 16);
    return b.data;
  };
  f = parse_ok(aligned64(128));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->find_tensor("b")->data, f->find_tensor("a")->data + 128);
  expect_corrupt(aligned64(192), "tensor 'b' has offset 192, expected 128 (the end of 'a' [0, 80) aligned to 64)");
}

TEST(GgufCorruptTest, TensorShapesAndTypes) {
  auto one = [](std::vector<uint64_t> ne, uint32_t type) {
    return tensors_file([&](Bytes& b) { b.tensor("w", ne, type, 0); }, 1, 64);
  };
  expect_corrupt(one({}, kGgmlF32), "tensor 'w': n_dims is 0, expected 1 to 4");
  expect_corrupt(one({1, 1, 1, 1, 1}, kGgmlF32), "n_dims is 5");
  expect_corrupt(one({4, UINT64_MAX}, kGgmlF32), "tensor 'w': dimension 1 is negative (-1)");
  expect_corrupt(one({1ull << 32, 1ull << 32}, kGgmlF32), "element count overflows");
  expect_corrupt(one({1ull << 62}, kGgmlF32), "byte size overflows");
  expect_corrupt(one({33}, kGgmlQ4_0), "row length 33 is not a multiple of the Q4_0 block size 32");
  expect_corrupt(one({4}, 4), "tensor 'w': unknown ggml type id 4");
  expect_corrupt(one({4}, 1000), "unknown ggml type id 1000");
  expect_corrupt(tensors_file([](Bytes& b) { b.str("").u32(1).u64(4).u32(0).u64(0); }, 1, 64),
                 "tensor info 0 of 1: empty tensor name");
  // Empty tensors are legal and overlap nothing.
  auto f = parse_ok(tensors_file(
      [](Bytes& b) {
        b.tensor("empty", {0, 4}, kGgmlF32, 0).tensor("w", {4}, kGgmlF32, 0);
      },
      2, 16));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->find_tensor("empty")->n_bytes, 0u);
}

TEST(GgufCorruptTest, FileWithoutTensorsNeedsNoPadding) {
  auto f = parse_ok(Bytes().header(0, 1).kv_string("tokenizer.ggml.model", "gpt2").data);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model").value(), "gpt2");
}

// Every proper prefix of a file with tensor data is corrupt; none may crash or over-read.
TEST(GgufCorruptTest, TruncatedAtEveryPrefix) {
  const std::vector<uint8_t> bytes = small_valid_file();
  auto f = parse_ok(bytes);
  ASSERT_NE(f, nullptr);
  const GgufTensor& last = f->tensors().back();
  ASSERT_EQ(f->data_offset() + last.offset + last.n_bytes, bytes.size());  // no trailing padding
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::unique_ptr<uint8_t[]> keep;
    auto r = parse_copy(bytes, n, {}, &keep);
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    ASSERT_EQ(r.status().kind(), ErrorKind::kCorruptFile) << n << ": " << r.status().to_string();
  }
}

// Single-byte corruptions anywhere: parsing may succeed or fail but must stay in bounds.
TEST(GgufCorruptTest, ByteFlipsStayInBounds) {
  const std::vector<uint8_t> bytes = small_valid_file();
  int n_ok = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t v :
         {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}, static_cast<uint8_t>(bytes[i] ^ 1)}) {
      std::vector<uint8_t> mutated = bytes;
      mutated[i] = v;
      std::unique_ptr<uint8_t[]> keep;
      auto r = parse_copy(mutated, mutated.size(), {}, &keep);
      if (!r.ok()) continue;
      ++n_ok;
      for (const GgufTensor& t : (*r)->tensors()) {
        ASSERT_GE(t.data, keep.get());
        ASSERT_LE(t.data + t.n_bytes, keep.get() + mutated.size());
      }
    }
  }
  EXPECT_GT(n_ok, 0);  // flips inside tensor data and values stay valid
}

// --- files on disk ---------------------------------------------------------------------

// own_data: the kept tensors' bytes move into memory of the file object's
// own, the others' data become null, and the file is unmapped: truncating
// or rewriting it on disk afterwards changes nothing the process reads (it
// would be a SIGBUS or other bytes through the mapping).
TEST(GgufOpenTest, OwnDataDetachesTheTensorsFromTheFile) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  w.add_tensor("kept.f32", GgmlType::kF32, {8, 3}, pattern_fill(0));
  w.add_tensor("dropped.q4", GgmlType::kQ4_0, {64, 2}, pattern_fill(1));
  w.add_tensor("kept.q8", GgmlType::kQ8_0, {32, 2, 3, 1}, pattern_fill(2));
  const std::string path = temp_path("gguf_own_data");
  ASSERT_TRUE(w.write(path).ok());
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  GgufFile& f = **r;
  EXPECT_FALSE(f.owns_data());
  ASSERT_TRUE(f.own_data([](const GgufTensor& t) { return t.name.starts_with("kept."); }).ok());
  EXPECT_TRUE(f.owns_data());
  std::ofstream(path, std::ios::trunc | std::ios::binary) << "overwritten in place";  // shorter: pages gone
  fs::resize_file(path, 0);
  EXPECT_EQ(f.find_tensor("dropped.q4")->data, nullptr);
  for (const auto& [name, t] : std::vector<std::pair<std::string, int>>{{"kept.f32", 0}, {"kept.q8", 2}}) {
    const GgufTensor* tensor = f.find_tensor(name);
    ASSERT_NE(tensor->data, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor->data) % 64, 0u);
    for (uint64_t i = 0; i < tensor->n_bytes; ++i) ASSERT_EQ(tensor->data[i], pattern(t, i)) << name << " byte " << i;
  }
  EXPECT_EQ(f.get_string("general.architecture").value(), "llama");  // metadata: copies all along
  EXPECT_EQ(f.release_pages(*f.find_tensor("kept.f32")), 0u);
  ASSERT_TRUE(f.own_data([](const GgufTensor&) { return true; }).ok());  // a second call: nothing to do
  EXPECT_NE(f.find_tensor("kept.q8")->data, nullptr);
  fs::remove(path);
}

TEST(GgufOpenTest, OsErrors) {
  auto missing = GgufFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/model.gguf"), std::string::npos);
  auto dir = GgufFile::open(fs::temp_directory_path().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().kind(), ErrorKind::kIo);
}

TEST(GgufOpenTest, CorruptFileErrorsNameThePath) {
  const std::string path = temp_path("gguf_corrupt");
  std::ofstream(path, std::ios::binary).close();  // empty
  auto empty = GgufFile::open(path);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().kind(), ErrorKind::kCorruptFile);
  EXPECT_EQ(empty.status().message().rfind(path + ": not a GGUF file", 0), 0u)
      << empty.status().message();

  auto bytes = small_valid_file();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), bytes.size() - 1);
  auto truncated = GgufFile::open(path);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("lies past the end of the file"), std::string::npos);
  fs::remove(path);
}

TEST(GgufOpenTest, WriteReportsUnwritablePath) {
  GgufWriter w;
  w.set("k", GgufValue::u8(1));
  Status st = w.write("/nonexistent/dir/out.gguf");
  EXPECT_EQ(st.kind(), ErrorKind::kIo);
  EXPECT_NE(st.message().find("/nonexistent/dir/out.gguf.tmp"), std::string::npos);
}

// --- scale -------------------------------------------------------------------------------

TEST(GgufScaleTest, LargeVocabParsesQuickly) {
  constexpr int kTokens = 150000;
  std::vector<std::string> tokens, merges;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int i = 0; i < kTokens; ++i) {
    tokens.push_back("tok_" + std::to_string(i));
    merges.push_back("Ġa" + std::to_string(i) + " b" + std::to_string(i % 977));
    scores.push_back(static_cast<float>(-i));
    types.push_back(1);
  }
  GgufWriter w;
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.merges", GgufValue::string_array(merges));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  const std::vector<uint8_t> bytes = w.to_bytes();

  const auto t0 = std::chrono::steady_clock::now();
  auto r = GgufFile::parse(bytes.data(), bytes.size());
  const auto ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const GgufArray* got = (*r)->get_array("tokenizer.ggml.merges");
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(got->items.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(*got->items[12345].as_string(), merges[12345]);
  std::printf("parsed %d tokens + %d merges + scores + types (%zu bytes) in %.1f ms\n", kTokens,
              kTokens, bytes.size(), ms);
  // Speed is reported, not asserted (benchmarks live in bench/, not in tests).
}

// --- real files ------------------------------------------------------------------------------

TEST(GgufRealFileTest, Stories260K) {
  const std::string path = ZL_SHARED_DIR "/models/stories260K.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << "test model absent: " << path;
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.file_size(), 1185376u);
  EXPECT_EQ(f.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f.get_int("llama.embedding_length").value(), 64);
  EXPECT_EQ(f.get_int("llama.block_count").value(), 5);
  EXPECT_EQ(f.get_int("llama.attention.head_count").value(), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv").value(), 4);
  EXPECT_EQ(f.get_int("llama.feed_forward_length").value(), 172);
  EXPECT_NEAR(f.get_float("llama.attention.layer_norm_rms_epsilon").value(), 1e-5, 1e-9);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model").value(), "llama");

  const GgufArray* tokens = f.get_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->elem_type, GgufValueType::kString);
  ASSERT_EQ(tokens->items.size(), 512u);
  EXPECT_EQ(*tokens->items[0].as_string(), "<unk>");
  EXPECT_EQ(*tokens->items[1].as_string(), "<s>");
  EXPECT_EQ(*tokens->items[2].as_string(), "</s>");

  struct Want {
    const char* name;
    std::array<int64_t, 4> ne;
  };
  for (const Want& w :
       {Want{"token_embd.weight", {64, 512, 1, 1}}, Want{"output.weight", {64, 512, 1, 1}},
        Want{"output_norm.weight", {64, 1, 1, 1}}, Want{"blk.0.attn_q.weight", {64, 64, 1, 1}},
        Want{"blk.0.attn_k.weight", {64, 32, 1, 1}},
        Want{"blk.4.ffn_down.weight", {172, 64, 1, 1}}}) {
    const GgufTensor* t = f.find_tensor(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->type, GgmlType::kF32) << w.name;
    EXPECT_EQ(t->ne, w.ne) << w.name;
    EXPECT_EQ(t->n_bytes, static_cast<uint64_t>(t->n_elements()) * 4) << w.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % f.alignment(), 0u)
        << w.name;  // mmap is page-aligned
  }
  EXPECT_EQ(f.tensors().size(), 48u);  // 5 layers x 9 + embd, norm, output
}

// Every GGUF file shipped for the other tests must be accepted.
TEST(GgufRealFileTest, AllSharedFilesOpen) {
  int n_files = 0;
  for (const char* sub : {"models", "vocab"}) {
    const fs::path dir = fs::path(ZL_SHARED_DIR) / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".gguf") continue;
      auto r = GgufFile::open(entry.path().string());
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      if (r.ok()) {
        EXPECT_NE((*r)->get_array("tokenizer.ggml.tokens"), nullptr) << entry.path();
      }
      ++n_files;
    }
  }
  if (n_files == 0) GTEST_SKIP() << "no shared GGUF files under " << ZL_SHARED_DIR;
}

}  // namespace
}  // namespace zl
