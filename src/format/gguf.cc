// GGUF reader (the writer is gguf_writer.cc). See gguf.h for the format and the contract.
//
// The parser reads through a bounds-checked Reader and validates in this
// order: header counts (against the limits and the bytes left, before any
// reservation), metadata (keys, value types, string and array sizes, bools,
// nesting), `general.alignment`, tensor infos (name, dims, type, block
// geometry, offset alignment), and finally the placement of each tensor's
// data inside the file, back to back in info order. Every error is a
// kCorruptFile (kUnsupported for GGUF v1 and big-endian files) whose message
// names the key, tensor, offset or count at fault.
#include "format/gguf.h"
#include "format/gguf_format.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace zl {
namespace {
using namespace gguf_format;  // NOLINT: the format helpers

class Reader {
 public:
  Reader(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }
  void skip(uint64_t n) { pos_ += n; }  // n <= remaining(), checked by the caller

  template <typename T>
  Status read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) return truncated(sizeof(T), what);
    *out = load<T>(here());
    pos_ += sizeof(T);
    return {};
  }

  // A u64 length and that many bytes, viewed in place.
  Status read_string(std::string_view* out, uint64_t max_bytes, std::string_view what) {
    uint64_t n = 0;
    RETURN_IF_ERROR(read(&n, what));
    if (n > max_bytes) {
      return corrupt_file(cat(what, " at offset ", pos_ - 8, ": length ", n,
                              " exceeds the limit of ", max_bytes, " bytes"));
    }
    if (n > remaining()) {
      return corrupt_file(cat(what, " at offset ", pos_ - 8, ": length ", n,
                              " runs past the end of the file (", remaining(), " bytes left)"));
    }
    *out = std::string_view(reinterpret_cast<const char*>(here()), n);
    pos_ += n;
    return {};
  }

  Status truncated(uint64_t need, std::string_view what) const {
    return corrupt_file(cat("unexpected end of file at offset ", pos_, " reading ", what, " (",
                            need, " bytes needed, ", remaining(), " left)"));
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace

// --- GgufValue ---------------------------------------------------------------

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

std::string gguf_quoted(std::string_view s) {
  constexpr size_t kMaxShown = 100;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > kMaxShown) out += "...";
  out += "'";
  return out;
}

GgufValue GgufValue::scalar(GgufValueType t, int64_t v) {
  GgufValue x;
  x.type_ = t;
  x.bits_ = static_cast<uint64_t>(v);
  return x;
}

GgufValue GgufValue::u64(uint64_t v) {
  return scalar(GgufValueType::kUint64, static_cast<int64_t>(v));
}

GgufValue GgufValue::f32(float v) {
  return scalar(GgufValueType::kFloat32, static_cast<int64_t>(std::bit_cast<uint32_t>(v)));
}

GgufValue GgufValue::f64(double v) {
  return scalar(GgufValueType::kFloat64, std::bit_cast<int64_t>(v));
}

GgufValue GgufValue::string(std::string v) {
  GgufValue x;
  x.type_ = GgufValueType::kString;
  x.str_ = std::make_shared<const std::string>(std::move(v));
  return x;
}

GgufValue GgufValue::array(GgufArray v) {
  for (const auto& item : v.items) {
    CHECK(item.type() == v.elem_type) << "GGUF array of " << gguf_value_type_name(v.elem_type)
                                      << " holds a " << gguf_value_type_name(item.type());
  }
  GgufValue x;
  x.type_ = GgufValueType::kArray;
  x.arr_ = std::make_shared<const GgufArray>(std::move(v));
  return x;
}

GgufValue GgufValue::string_array(const std::vector<std::string>& v) {
  GgufArray a{.elem_type = GgufValueType::kString, .items = {}};
  a.items.reserve(v.size());
  for (const auto& s : v) a.items.push_back(string(s));
  return array(std::move(a));
}

GgufValue GgufValue::f32_array(const std::vector<float>& v) {
  GgufArray a{.elem_type = GgufValueType::kFloat32, .items = {}};
  a.items.reserve(v.size());
  for (float f : v) a.items.push_back(f32(f));
  return array(std::move(a));
}

GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) {
  GgufArray a{.elem_type = GgufValueType::kInt32, .items = {}};
  a.items.reserve(v.size());
  for (int32_t i : v) a.items.push_back(i32(i));
  return array(std::move(a));
}

bool GgufValue::is_integer() const {
  switch (type_) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

std::optional<int64_t> GgufValue::as_int() const {
  if (type_ == GgufValueType::kBool) return static_cast<int64_t>(bits_);
  if (!is_integer()) return std::nullopt;
  if (type_ == GgufValueType::kUint64 && bits_ > static_cast<uint64_t>(INT64_MAX)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(bits_);
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (type_ == GgufValueType::kBool || type_ == GgufValueType::kUint64) return bits_;
  if (!is_integer() || static_cast<int64_t>(bits_) < 0) return std::nullopt;
  return bits_;
}

std::optional<double> GgufValue::as_float() const {
  if (type_ == GgufValueType::kFloat32) return std::bit_cast<float>(static_cast<uint32_t>(bits_));
  if (type_ == GgufValueType::kFloat64) return std::bit_cast<double>(bits_);
  if (type_ == GgufValueType::kUint64) return static_cast<double>(bits_);
  if (is_integer()) return static_cast<double>(static_cast<int64_t>(bits_));
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (type_ != GgufValueType::kBool) return std::nullopt;
  return bits_ != 0;
}

const std::string* GgufValue::as_string() const {
  return type_ == GgufValueType::kString ? str_.get() : nullptr;
}
const GgufArray* GgufValue::as_array() const {
  return type_ == GgufValueType::kArray ? arr_.get() : nullptr;
}

// --- parser --------------------------------------------------------------------

class GgufParser {
 public:
  GgufParser(GgufFile* file, const GgufLimits& limits)
      : f_(file), limits_(limits), r_(file->base_, file->size_) {}

  Status parse() {
    uint64_t n_tensors = 0;
    uint64_t n_kv = 0;
    RETURN_IF_ERROR(parse_header(&n_tensors, &n_kv));
    f_->kv_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) RETURN_IF_ERROR(parse_kv(i, n_kv));
    RETURN_IF_ERROR(parse_alignment());
    f_->tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) RETURN_IF_ERROR(parse_tensor_info(i, n_tensors));
    return place_tensors();
  }

 private:
  Status parse_header(uint64_t* n_tensors, uint64_t* n_kv);
  Status parse_kv(uint64_t index, uint64_t n_kv);
  Status parse_alignment();
  Status parse_tensor_info(uint64_t index, uint64_t n_tensors);
  Status place_tensors();
  Status read_value(GgufValueType type, uint32_t depth, GgufValue* out);
  Status read_fixed(GgufValueType type, GgufValue* out);
  Status read_array(uint32_t depth, GgufValue* out);
  Status read_array_items(GgufArray* arr, uint64_t count, uint32_t depth);

  GgufFile* f_;
  const GgufLimits& limits_;
  Reader r_;
  uint64_t n_items_ = 0;  // array items so far, against max_total_items
};

Status GgufParser::parse_header(uint64_t* n_tensors, uint64_t* n_kv) {
  if (r_.remaining() < 4 || std::memcmp(r_.here(), kMagic, 4) != 0) {
    std::string_view got(reinterpret_cast<const char*>(r_.here()),
                         std::min<uint64_t>(4, r_.remaining()));
    return corrupt_file(cat("not a GGUF file: magic is ", quoted(got), ", expected 'GGUF'"));
  }
  r_.skip(4);
  uint32_t version = 0;
  RETURN_IF_ERROR(r_.read(&version, "version"));
  if (version == 1) return unsupported("GGUF version 1 is not supported (only versions 2 and 3)");
  if (version == 0x02000000u || version == 0x03000000u) {  // 2 or 3 byte-swapped
    return unsupported("big-endian GGUF files are not supported");
  }
  if (version != 2 && version != 3) {
    return corrupt_file(cat("unknown GGUF version ", version, " (expected 2 or 3)"));
  }
  f_->version_ = version;
  RETURN_IF_ERROR(r_.read(n_tensors, "tensor count"));
  RETURN_IF_ERROR(r_.read(n_kv, "metadata count"));

  // Checked before anything is reserved: counts within the limits and small
  // enough that their smallest encodings fit in the rest of the file.
  if (*n_kv > limits_.max_kv) {
    return corrupt_file(cat("metadata count ", *n_kv, " exceeds the limit of ", limits_.max_kv));
  }
  if (*n_tensors > limits_.max_tensors) {
    return corrupt_file(
        cat("tensor count ", *n_tensors, " exceeds the limit of ", limits_.max_tensors));
  }
  const uint64_t left = r_.remaining();
  if (*n_kv > left / kMinKvBytes || *n_tensors > left / kMinTensorInfoBytes ||
      *n_kv * kMinKvBytes + *n_tensors * kMinTensorInfoBytes > left) {  // each term <= left
    return corrupt_file(cat(*n_kv, " metadata entries (", kMinKvBytes, "+ bytes each) and ",
                            *n_tensors, " tensor infos (", kMinTensorInfoBytes,
                            "+ bytes each) cannot fit in the ", left,
                            " bytes left after the header"));
  }
  return {};
}

Status GgufParser::parse_kv(uint64_t index, uint64_t n_kv) {
  std::string_view key;
  Status st = r_.read_string(&key, kMaxNameBytes, "key");
  if (st.ok()) st = check_name(key, "metadata key");
  if (!st.ok()) return st.with_context(cat("metadata entry ", index, " of ", n_kv));

  auto [it, inserted] = f_->kv_index_.emplace(std::string(key), f_->kv_.size());
  if (!inserted) return corrupt_file(cat("duplicate metadata key ", quoted(key)));
  uint32_t type = 0;
  st = r_.read(&type, "value type");
  if (st.ok() && !valid_value_type(type)) st = corrupt_file(cat("unknown value type ", type));
  GgufValue value;
  if (st.ok()) st = read_value(static_cast<GgufValueType>(type), 0, &value);
  if (!st.ok()) return st.with_context(cat("metadata key ", quoted(key)));
  f_->kv_.emplace_back(it->first, std::move(value));
  return {};
}

Status GgufParser::read_value(GgufValueType type, uint32_t depth, GgufValue* out) {
  if (type == GgufValueType::kArray) return read_array(depth + 1, out);
  if (type == GgufValueType::kString) {
    std::string_view s;
    RETURN_IF_ERROR(r_.read_string(&s, limits_.max_string_bytes, "string"));
    *out = GgufValue::string(std::string(s));
    return {};
  }
  return read_fixed(type, out);
}

Status GgufParser::read_fixed(GgufValueType type, GgufValue* out) {
  uint64_t n = fixed_size(type);
  if (r_.remaining() < n) return r_.truncated(n, gguf_value_type_name(type));
  if (type == GgufValueType::kBool && *r_.here() > 1) {
    return corrupt_file(
        cat("bool at offset ", r_.pos(), " has value ", *r_.here(), " (must be 0 or 1)"));
  }
  *out = decode_fixed(type, r_.here());
  r_.skip(n);
  return {};
}

// `depth` counts this array: a top-level array has depth 1.
Status GgufParser::read_array(uint32_t depth, GgufValue* out) {
  if (depth > limits_.max_array_depth) {
    return corrupt_file(
        cat("arrays nested deeper than ", limits_.max_array_depth, " levels at offset ", r_.pos()));
  }
  uint32_t elem_type = 0;
  uint64_t count = 0;
  RETURN_IF_ERROR(r_.read(&elem_type, "array element type"));
  if (!valid_value_type(elem_type)) {
    return corrupt_file(cat("unknown array element type ", elem_type, " at offset ", r_.pos() - 4));
  }
  const auto type = static_cast<GgufValueType>(elem_type);
  RETURN_IF_ERROR(r_.read(&count, "array count"));
  if (count > limits_.max_array_items) {
    return corrupt_file(
        cat("array count ", count, " exceeds the limit of ", limits_.max_array_items));
  }
  const uint64_t min_item = min_encoded_size(type);
  if (count > r_.remaining() / min_item) {
    return corrupt_file(cat("array of ", count, " ", gguf_value_type_name(type),
                            " items at offset ", r_.pos() - 12, " needs at least ",
                            count * min_item, " bytes but only ", r_.remaining(), " are left"));
  }
  n_items_ += count;  // no overflow: each term is <= max_array_items
  if (n_items_ > limits_.max_total_items) {
    return corrupt_file(
        cat("the file's arrays hold more than ", limits_.max_total_items, " items in total"));
  }
  GgufArray arr{.elem_type = type, .items = {}};
  arr.items.reserve(count);
  RETURN_IF_ERROR(read_array_items(&arr, count, depth));
  *out = GgufValue::array(std::move(arr));
  return {};
}

// The hot loop for vocabularies: no per-item Status or context strings unless
// an item fails. The caller has checked that `count` minimal items fit.
Status GgufParser::read_array_items(GgufArray* arr, uint64_t count, uint32_t depth) {
  const GgufValueType type = arr->elem_type;
  if (type == GgufValueType::kString) {
    for (uint64_t i = 0; i < count; ++i) {
      std::string_view s;
      Status st = r_.read_string(&s, limits_.max_string_bytes, "string");
      if (!st.ok()) return st.with_context(cat("array item ", i));
      arr->items.push_back(GgufValue::string(std::string(s)));
    }
    return {};
  }
  if (type == GgufValueType::kArray) {
    for (uint64_t i = 0; i < count; ++i) {
      GgufValue v;
      Status st = read_array(depth + 1, &v);
      if (!st.ok()) return st.with_context(cat("array item ", i));
      arr->items.push_back(std::move(v));
    }
    return {};
  }
  const uint64_t size = fixed_size(type);  // count * size <= remaining, checked
  const uint8_t* p = r_.here();
  for (uint64_t i = 0; i < count; ++i, p += size) {
    if (type == GgufValueType::kBool && *p > 1) {
      return corrupt_file(cat("array item ", i, ": bool has value ", *p, " (must be 0 or 1)"));
    }
    arr->items.push_back(decode_fixed(type, p));
  }
  r_.skip(count * size);
  return {};
}

Status GgufParser::parse_alignment() {
  const GgufValue* v = f_->find(kAlignmentKey);
  if (v == nullptr) return {};
  if (v->type() != GgufValueType::kUint32) {
    return corrupt_file(
        cat(kAlignmentKey, " has type ", gguf_value_type_name(v->type()), ", expected uint32"));
  }
  if (!is_pow2(v->raw_bits())) {
    return corrupt_file(cat(kAlignmentKey, " is ", v->raw_bits(), ", which is not a power of two"));
  }
  f_->alignment_ = v->raw_bits();
  return {};
}

Status GgufParser::parse_tensor_info(uint64_t index, uint64_t n_tensors) {
  std::string_view name;
  Status st = r_.read_string(&name, kMaxNameBytes, "tensor name");
  if (st.ok()) st = check_name(name, "tensor name");
  if (!st.ok()) return st.with_context(cat("tensor info ", index, " of ", n_tensors));
  auto [it, inserted] = f_->tensor_index_.emplace(std::string(name), f_->tensors_.size());
  if (!inserted) return corrupt_file(cat("duplicate tensor name ", quoted(name)));
  const std::string context = cat("tensor ", quoted(name));

  GgufTensor t;
  t.name = it->first;
  uint32_t n_dims = 0;
  RETURN_IF_ERROR(r_.read(&n_dims, "n_dims").with_context(context));
  if (n_dims < 1 || n_dims > 4) {
    return corrupt_file(cat(context, ": n_dims is ", n_dims, ", expected 1 to 4"));
  }
  t.n_dims = static_cast<int>(n_dims);
  int64_t n_elements = 1;
  for (uint32_t i = 0; i < n_dims; ++i) {
    uint64_t ne = 0;
    RETURN_IF_ERROR(r_.read(&ne, "dimension").with_context(context));
    if (ne > static_cast<uint64_t>(INT64_MAX)) {
      return corrupt_file(
          cat(context, ": dimension ", i, " is negative (", static_cast<int64_t>(ne), ")"));
    }
    t.ne[i] = static_cast<int64_t>(ne);
    if (__builtin_mul_overflow(n_elements, t.ne[i], &n_elements)) {
      return corrupt_file(cat(context, ": element count overflows int64"));
    }
  }
  uint32_t type_id = 0;
  RETURN_IF_ERROR(r_.read(&type_id, "tensor type").with_context(context));
  std::optional<GgmlTypeTraits> tt = ggml_type_traits(type_id);
  if (!tt) return corrupt_file(cat(context, ": unknown ggml type id ", type_id));
  t.type = static_cast<GgmlType>(type_id);
  if (t.ne[0] % tt->block_size != 0) {
    return corrupt_file(cat(context, ": row length ", t.ne[0], " is not a multiple of the ",
                            tt->name, " block size ", tt->block_size));
  }
  std::optional<uint64_t> n_bytes = tensor_bytes(*tt, t.ne.data(), t.n_dims);
  if (!n_bytes) return corrupt_file(cat(context, ": byte size overflows"));
  t.n_bytes = *n_bytes;
  RETURN_IF_ERROR(r_.read(&t.offset, "tensor offset").with_context(context));
  if (t.offset % f_->alignment_ != 0) {
    return corrupt_file(cat(context, ": offset ", t.offset, " is not a multiple of the alignment ",
                            f_->alignment_));
  }
  f_->tensors_.push_back(std::move(t));
  return {};
}

// Places each tensor in the data section. As llama.cpp's reader requires, the
// tensors lie back to back in the order of their infos: each starts at the
// running offset, the previous tensor's offset + size aligned up to
// general.alignment (0 for the first). A gap (a tensor whose declared type
// is smaller than the bytes it was written with, say) or an overlap is an
// error naming the tensor, as is data past the end of the file. The file may
// end right after the last tensor.
Status GgufParser::place_tensors() {
  const uint64_t header_end = r_.pos();  // <= file size < 2^63
  f_->data_offset_ = align_up(header_end, f_->alignment_);
  const uint64_t size = f_->size_;
  uint64_t expected = 0;  // the running offset, relative to the data section
  const GgufTensor* prev = nullptr;
  for (GgufTensor& t : f_->tensors_) {
    uint64_t begin = 0;
    uint64_t end = 0;
    if (__builtin_add_overflow(f_->data_offset_, t.offset, &begin) ||
        __builtin_add_overflow(begin, t.n_bytes, &end)) {
      return corrupt_file(cat("tensor ", quoted(t.name), ": offset ", t.offset, " + size ",
                              t.n_bytes, " overflows"));
    }
    if (end > size) {
      return corrupt_file(cat("tensor ", quoted(t.name), ": data ", range(begin, end),
                              " lies past the end of the file (size ", size, ")"));
    }
    if (t.offset != expected) {
      const std::string after =
          prev == nullptr ? std::string("the start of the data section")
                          : cat("the end of ", quoted(prev->name), " ",
                                range(prev->offset, prev->offset + prev->n_bytes), " aligned to ",
                                f_->alignment_);
      return corrupt_file(cat("tensor ", quoted(t.name), " has offset ", t.offset, ", expected ",
                              expected, " (", after, ")"));
    }
    t.data = f_->base_ + begin;
    // No overflow: the tensor ends inside the file (< 2^63).
    expected = align_up(t.offset + t.n_bytes, f_->alignment_);
    prev = &t;
  }
  return {};
}

// --- GgufFile ------------------------------------------------------------------

Result<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* bytes, size_t size,
                                                  const GgufLimits& limits) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->base_ = bytes;
  f->size_ = size;
  RETURN_IF_ERROR(GgufParser(f.get(), limits).parse());
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path,
                                                 const GgufLimits& limits) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = cat("cannot open ", quoted(path), ": ", std::strerror(err));
    return err == ENOENT ? not_found(std::move(msg)) : io_error(std::move(msg));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error(cat("cannot stat ", quoted(path), ": ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error(cat(quoted(path), " is not a regular file"));
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  if (st.st_size > 0) {
    void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (map == MAP_FAILED) {
      return io_error(cat("cannot mmap ", quoted(path), ": ", std::strerror(err)));
    }
    f->map_ = map;  // unmapped by ~GgufFile, also when parsing fails
    f->base_ = static_cast<const uint8_t*>(map);
    f->size_ = static_cast<uint64_t>(st.st_size);
  } else {
    ::close(fd);
  }
  RETURN_IF_ERROR(GgufParser(f.get(), limits).parse().with_context(path));
  return f;
}

GgufFile::~GgufFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
  if (owned_ != nullptr) ::munmap(owned_, owned_size_);
}

Status GgufFile::own_data(const std::function<bool(const GgufTensor&)>& keep) {
  if (map_ == nullptr) return {};  // an in-memory image, or done already
  constexpr uint64_t kAlign = 64;
  uint64_t total = 0;
  for (const GgufTensor& t : tensors_) {
    if (t.data != nullptr && keep(t)) total += align_up(t.n_bytes, kAlign);
  }
  uint8_t* dst = nullptr;
  if (total > 0) {
    void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return resource_exhausted(cat("cannot allocate ", total, " bytes to hold the tensors of ", quoted(path_),
                                    " in memory: ", std::strerror(errno)));
    }
    owned_ = p;
    owned_size_ = total;
    dst = static_cast<uint8_t*>(p);
  }
  for (GgufTensor& t : tensors_) {
    if (t.data != nullptr && keep(t)) {
      if (t.n_bytes > 0) std::memcpy(dst, t.data, t.n_bytes);
      t.data = dst;
      dst += align_up(t.n_bytes, kAlign);
    } else {
      t.data = nullptr;
    }
  }
  if (owned_ != nullptr) ::mprotect(owned_, owned_size_, PROT_READ);  // read-only, as the mapping was
  ::munmap(map_, size_);
  map_ = nullptr;
  base_ = nullptr;
  return {};
}

uint64_t GgufFile::release_pages(const GgufTensor& t) const {
  // Only the mapping: MADV_DONTNEED on anonymous or heap memory (an image
  // given to parse()) would zero it.
  if (map_ == nullptr || t.data == nullptr) return 0;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto lo = reinterpret_cast<uintptr_t>(t.data), hi = lo + t.n_bytes;
  const auto map_lo = reinterpret_cast<uintptr_t>(map_);
  if (lo < map_lo || hi > map_lo + size_) return 0;
  // Whole pages only: a page shared with a neighbouring tensor stays.
  const uintptr_t first = (lo + page - 1) / page * page, last = hi / page * page;
  if (last <= first) return 0;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

Status missing_key(std::string_view key) {
  return not_found(cat("metadata key ", quoted(key), " not found"));
}

Status wrong_type(std::string_view key, const GgufValue& v, std::string_view expected) {
  return corrupt_file(cat("metadata key ", quoted(key), " has type ",
                          gguf_value_type_name(v.type()), ", expected ", expected));
}

}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(key);
  if (v->as_string() == nullptr) return wrong_type(key, *v, "string");
  return *v->as_string();
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(key);
  if (!v->is_integer()) return wrong_type(key, *v, "an integer");
  std::optional<int64_t> i = v->as_int();
  if (!i) {
    return corrupt_file(
        cat("metadata key ", quoted(key), ": value ", v->raw_bits(), " does not fit in int64"));
  }
  return *i;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(key);
  std::optional<double> d = v->as_float();
  if (!d) return wrong_type(key, *v, "a number");
  return *d;
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(key);
  if (!v->as_bool()) return wrong_type(key, *v, "bool");
  return *v->as_bool();
}

const GgufArray* GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  return v == nullptr ? nullptr : v->as_array();
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace zl
