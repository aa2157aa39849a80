// GGUF reader and writer (format versions 2 and 3).
//
// The reader treats the file as hostile: every count, length, offset, dimension
// and type is validated with overflow-safe arithmetic before use, and nothing
// is allocated from an unchecked field. Tensor data is mmap'ed read-only and
// never copied; GgufTensor::data points into the mapping, which lives as long
// as the GgufFile.
//
// File layout (little-endian):
//   magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
//   n_kv × { string key, u32 value_type, value },
//   n_tensors × { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset },
//   padding to `general.alignment` (default 32), tensor data section: the
//   tensors back to back in info order, each at the previous one's end
//   aligned up to `general.alignment` (offsets are relative to the section).
//   string = u64 length + bytes (no NUL); array = u32 elem_type, u64 count, elems.
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "format/ggml_type.h"

namespace zl {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view gguf_value_type_name(GgufValueType t);

// `s` in quotes for a message: 'text', every byte outside printable ASCII
// (NUL, control bytes, ESC, UTF-8 sequences), the backslash and the quote as
// \xNN, cut after 100 bytes ("..."). Every message that quotes a string read
// from a GGUF file (a key, a tensor name, the architecture, the tokenizer
// model, a token) goes through it: a file cannot put control bytes on a
// terminal or cut a message short with a NUL.
std::string gguf_quoted(std::string_view s);

class GgufValue;
struct GgufArray {
  GgufValueType elem_type = GgufValueType::kUint8;
  std::vector<GgufValue> items;  // all of elem_type (arrays may nest)
};

// One metadata value. Integers are stored widened; type() keeps the on-disk type.
class GgufValue {
 public:
  GgufValue() = default;
  static GgufValue u8(uint8_t v) { return scalar(GgufValueType::kUint8, v); }
  static GgufValue i8(int8_t v) { return scalar(GgufValueType::kInt8, v); }
  static GgufValue u16(uint16_t v) { return scalar(GgufValueType::kUint16, v); }
  static GgufValue i16(int16_t v) { return scalar(GgufValueType::kInt16, v); }
  static GgufValue u32(uint32_t v) { return scalar(GgufValueType::kUint32, v); }
  static GgufValue i32(int32_t v) { return scalar(GgufValueType::kInt32, v); }
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v) { return scalar(GgufValueType::kInt64, v); }
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v) { return scalar(GgufValueType::kBool, v ? 1 : 0); }
  static GgufValue string(std::string v);
  static GgufValue array(GgufArray v);
  // Convenience builders for the common homogeneous arrays.
  static GgufValue string_array(const std::vector<std::string>& v);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue i32_array(const std::vector<int32_t>& v);

  GgufValueType type() const { return type_; }
  bool is_integer() const;  // any of the 8 integer types (not bool)
  bool is_float() const { return type_ == GgufValueType::kFloat32 || type_ == GgufValueType::kFloat64; }

  // Integer value of any integer type (u64 above INT64_MAX -> nullopt); bool -> 0/1.
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;  // non-negative integers only
  // Float value of f32/f64, and of integer types (converted).
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;        // kBool only
  const std::string* as_string() const;       // kString only, else nullptr
  const GgufArray* as_array() const;          // kArray only, else nullptr

  // Raw storage for the writer and round-trip tests.
  uint64_t raw_bits() const { return bits_; }

 private:
  static GgufValue scalar(GgufValueType t, int64_t v);
  GgufValueType type_ = GgufValueType::kUint8;
  uint64_t bits_ = 0;  // integer (sign-extended), bool, or float bits (f32 as float bits in low 32)
  std::shared_ptr<const std::string> str_;
  std::shared_ptr<const GgufArray> arr_;
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  int n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ne[0] is the row length (contiguous)
  uint64_t offset = 0;   // relative to the data section
  uint64_t n_bytes = 0;  // validated: ne product × type_size / block_size
  const uint8_t* data = nullptr;  // into the mmap; valid while the GgufFile lives

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

// Limits that bound what a hostile file can make us allocate or loop over.
struct GgufLimits {
  uint64_t max_string_bytes = 64ull << 20;    // one string
  uint64_t max_array_items = 1ull << 26;      // one array (67M)
  uint32_t max_array_depth = 8;               // nested arrays
  uint64_t max_kv = 1ull << 20;
  uint64_t max_tensors = 1ull << 20;
  // Array items in the whole file. A parsed item is a 48-byte GgufValue while
  // a u8 item takes one byte on disk, so this bounds what many maximal arrays
  // could make us allocate (~800 MB); real vocabularies hold ~1M items.
  uint64_t max_total_items = 1ull << 24;
};

class GgufFile {
 public:
  // Opens and validates `path`; mmaps the whole file read-only.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path, const GgufLimits& limits = {});
  // Parses an in-memory image (tests, fuzzing). `bytes` must outlive the GgufFile.
  static Result<std::unique_ptr<GgufFile>> parse(const uint8_t* bytes, size_t size,
                                                 const GgufLimits& limits = {});
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data section
  uint64_t file_size() const { return size_; }
  const std::string& path() const { return path_; }

  // Metadata in file order; lookup by key.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters: NotFound if absent, CorruptFile if the type does not fit.
  Result<std::string> get_string(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;     // any integer type
  Result<double> get_float(std::string_view key) const;    // f32/f64/integers
  Result<bool> get_bool(std::string_view key) const;
  const GgufArray* get_array(std::string_view key) const;  // nullptr if absent or not an array

  // Tensors in file order; lookup by name.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

  // Tells the kernel that `t`'s bytes will not be read in place any more (a
  // copy of them is used instead): the whole pages inside the tensor leave
  // this process's resident set (madvise MADV_DONTNEED on the read-only
  // private mapping; the file's pages stay in the page cache). A later read
  // of them is still correct: it faults the pages in again from the file.
  // No-op for an in-memory image (parse()). Returns the bytes released.
  uint64_t release_pages(const GgufTensor& t) const;

  // Detaches the tensors from the file: the data of each tensor `keep`
  // names is copied into memory of this object's own, every other tensor's
  // data becomes null (its users hold copies of it), and the file is
  // unmapped. From then on the file may be overwritten, truncated or removed
  // on disk without affecting the process. The metadata is unaffected (it is
  // parsed into copies). No-op for an in-memory image (parse()) and after a
  // first call; ResourceExhausted when the copy cannot be allocated.
  Status own_data(const std::function<bool(const GgufTensor&)>& keep);
  // own_data() has run: no tensor data lies in the file's mapping.
  bool owns_data() const { return owned_ != nullptr || (map_ == nullptr && base_ == nullptr); }

 private:
  GgufFile() = default;
  friend class GgufParser;
  std::string path_;
  void* map_ = nullptr;  // munmap'ed on destruction when non-null
  void* owned_ = nullptr;  // own_data()'s copies (anonymous mapping), munmap'ed on destruction
  uint64_t owned_size_ = 0;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF v3 file. Tensor data is produced by a callback at write time so
// that multi-gigabyte models stream to disk without being held in memory.
class GgufWriter {
 public:
  // Fills `dst` (exactly n_bytes, zeroed beforehand) with the tensor's encoded
  // data. A null DataFn writes zeros.
  using DataFn = std::function<void(uint8_t* dst, uint64_t n_bytes)>;

  // Replaces an existing key in place. Setting general.alignment (a uint32
  // power of two, CHECKed) is the same as set_alignment.
  void set(std::string key, GgufValue value);
  void set_alignment(uint64_t alignment);      // also writes general.alignment
  // ne: row length first; 1..4 dims. CHECKs that ne[0] is a multiple of the block size.
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, DataFn fill);

  // Writes the file (to `path`.tmp, then renamed). `progress` (may be null) is
  // called with (bytes_done, bytes_total).
  Status write(const std::string& path,
               const std::function<void(uint64_t, uint64_t)>& progress = nullptr) const;
  // Encodes the whole file into memory (tests).
  std::vector<uint8_t> to_bytes() const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes;
    DataFn fill;
  };
  std::vector<uint8_t> header_bytes() const;  // everything before the data section
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<PendingTensor> tensors_;
  uint64_t alignment_ = 32;
};

}  // namespace zl
